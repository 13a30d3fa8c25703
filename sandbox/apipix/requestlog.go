package apipix

import (
	"net/http"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/sandbox/internal/standin"
)

// Request is one charge or refund request the PSP received: the txid (or
// the devolução id) it named is the receiver's key, the provider's witness
// of what each attempt sent.
type Request struct {
	At     time.Time `json:"at"`
	Method string    `json:"method"`
	Path   string    `json:"path"`
	// IdempotencyKey is the txid, or the devolução id of a refund request
	// (named so for the harness, which reads the v1 sandbox's log the same
	// way).
	IdempotencyKey string `json:"idempotency_key"`
	Status         int    `json:"status"` // 0: the connection was dropped without an answer
}

// maxLog bounds the request log.
const maxLog = 10000

// logRequests records the requests about charges (PUT and GET
// /api/cob/{txid}) and refunds (PUT and GET
// /api/pix/{e2eid}/devolucao/{id}), with the status answered, 0 for a
// dropped answer.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		txid, ok := requestKey(r.URL.Path)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		rec := &standin.Recorder{ResponseWriter: w}
		entry := Request{At: s.now(), Method: r.Method, Path: r.URL.Path, IdempotencyKey: txid}
		defer func() {
			entry.Status = rec.Status
			if v := recover(); v != nil {
				entry.Status = 0
				defer panic(v)
			}
			s.mu.Lock()
			if len(s.reqlog) >= maxLog {
				s.reqlog = s.reqlog[1:]
			}
			s.reqlog = append(s.reqlog, entry)
			s.mu.Unlock()
		}()
		next.ServeHTTP(rec, r)
	})
}

// requestKey is the receiver's id a logged request names.
func requestKey(path string) (string, bool) {
	if txid, ok := strings.CutPrefix(path, "/api/cob/"); ok {
		return txid, txid != "" && !strings.Contains(txid, "/")
	}
	rest, ok := strings.CutPrefix(path, "/api/pix/")
	if !ok {
		return "", false
	}
	e2e, id, ok := strings.Cut(rest, "/devolucao/")
	return id, ok && e2e != "" && id != "" && !strings.Contains(e2e, "/") && !strings.Contains(id, "/")
}

// Requests returns the request log, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqlog...)
}

func (s *Server) listRequests(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"data": s.Requests()})
}
