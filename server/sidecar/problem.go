package sidecar

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Problem is an RFC 9457 problem details object: the body of every error
// answer (Content-Type application/problem+json).
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Errors lists field errors (400 on execute): the field's name and the
	// rule it broke, never the value.
	Errors []FieldProblem `json:"errors,omitempty"`
}

// FieldProblem is one field that could not be normalized.
type FieldProblem struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// Problem type URIs, stable so that clients can switch on them.
const (
	ProblemUnauthenticated = "urn:retrysafe:problem:unauthenticated"
	ProblemUnknownAction   = "urn:retrysafe:problem:unknown-action"
	ProblemBadRequest      = "urn:retrysafe:problem:bad-request"
	ProblemInvalidFields   = "urn:retrysafe:problem:invalid-fields"
	ProblemBodyTooLarge    = "urn:retrysafe:problem:body-too-large"
	ProblemNotFound        = "urn:retrysafe:problem:not-found"
	ProblemKeyInUse        = "urn:retrysafe:problem:key-in-use"
	ProblemUnavailable     = "urn:retrysafe:problem:unavailable"
	ProblemInternal        = "urn:retrysafe:problem:internal"
)

func writeProblem(w http.ResponseWriter, p Problem) {
	body, _ := json.Marshal(p) // strings and ints only: cannot fail
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(p.Status)
	w.Write(append(body, '\n')) //nolint:errcheck // the client may be gone
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeProblem(w, Problem{Type: ProblemInternal, Title: "Internal server error", Status: http.StatusInternalServerError})
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	// Answers hold frozen payloads (personal data) and change over time.
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	w.Write(append(body, '\n')) //nolint:errcheck // the client may be gone
}

// retryAfterSeconds rounds d up to whole seconds (HTTP's unit), at least min.
func retryAfterSeconds(d, min time.Duration) int {
	if d < min {
		d = min
	}
	return int(math.Ceil(d.Seconds()))
}
