package idempotency

import (
	"errors"
	"net/http"
	"time"

	"github.com/retrysafe/retrysafe/internal/problem"
)

// Problem is an RFC 9457 problem details object, the body of every answer
// the middleware gives on its own (Content-Type application/problem+json):
// its members type, title, status and detail (omitted when empty), in that
// order. It is the problem type the sidecar and the sandboxes write too.
type Problem = problem.Details

// Problem type URIs, stable for clients to switch on: each is a section of
// ProblemDocs, the page docs/problems.md in the repository.
const (
	ProblemDocs = problem.Docs

	ProblemKeyMissing     = ProblemDocs + "#idempotency-key-missing"
	ProblemKeyInvalid     = ProblemDocs + "#idempotency-key-invalid"
	ProblemKeyReused      = ProblemDocs + "#idempotency-key-reused"
	ProblemInFlight       = ProblemDocs + "#idempotency-request-in-progress"
	ProblemUnauthorized   = ProblemDocs + "#unauthenticated"
	ProblemBodyTooLarge   = ProblemDocs + "#body-too-large"
	ProblemBodyUnreadable = ProblemDocs + "#body-unreadable"
	ProblemUnavailable    = ProblemDocs + "#idempotency-store-unavailable"
	ProblemNotCommitted   = ProblemDocs + "#not-committed"
	ProblemCommitUnknown  = ProblemDocs + "#commit-unknown"
	ProblemInternalServer = ProblemDocs + "#internal"
)

// ProblemTypes lists every problem type the middleware answers with.
var ProblemTypes = []string{ProblemKeyMissing, ProblemKeyInvalid, ProblemKeyReused, ProblemInFlight, ProblemUnauthorized,
	ProblemBodyTooLarge, ProblemBodyUnreadable, ProblemUnavailable, ProblemNotCommitted, ProblemCommitUnknown, ProblemInternalServer}

// The middleware's own failures, answered 400, 500 and 503.
var (
	errBodyRead     = errors.New("idempotency: reading the request body")
	errNotCommitted = errors.New("idempotency: transaction not committed")
	// errCommitUnknown: the connection was lost with COMMIT sent, and what
	// it left could not be read (see Middleware.commitLost).
	errCommitUnknown = errors.New("idempotency: transaction's commit unknown")
	errStore         = errors.New("idempotency: store unavailable")
)

// problemFor maps the middleware's errors to answers. Every one of them is
// given before any effect (or, for ProblemNotCommitted, after a rollback
// undid them; for ProblemCommitUnknown, after a commit that either stored
// the answer with the effects or undid both), so a retry with the same key
// is always safe.
func problemFor(err error) (Problem, time.Duration) {
	var inflight *InFlightError
	switch {
	case errors.Is(err, ErrKeyMissing):
		return answer(ProblemKeyMissing, "Idempotency-Key header missing", http.StatusBadRequest,
			"This operation requires an Idempotency-Key header: a unique value (at most 255 printable ASCII characters) that the client reuses when it retries the same request."), 0
	case errors.Is(err, ErrKeyInvalid):
		return answer(ProblemKeyInvalid, "Invalid Idempotency-Key", http.StatusBadRequest, err.Error()), 0
	case errors.Is(err, ErrKeyReused):
		return answer(ProblemKeyReused, "Idempotency-Key reused with a different request", http.StatusUnprocessableEntity,
			"This key was first used with a different method, path or body. Use a new key for a new request."), 0
	case errors.As(err, &inflight):
		return answer(ProblemInFlight, "A request with this Idempotency-Key is in progress", http.StatusConflict,
			"The first request with this key has not finished. Retry after the given delay to receive its answer."), inflight.RetryAfter
	case errors.Is(err, ErrUnauthenticated):
		return answer(ProblemUnauthorized, "Unauthenticated", http.StatusUnauthorized, "The caller could not be identified."), 0
	case errors.Is(err, ErrBodyTooLarge):
		return answer(ProblemBodyTooLarge, "Request body too large", http.StatusRequestEntityTooLarge, ""), 0
	case errors.Is(err, errBodyRead):
		return answer(ProblemBodyUnreadable, "Request body could not be read", http.StatusBadRequest, ""), 0
	case errors.Is(err, errNotCommitted):
		return answer(ProblemNotCommitted, "Request not committed", http.StatusInternalServerError,
			"The request's effects were rolled back and nothing was stored; retrying with the same key is safe."), 0
	case errors.Is(err, errCommitUnknown):
		return answer(ProblemCommitUnknown, "Request's commit unknown", http.StatusServiceUnavailable,
			"The connection to the database was lost as the request's effects were committed. Retry with the same key: if they were committed, you receive the stored answer; if not, the request runs again."), time.Second
	case errors.Is(err, errStore):
		return answer(ProblemUnavailable, "Idempotency store unavailable", http.StatusServiceUnavailable,
			"Nothing was executed; retrying with the same key is safe."), time.Second
	default:
		return answer(ProblemInternalServer, "Internal server error", http.StatusInternalServerError, ""), 0
	}
}

func answer(typ, title string, status int, detail string) Problem {
	return Problem{Type: typ, Title: title, Status: status, Detail: detail}
}

// WriteProblem answers with p as application/problem+json (and
// Retry-After when retryAfter > 0, rounded up to whole seconds as HTTP
// requires), as the middleware answers on its own: a handler can answer its
// own errors in the same form.
func WriteProblem(w http.ResponseWriter, p Problem, retryAfter time.Duration) {
	problem.Write(w, p.Status, p, &problem.Opts{RetryAfter: retryAfter})
}

func writeError(w http.ResponseWriter, err error) {
	p, ra := problemFor(err)
	WriteProblem(w, p, ra)
}
