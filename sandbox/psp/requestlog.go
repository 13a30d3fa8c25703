package psp

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/sandbox/internal/standin"
)

// maxLoggedRequests bounds the in-memory request log.
const maxLoggedRequests = 10000

// LoggedRequest is one request the sandbox received about charges: the
// provider's own witness of which Idempotency-Key each attempt carried.
type LoggedRequest struct {
	At     time.Time `json:"at"`
	Method string    `json:"method"`
	Path   string    `json:"path"`
	// Key is the Idempotency-Key header of a POST, or the idempotency_key
	// query parameter of a status lookup.
	Key    string `json:"idempotency_key,omitempty"`
	Status int    `json:"status"` // 0: the connection was dropped without an answer
}

// requestLog keeps the last requests in memory (GET /_sandbox/requests).
type requestLog struct {
	mu   sync.Mutex
	reqs []LoggedRequest
}

func (l *requestLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/pix/charges") {
			next.ServeHTTP(w, r)
			return
		}
		lr := LoggedRequest{At: time.Now().UTC(), Method: r.Method, Path: r.URL.Path, Key: r.Header.Get("Idempotency-Key")}
		if lr.Key == "" {
			lr.Key = r.URL.Query().Get("idempotency_key")
		}
		sw := &standin.Recorder{ResponseWriter: w}
		defer func() {
			lr.Status = sw.Status
			l.mu.Lock()
			l.reqs = append(l.reqs, lr)
			if len(l.reqs) > maxLoggedRequests {
				l.reqs = l.reqs[len(l.reqs)-maxLoggedRequests:]
			}
			l.mu.Unlock()
		}()
		next.ServeHTTP(sw, r)
	})
}

func (l *requestLog) serve(w http.ResponseWriter, _ *http.Request) {
	l.mu.Lock()
	out := append([]LoggedRequest{}, l.reqs...)
	l.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"data": out}) //nolint:errcheck
}
