package fault_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/sandbox/fault"
)

func TestParse(t *testing.T) {
	t.Parallel()
	s, err := fault.Parse(" delay=250ms, fail-after ,slow=2s")
	if err != nil || s.Delay != 250*time.Millisecond || !s.FailAfter || s.Slow != 2*time.Second || s.FailBefore || s.DropAfter {
		t.Fatalf("%+v %v", s, err)
	}
	if back, err := fault.Parse(s.String()); err != nil || back != s {
		t.Fatalf("round trip %q: %+v %v", s.String(), back, err)
	}
	if s, err := fault.Parse(""); err != nil || !s.IsZero() || s.String() != "none" {
		t.Fatalf("empty: %+v %v", s, err)
	}
	for _, bad := range []string{"explode", "delay", "delay=soon", "slow=-1s", "fail-before=1", "delay=1h"} {
		if _, err := fault.Parse(bad); !errors.Is(err, fault.ErrBadSpec) {
			t.Errorf("Parse(%q) = %v", bad, err)
		}
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	var executed atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		executed.Add(1)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "done")
	})
	procDefault := fault.Injector{
		Default: fault.Spec{FailBefore: true},
		Applies: func(r *http.Request) bool { return r.URL.Path == "/flaky" },
	}
	srv := httptest.NewServer(procDefault.Wrap(h))
	t.Cleanup(srv.Close)

	call := func(path, spec string, timeout time.Duration) (int, string, error) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader("{}"))
		if spec != "" {
			req.Header.Set(fault.Header, spec)
		}
		c := &http.Client{Timeout: timeout}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}

	for _, tc := range []struct {
		name, path, spec string
		timeout          time.Duration
		status           int
		wantErr          bool
		executes         int32
		minTime          time.Duration
	}{
		{name: "none", path: "/", status: 201, executes: 1},
		{name: "fail-before", path: "/", spec: "fail-before", status: 500, executes: 0},
		{name: "fail-after", path: "/", spec: "fail-after", status: 500, executes: 1},
		{name: "drop-after", path: "/", spec: "drop-after", wantErr: true, executes: 1},
		{name: "slow beyond timeout", path: "/", spec: "slow=2s", timeout: 200 * time.Millisecond, wantErr: true, executes: 1},
		{name: "slow within timeout", path: "/", spec: "slow=50ms", status: 201, executes: 1, minTime: 50 * time.Millisecond},
		{name: "delay", path: "/", spec: "delay=100ms", status: 201, executes: 1, minTime: 100 * time.Millisecond},
		{name: "bad header", path: "/", spec: "boom", status: 400, executes: 0},
		{name: "process default", path: "/flaky", status: 500, executes: 0},
		{name: "header overrides default", path: "/flaky", spec: "none", status: 201, executes: 1},
	} {
		before := executed.Load()
		start := time.Now()
		timeout := tc.timeout
		if timeout == 0 {
			timeout = 10 * time.Second
		}
		status, body, err := call(tc.path, tc.spec, timeout)
		took := time.Since(start)
		if tc.wantErr != (err != nil) {
			t.Errorf("%s: err %v", tc.name, err)
		}
		if !tc.wantErr && status != tc.status {
			t.Errorf("%s: status %d %s, want %d", tc.name, status, body, tc.status)
		}
		// A handler that ran after the client gave up still ran.
		deadline := time.Now().Add(3 * time.Second)
		for executed.Load()-before != tc.executes && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := executed.Load() - before; got != tc.executes {
			t.Errorf("%s: executed %d times, want %d", tc.name, got, tc.executes)
		}
		if took < tc.minTime {
			t.Errorf("%s: took %v, want at least %v", tc.name, took, tc.minTime)
		}
	}
}

func TestRate(t *testing.T) {
	t.Parallel()
	in := fault.Injector{Default: fault.Spec{FailBefore: true}, Rate: 0.5}
	h := in.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	fails := 0
	for range 400 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
		if rec.Code == 500 {
			fails++
		}
	}
	if fails < 120 || fails > 280 {
		t.Fatalf("%d of 400 failed at rate 0.5", fails)
	}
}
