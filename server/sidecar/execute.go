package sidecar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/internal/strictjson"
	"github.com/retrysafe/retrysafe/server/internal/edge"
	"github.com/retrysafe/retrysafe/server/metrics"
)

// ExecuteRequest is the body of POST /v1/tools/{action}/execute.
type ExecuteRequest struct {
	// IntentRef is the unit of intent, from the agent's system (an invoice
	// reference), never from the model. Required.
	IntentRef string `json:"intent_ref"`
	// Fields are the model's arguments for the tool, as it emitted them.
	Fields map[string]any `json:"fields"`
	// SourceRef is the transport id that led to the call (a message id):
	// stored for audit with the first freeze, never part of the key.
	SourceRef string `json:"source_ref,omitempty"`
}

// ExecuteResponse is the answer of POST /v1/tools/{action}/execute (200,
// 202 and 409). RetryAfterMillis (in_flight) is when the current lease
// ends; the Retry-After header carries it rounded up to seconds.
type ExecuteResponse struct {
	Status    string `json:"status"` // completed, failed, in_flight, review
	IntentRef string `json:"intent_ref"`
	Action    string `json:"action"`
	// Answer holds the members that come from the executor's Outcome,
	// the same as in an MCP result: idempotency_key, replayed, created,
	// attempt, divergent_fields, ignored_fields, response, error and
	// retry_after_ms.
	Answer
}

// Answer is the part of an answer that comes from the executor's Outcome
// (see edge.Answer for each member).
type Answer = edge.Answer

var httpStatusOf = map[executor.Status]int{
	executor.StatusCompleted: http.StatusOK,
	// A definitive failure is the answer to this call, stored like a
	// provider stores its first answer: not an HTTP error.
	executor.StatusFailed:   http.StatusOK,
	executor.StatusInFlight: http.StatusConflict,
	executor.StatusReview:   http.StatusAccepted,
}

func (s *Server) execute(w http.ResponseWriter, r *http.Request, tenant string) {
	note := noteFrom(r.Context())
	action := r.PathValue("action")
	if _, ok := s.cfg.Tools.Tool(action); !ok {
		writeProblem(w, Problem{Type: ProblemUnknownAction, Title: "Unknown action", Status: http.StatusNotFound,
			Detail: fmt.Sprintf("No tool is registered as %q; GET /v1/tools lists them.", action)})
		return
	}
	note.action = action
	req, p := s.decodeExecute(w, r)
	if p != nil {
		s.count(tenant, action, metrics.OutcomeInvalid)
		note.outcome = metrics.OutcomeInvalid
		writeProblem(w, *p)
		return
	}

	// Detached from the client: see the package documentation.
	out, lost, err := edge.Execute(r.Context(), s.cfg.Executor, s.cfg.ExecuteTimeout, executor.Call{
		Tenant:    tenant,
		Ref:       req.IntentRef,
		Action:    action,
		Fields:    req.Fields,
		SourceRef: req.SourceRef,
	})
	if err != nil {
		s.executeError(w, note, tenant, action, err)
		return
	}
	note.err = lost
	note.outcome, note.key = string(out.Status), out.Key
	resp := ExecuteResponse{Status: string(out.Status), IntentRef: req.IntentRef, Action: action, Answer: edge.AnswerOf(out)}
	status, ok := httpStatusOf[out.Status]
	if !ok {
		note.err = fmt.Errorf("executor returned unknown status %q", out.Status)
		writeProblem(w, Problem{Type: ProblemInternal, Title: "Internal server error", Status: http.StatusInternalServerError})
		return
	}
	if out.Status == executor.StatusInFlight {
		secs := retryAfterSeconds(out.RetryAfter, s.cfg.MinRetryAfter)
		resp.RetryAfterMillis = max(out.RetryAfter.Milliseconds(), int64(secs)*1000)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		writeInFlight(w, resp)
		return
	}
	if out.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, status, resp)
}

// decodeExecute reads and checks the body; a non-nil Problem is the answer.
func (s *Server) decodeExecute(w http.ResponseWriter, r *http.Request) (*ExecuteRequest, *Problem) {
	bad := func(detail string) (*ExecuteRequest, *Problem) {
		return nil, &Problem{Type: ProblemBadRequest, Title: "Bad request", Status: http.StatusBadRequest, Detail: detail}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &Problem{Type: ProblemBodyTooLarge, Title: "Request body too large", Status: http.StatusRequestEntityTooLarge,
				Detail: fmt.Sprintf("The body may hold at most %d bytes.", mbe.Limit)}
		}
		return bad("The request body could not be read.")
	}
	// Before encoding/json reads it: a duplicate member (the last would
	// win), invalid UTF-8 or an unpaired surrogate (each would become
	// U+FFFD) and a NUL (PostgreSQL refuses it) are refused here, naming
	// where, so that nothing is frozen or sent.
	if err := strictjson.Check(body); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			p := &Problem{Type: ProblemBadRequest, Title: "Bad request", Status: http.StatusBadRequest,
				Detail: fmt.Sprintf("The body was refused (%s); nothing was frozen and nothing was called.", se.Reason)}
			if f := se.Field(); f != "" {
				p.Detail = fmt.Sprintf("The body was refused: %s at %s; nothing was frozen and nothing was called.", se.Reason, f)
				p.Errors = []FieldProblem{{Field: f, Reason: se.Reason}}
			}
			return nil, p
		}
		return bad("The body is not valid JSON.")
	}
	// A pointer, to tell a missing member from an empty one.
	var raw struct {
		IntentRef *string        `json:"intent_ref"`
		Fields    map[string]any `json:"fields"`
		SourceRef string         `json:"source_ref"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // amounts never pass through float64
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return bad("The body must be a JSON object {\"intent_ref\":\"...\",\"fields\":{...},\"source_ref\":\"...\"}: " + jsonErrorText(err))
	}
	if dec.More() {
		return bad("The body must hold exactly one JSON object.")
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad("The body must hold exactly one JSON object.")
	}
	switch {
	case raw.IntentRef == nil || *raw.IntentRef == "":
		return bad("intent_ref is required: the reference of the unit of intent (an invoice id) from your system, never from the model.")
	case len(*raw.IntentRef) > edge.MaxRefLen:
		return bad(fmt.Sprintf("intent_ref is longer than %d bytes.", edge.MaxRefLen))
	case !edge.CleanIdentifier(*raw.IntentRef):
		// " inv-1" and "inv-1" would be two intents whose payloads (the
		// ref rule trims) give one key.
		return bad("intent_ref must be valid UTF-8 without leading or trailing white space or control characters.")
	case raw.Fields == nil:
		return bad("fields is required: a JSON object with the tool's arguments as the model produced them.")
	case len(raw.SourceRef) > edge.MaxSourceLen:
		return bad(fmt.Sprintf("source_ref is longer than %d bytes.", edge.MaxSourceLen))
	case !utf8.ValidString(raw.SourceRef):
		return bad("source_ref must be valid UTF-8.")
	}
	return &ExecuteRequest{IntentRef: *raw.IntentRef, Fields: raw.Fields, SourceRef: raw.SourceRef}, nil
}

// jsonErrorText describes a decoding error by position and kind; the
// messages of encoding/json quote no value longer than one character.
func jsonErrorText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("member %q must not be a JSON %s", te.Field, te.Value)
	}
	if errors.Is(err, io.EOF) {
		return "the body is empty"
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "the body ends early"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// executeError answers an execution that produced no outcome.
func (s *Server) executeError(w http.ResponseWriter, note *requestNote, tenant, action string, err error) {
	kind, fes := edge.Classify(err)
	if kind == edge.UnknownAction {
		note.err = err
		writeProblem(w, Problem{Type: ProblemUnknownAction, Title: "Unknown action", Status: http.StatusNotFound, Detail: err.Error()})
		return
	}
	note.outcome = metrics.OutcomeInvalid
	if kind == edge.RefusedData {
		note.err = err
	}
	if kind == edge.Unavailable {
		note.outcome, note.err = metrics.OutcomeError, err
	}
	s.count(tenant, action, note.outcome)
	switch kind {
	case edge.InvalidFields:
		p := Problem{Type: ProblemInvalidFields, Title: "Invalid fields", Status: http.StatusBadRequest,
			Detail: "The fields could not be normalized and no intent is frozen under this intent_ref yet: nothing was frozen and nothing was called. Fix the extraction and call again."}
		if fes != nil {
			// FieldError never carries the value (it may be a CPF).
			for _, fe := range fes {
				p.Errors = append(p.Errors, FieldProblem{Field: fe.Field, Reason: fe.Reason})
			}
		} else {
			p.Errors = []FieldProblem{{Field: "", Reason: err.Error()}}
		}
		writeProblem(w, p)
	case edge.InvalidCall:
		writeProblem(w, Problem{Type: ProblemBadRequest, Title: "Bad request", Status: http.StatusBadRequest, Detail: err.Error()})
	case edge.RefusedData:
		writeProblem(w, Problem{Type: ProblemBadRequest, Title: "Bad request", Status: http.StatusBadRequest,
			Detail: "The database refused a value of this call: nothing was frozen and nothing was called, and the same call would be refused again. Fix the input."})
	case edge.KeyInUse:
		writeProblem(w, Problem{Type: ProblemKeyInUse, Title: "Payload already frozen under another intent_ref", Status: http.StatusConflict,
			Detail: "Another intent_ref of this tenant froze the same payload for this action; an intent_ref must name one unit of intent."})
	default:
		// Every path to an effect goes through the frozen key: whatever
		// happened, the same call again is safe.
		w.Header().Set("Retry-After", "1")
		writeProblem(w, Problem{Type: ProblemUnavailable, Title: "Execution unavailable", Status: http.StatusServiceUnavailable,
			Detail: "The execution could not be completed or recorded (database or timeout). Retrying the same call is safe: it reaches the provider with the same key."})
	}
}

func (s *Server) count(tenant, action, outcome string) {
	s.cfg.Metrics.Executions.WithLabelValues(tenant, action, outcome).Inc()
}
