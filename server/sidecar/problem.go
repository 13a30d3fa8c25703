package sidecar

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/retrysafe/retrysafe/internal/problem"
)

// Problem is an RFC 9457 problem details object: the body of every error
// answer (Content-Type application/problem+json).
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Errors lists field errors (400 on execute): the field's name and the
	// rule it broke, never the value; every field that could not be
	// normalized, in the schema's canonical order.
	Errors []FieldProblem `json:"errors,omitempty"`
}

// UnmarshalJSON reads a problem as RFC 9457 (3.1) asks: a member whose
// value is not of its type is ignored. The 409 in_flight answer's status
// is the string "in_flight" (see writeInFlight): read as a Problem, its
// Status is 0, and the HTTP status says 409.
func (p *Problem) UnmarshalJSON(b []byte) error {
	var w struct {
		Type   json.RawMessage `json:"type"`
		Title  json.RawMessage `json:"title"`
		Status json.RawMessage `json:"status"`
		Detail json.RawMessage `json:"detail"`
		Errors json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = Problem{}
	_ = json.Unmarshal(w.Type, &p.Type)
	_ = json.Unmarshal(w.Title, &p.Title)
	_ = json.Unmarshal(w.Status, &p.Status)
	_ = json.Unmarshal(w.Detail, &p.Detail)
	_ = json.Unmarshal(w.Errors, &p.Errors)
	return nil
}

// FieldProblem is one field that could not be normalized.
type FieldProblem struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// ProblemDocs documents every problem type; each type URI below is this
// page and the anchor of its section, stable so that clients can switch
// on it.
const ProblemDocs = problem.Docs

// The sidecar's problem types.
const (
	ProblemUnauthenticated = ProblemDocs + "#unauthenticated"
	ProblemUnknownAction   = ProblemDocs + "#unknown-action"
	ProblemBadRequest      = ProblemDocs + "#bad-request"
	ProblemInvalidFields   = ProblemDocs + "#invalid-fields"
	ProblemBodyTooLarge    = ProblemDocs + "#body-too-large"
	ProblemNotFound        = ProblemDocs + "#not-found"
	ProblemKeyInUse        = ProblemDocs + "#key-in-use"
	ProblemInFlight        = ProblemDocs + "#in-flight"
	ProblemUnavailable     = ProblemDocs + "#unavailable"
	ProblemInternal        = ProblemDocs + "#internal"
)

// ProblemTypes lists every problem type the sidecar answers with.
var ProblemTypes = []string{ProblemUnauthenticated, ProblemUnknownAction, ProblemBadRequest, ProblemInvalidFields,
	ProblemBodyTooLarge, ProblemNotFound, ProblemKeyInUse, ProblemInFlight, ProblemUnavailable, ProblemInternal}

func writeProblem(w http.ResponseWriter, p Problem) {
	problem.Write(w, p.Status, p, wire)
}

// wire is how the sidecar sends every answer: never cached (answers hold
// frozen payloads and change over time), one JSON document per line.
var wire = &problem.Opts{NoStore: true, Newline: true}

// writeInFlight answers 409 in_flight as a problem (ProblemInFlight) whose
// extension members are the ExecuteResponse's, so that clients of the
// former application/json answer read it unchanged. Its "status" stays the
// string "in_flight": RFC 9457 (3.1) has problem consumers ignore a status
// member that is not a number, and the status line says 409.
func writeInFlight(w http.ResponseWriter, resp ExecuteResponse) {
	b, err := json.Marshal(resp)
	var members map[string]json.RawMessage
	if err == nil {
		err = json.Unmarshal(b, &members)
	}
	if err != nil {
		writeProblem(w, Problem{Type: ProblemInternal, Title: "Internal server error", Status: http.StatusInternalServerError})
		return
	}
	str := func(s string) json.RawMessage { q, _ := json.Marshal(s); return q }
	members["type"] = str(ProblemInFlight)
	members["title"] = str("The action is in flight")
	members["detail"] = str("Another call of this intent is at the provider, or a transient failure is being retried with the same key. " +
		"Retry the same call after Retry-After seconds.")
	problem.Write(w, http.StatusConflict, members, wire)
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
