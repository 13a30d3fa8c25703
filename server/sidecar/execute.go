package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/strictjson"
	"github.com/retrysafe/retrysafe/server/metrics"
	"github.com/retrysafe/retrysafe/tools"
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
// 202 and 409).
type ExecuteResponse struct {
	Status         string `json:"status"` // completed, failed, in_flight, review
	IntentRef      string `json:"intent_ref"`
	Action         string `json:"action"`
	IdempotencyKey string `json:"idempotency_key"`
	// Replayed: this call did not reach the provider; the stored outcome
	// of an earlier call is returned.
	Replayed bool `json:"replayed"`
	// Created: this call froze the intent.
	Created bool `json:"created"`
	Attempt int  `json:"attempt,omitempty"`
	// DivergentFields names the fields of this call that differ from the
	// frozen payload. Their values were dropped: the frozen ones were used.
	DivergentFields []string `json:"divergent_fields"`
	// IgnoredFields names fields the tool's schema does not know.
	IgnoredFields []string `json:"ignored_fields"`
	// Response is the provider's answer (completed).
	Response json.RawMessage `json:"response,omitempty"`
	// Error is the stored failure (failed, review).
	Error *executor.ToolFailure `json:"error,omitempty"`
	// RetryAfterMillis (in_flight) is when the current lease ends; the
	// Retry-After header carries it rounded up to seconds.
	RetryAfterMillis int64 `json:"retry_after_ms,omitempty"`
}

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
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.ExecuteTimeout)
	defer cancel()
	ctx, probe := metrics.WithProbe(ctx)
	out, err := s.cfg.Executor.Execute(ctx, executor.Call{
		Tenant:    tenant,
		Ref:       req.IntentRef,
		Action:    action,
		Fields:    req.Fields,
		SourceRef: req.SourceRef,
	}, &executor.Opts{NoWait: true})

	if out != nil && errors.Is(err, executor.ErrLeaseLost) {
		// Another worker took the action over while this one called the
		// provider; this call's result was dropped and out is the row as
		// the taker left it (in flight, or already settled): that is the
		// answer that counts.
		note.err = err
	} else if err != nil {
		s.executeError(w, note, tenant, action, err)
		return
	}

	note.outcome, note.key = string(out.Status), out.Key
	s.cfg.Metrics.ObserveOutcome(tenant, action, out, probe)
	resp := ExecuteResponse{
		Status:          string(out.Status),
		IntentRef:       req.IntentRef,
		Action:          action,
		IdempotencyKey:  out.Key,
		Replayed:        out.Replayed,
		Created:         out.Created,
		Attempt:         out.Attempt,
		DivergentFields: nonNil(out.Divergent),
		IgnoredFields:   nonNil(out.Ignored),
		Response:        out.Response,
		Error:           out.Failure,
	}
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
	case len(*raw.IntentRef) > maxRefLen:
		return bad(fmt.Sprintf("intent_ref is longer than %d bytes.", maxRefLen))
	case !cleanIdentifier(*raw.IntentRef):
		// " inv-1" and "inv-1" would be two intents whose payloads (the
		// ref rule trims) give one key.
		return bad("intent_ref must be valid UTF-8 without leading or trailing white space or control characters.")
	case raw.Fields == nil:
		return bad("fields is required: a JSON object with the tool's arguments as the model produced them.")
	case len(raw.SourceRef) > maxSourceLen:
		return bad(fmt.Sprintf("source_ref is longer than %d bytes.", maxSourceLen))
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

func cleanIdentifier(s string) bool {
	if !utf8.ValidString(s) || strings.TrimSpace(s) != s {
		return false
	}
	return !strings.ContainsFunc(s, unicode.IsControl)
}

// executeError answers an execution that produced no outcome.
func (s *Server) executeError(w http.ResponseWriter, note *requestNote, tenant, action string, err error) {
	var fe *derive.FieldError
	switch {
	case errors.As(err, &fe) || errors.Is(err, derive.ErrMissingField) || errors.Is(err, derive.ErrInvalidField) || errors.Is(err, derive.ErrAmbiguous):
		note.outcome = metrics.OutcomeInvalid
		s.count(tenant, action, metrics.OutcomeInvalid)
		p := Problem{Type: ProblemInvalidFields, Title: "Invalid fields", Status: http.StatusBadRequest,
			Detail: "The fields could not be normalized and no intent is frozen under this intent_ref yet: nothing was frozen and nothing was called. Fix the extraction and call again."}
		if fe != nil {
			// FieldError never carries the value (it may be a CPF).
			p.Errors = []FieldProblem{{Field: fe.Field, Reason: fe.Reason}}
		} else {
			p.Errors = []FieldProblem{{Field: "", Reason: err.Error()}}
		}
		writeProblem(w, p)
	case errors.Is(err, intent.ErrInvalid):
		note.outcome = metrics.OutcomeInvalid
		s.count(tenant, action, metrics.OutcomeInvalid)
		writeProblem(w, Problem{Type: ProblemBadRequest, Title: "Bad request", Status: http.StatusBadRequest, Detail: err.Error()})
	case errors.Is(err, executor.ErrRefused):
		note.outcome, note.err = metrics.OutcomeInvalid, err
		s.count(tenant, action, metrics.OutcomeInvalid)
		writeProblem(w, Problem{Type: ProblemBadRequest, Title: "Bad request", Status: http.StatusBadRequest,
			Detail: "The database refused a value of this call: nothing was frozen and nothing was called, and the same call would be refused again. Fix the input."})
	case errors.Is(err, executor.ErrUnknownTool), errors.Is(err, tools.ErrUnknownTool), errors.Is(err, derive.ErrUnknownAction), errors.Is(err, derive.ErrUnknownVersion):
		note.err = err
		writeProblem(w, Problem{Type: ProblemUnknownAction, Title: "Unknown action", Status: http.StatusNotFound, Detail: err.Error()})
	case errors.Is(err, intent.ErrKeyInUse):
		note.outcome = metrics.OutcomeInvalid
		s.count(tenant, action, metrics.OutcomeInvalid)
		writeProblem(w, Problem{Type: ProblemKeyInUse, Title: "Payload already frozen under another intent_ref", Status: http.StatusConflict,
			Detail: "Another intent_ref of this tenant froze the same payload for this action; an intent_ref must name one unit of intent."})
	default:
		note.outcome, note.err = metrics.OutcomeError, err
		s.count(tenant, action, metrics.OutcomeError)
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

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
