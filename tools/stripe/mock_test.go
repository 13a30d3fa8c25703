package stripe_test

import (
	"bufio"
	"context"
	"go/build"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// stripeMock starts stripe-mock (installed by scripts/stripe-mock.sh) on a
// free port and returns its base URL. It fails, never skips, when the
// binary is missing.
func stripeMock(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("STRIPE_MOCK")
	if bin == "" {
		var dirs []string
		if gobin := os.Getenv("GOBIN"); gobin != "" {
			dirs = append(dirs, gobin)
		}
		for _, p := range filepath.SplitList(build.Default.GOPATH) {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, "stripe-mock")); err == nil {
				bin = filepath.Join(d, "stripe-mock")
				break
			}
		}
	}
	if bin == "" {
		if p, err := exec.LookPath("stripe-mock"); err == nil {
			bin = p
		}
	}
	if bin == "" {
		t.Fatal("stripe-mock is not installed: run scripts/stripe-mock.sh (or set STRIPE_MOCK to its path)")
	}
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "Listening for HTTP at address: "); ok {
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatal("stripe-mock did not say where it listens within 30s")
	}
	return ""
}

// recorder is an http.RoundTripper that keeps what stripe-go sent.
type recorder struct {
	mu   sync.Mutex
	reqs []sent
}

type sent struct {
	method, path, idemKey string
	query                 url.Values
	form                  url.Values
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	s := sent{method: req.Method, path: req.URL.Path, idemKey: req.Header.Get("Idempotency-Key"), query: req.URL.Query()}
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		_ = req.Body.Close()
		s.form, _ = url.ParseQuery(string(b))
		req.Body = io.NopCloser(strings.NewReader(string(b)))
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, s)
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func (r *recorder) sent() []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sent(nil), r.reqs...)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}
