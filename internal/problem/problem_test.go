package problem_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/problem"
)

// The wire form is pinned byte for byte: clients and stored idempotent
// answers compare bodies, so a change here is a change of every answer.
func TestWrite(t *testing.T) {
	t.Parallel()
	type ext struct {
		problem.Details
		Errors []string `json:"errors,omitempty"`
	}
	for name, tc := range map[string]struct {
		v      any
		opts   *problem.Opts
		body   string
		header map[string]string
	}{
		"plain": {
			v:      problem.Details{Type: problem.Docs + "#x", Title: "X", Status: 409, Detail: "d"},
			body:   `{"type":"https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#x","title":"X","status":409,"detail":"d"}`,
			header: map[string]string{"Content-Type": "application/problem+json", "Content-Length": "116", "Cache-Control": "", "Retry-After": ""},
		},
		"retry after rounds up": {
			v:      problem.Details{Type: "t", Title: "T", Status: 409},
			opts:   &problem.Opts{RetryAfter: 1001 * time.Millisecond},
			body:   `{"type":"t","title":"T","status":409}`,
			header: map[string]string{"Retry-After": "2", "Content-Length": "37"},
		},
		"no store, newline, extension members": {
			v:      ext{Details: problem.Details{Type: "t", Title: "T", Status: 409}, Errors: []string{"e"}},
			opts:   &problem.Opts{NoStore: true, Newline: true},
			body:   `{"type":"t","title":"T","status":409,"errors":["e"]}` + "\n",
			header: map[string]string{"Cache-Control": "no-store", "Content-Length": "53", "Retry-After": ""},
		},
		"members map": {
			v:    map[string]any{"type": "t", "status": "in_flight"},
			body: `{"status":"in_flight","type":"t"}`,
		},
	} {
		rec := httptest.NewRecorder()
		problem.Write(rec, http.StatusConflict, tc.v, tc.opts)
		if rec.Code != http.StatusConflict || rec.Body.String() != tc.body {
			t.Errorf("%s: %d %s, want 409 %s", name, rec.Code, rec.Body, tc.body)
		}
		for k, want := range tc.header {
			if got := rec.Header().Get(k); got != want {
				t.Errorf("%s: %s %q, want %q", name, k, got, want)
			}
		}
	}
}

func TestWriteUnencodable(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	problem.Write(rec, http.StatusConflict, map[string]any{"f": func() {}}, nil)
	if rec.Code != http.StatusInternalServerError || rec.Body.String() != `{"type":"about:blank","title":"Internal Server Error","status":500}` {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]int64{0: 0, 1: 1, time.Second: 1, time.Second + 1: 2, 2500 * time.Millisecond: 3} {
		if got := problem.RetryAfterSeconds(d); got != want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}
