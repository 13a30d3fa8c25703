package idempotency

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Problem is an RFC 9457 problem details object, the body of every answer
// the middleware gives on its own (Content-Type application/problem+json).
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Problem type URIs, stable so that clients can switch on them.
const (
	ProblemKeyMissing     = "urn:retrysafe:problem:idempotency-key-missing"
	ProblemKeyInvalid     = "urn:retrysafe:problem:idempotency-key-invalid"
	ProblemKeyReused      = "urn:retrysafe:problem:idempotency-key-reused"
	ProblemInFlight       = "urn:retrysafe:problem:idempotency-request-in-progress"
	ProblemUnauthorized   = "urn:retrysafe:problem:unauthenticated"
	ProblemBodyTooLarge   = "urn:retrysafe:problem:body-too-large"
	ProblemBodyUnreadable = "urn:retrysafe:problem:body-unreadable"
	ProblemUnavailable    = "urn:retrysafe:problem:idempotency-store-unavailable"
	ProblemNotCommitted   = "urn:retrysafe:problem:not-committed"
	ProblemInternalServer = "urn:retrysafe:problem:internal"
)

// problemFor maps the middleware's errors to answers. Every one of them is
// given before any effect (or, for ProblemNotCommitted, after a rollback
// undid them), so a retry with the same key is always safe.
func problemFor(err error) (Problem, time.Duration) {
	var inflight *InFlightError
	switch {
	case errors.Is(err, ErrKeyMissing):
		return Problem{ProblemKeyMissing, "Idempotency-Key header missing", http.StatusBadRequest,
			"This operation requires an Idempotency-Key header: a unique value (at most 255 printable ASCII characters) that the client reuses when it retries the same request."}, 0
	case errors.Is(err, ErrKeyInvalid):
		return Problem{ProblemKeyInvalid, "Invalid Idempotency-Key", http.StatusBadRequest, err.Error()}, 0
	case errors.Is(err, ErrKeyReused):
		return Problem{ProblemKeyReused, "Idempotency-Key reused with a different request", http.StatusUnprocessableEntity,
			"This key was first used with a different method, path or body. Use a new key for a new request."}, 0
	case errors.As(err, &inflight):
		return Problem{ProblemInFlight, "A request with this Idempotency-Key is in progress", http.StatusConflict,
			"The first request with this key has not finished. Retry after the given delay to receive its answer."}, inflight.RetryAfter
	case errors.Is(err, ErrUnauthenticated):
		return Problem{ProblemUnauthorized, "Unauthenticated", http.StatusUnauthorized, "The caller could not be identified."}, 0
	case errors.Is(err, ErrBodyTooLarge):
		return Problem{ProblemBodyTooLarge, "Request body too large", http.StatusRequestEntityTooLarge, ""}, 0
	case errors.Is(err, errBodyRead):
		return Problem{ProblemBodyUnreadable, "Request body could not be read", http.StatusBadRequest, ""}, 0
	case errors.Is(err, errNotCommitted):
		return Problem{ProblemNotCommitted, "Request not committed", http.StatusInternalServerError,
			"The request's effects were rolled back and nothing was stored; retrying with the same key is safe."}, 0
	case errors.Is(err, errStore):
		return Problem{ProblemUnavailable, "Idempotency store unavailable", http.StatusServiceUnavailable,
			"Nothing was executed; retrying with the same key is safe."}, time.Second
	default:
		return Problem{ProblemInternalServer, "Internal server error", http.StatusInternalServerError, ""}, 0
	}
}

var (
	errNotCommitted = errors.New("idempotency: transaction not committed")
	errStore        = errors.New("idempotency: store unavailable")
	errBodyRead     = errors.New("idempotency: reading the request body")
)

// WriteProblem answers with a problem+json body (and Retry-After when
// retryAfter > 0, rounded up to whole seconds as HTTP requires).
func WriteProblem(w http.ResponseWriter, p Problem, retryAfter time.Duration) {
	body, _ := json.Marshal(p)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if retryAfter > 0 {
		secs := int64((retryAfter + time.Second - 1) / time.Second)
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	w.WriteHeader(p.Status)
	w.Write(body) //nolint:errcheck // the client may be gone
}

func writeError(w http.ResponseWriter, err error) {
	p, ra := problemFor(err)
	WriteProblem(w, p, ra)
}
