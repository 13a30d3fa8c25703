package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/server/internal/edge"
	"github.com/retrysafe/retrysafe/server/metrics"
	"github.com/retrysafe/retrysafe/tools"
)

// Statuses of a Result beyond the executor's four.
const (
	StatusInvalid = "invalid" // bad arguments or reference: nothing frozen, nothing called
	StatusRefused = "refused" // no intent reference from the host: nothing frozen, nothing called
	StatusError   = "error"   // no answer could be given (database, timeout): retrying is safe
)

// Where the intent reference of a call came from (Result.IntentRefSource).
const (
	RefFromMeta   = "meta"   // the request's _meta (MetaIntentRef)
	RefFromHeader = "header" // the HTTP connection's HeaderIntentRef
	RefFromModel  = "model"  // the model's intent_ref argument (ModelRefTools only)
)

// Result is the structured content of every tools/call answer.
type Result struct {
	Status string `json:"status"`
	Action string `json:"action"`
	// Answer holds the members that come from the executor's Outcome,
	// the same as in the sidecar's execute response: idempotency_key,
	// replayed, created, attempt, divergent_fields, ignored_fields,
	// response, error and retry_after_ms (in_flight, error: when to call
	// again).
	Answer
	// Errors name the arguments that could not be used (invalid).
	Errors []FieldError `json:"errors,omitempty"`
	// IntentRefSource says where the intent reference came from.
	IntentRefSource string `json:"intent_ref_source,omitempty"`
	// Guarantee is "per_intent" when the host named the intent and
	// "weaker" when the model did.
	Guarantee string `json:"guarantee,omitempty"`
	// Message says, in words for the model, what the result means and
	// what to do next. It is also the text content of the result.
	Message string `json:"message"`
}

// Answer is the part of a Result that comes from the executor's Outcome
// (see edge.Answer for each member).
type Answer = edge.Answer

// FieldError names an argument and the rule it broke, never its value.
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// outputSchema describes Result loosely: hosts may show it; clients that
// validate structured content (the TypeScript SDK does) find every answer,
// errors included, conforms.
const outputSchema = `{"type":"object","required":["status","action","message"],"properties":{` +
	`"status":{"type":"string","enum":["completed","failed","in_flight","review","invalid","refused","error"]},` +
	`"action":{"type":"string"},"idempotency_key":{"type":"string"},"replayed":{"type":"boolean"},` +
	`"created":{"type":"boolean"},"attempt":{"type":"integer"},` +
	`"divergent_fields":{"type":"array","items":{"type":"string"}},"ignored_fields":{"type":"array","items":{"type":"string"}},` +
	`"response":{},"error":{"type":"object"},"retry_after_ms":{"type":"integer"},` +
	`"errors":{"type":"array","items":{"type":"object"}},"intent_ref_source":{"type":"string"},` +
	`"guarantee":{"type":"string"},"message":{"type":"string"}}}`

// callNote collects what the call's log line reports.
type callNote struct {
	outcome, key, refSource string
	err                     error
}

func (s *Server) call(ctx context.Context, tenant string, sv *served, req *mcp.CallToolRequest) *mcp.CallToolResult {
	start := time.Now()
	note := &callNote{}
	res := s.run(ctx, tenant, sv, req, note)
	attrs := []slog.Attr{
		slog.String("tenant", tenant),
		slog.String("action", sv.action),
		slog.String("outcome", note.outcome),
		slog.Duration("duration", time.Since(start)),
	}
	// Never the intent_ref or an argument: they may be personal data.
	if note.key != "" {
		attrs = append(attrs, slog.String("idempotency_key", note.key))
	}
	if note.refSource != "" {
		attrs = append(attrs, slog.String("intent_ref_source", note.refSource))
	}
	level := slog.LevelInfo
	if note.err != nil {
		attrs = append(attrs, slog.String("error", note.err.Error()))
		if note.outcome == metrics.OutcomeError {
			level = slog.LevelError
		}
	}
	s.cfg.Logger.LogAttrs(ctx, level, "mcp: tools/call", attrs...)
	return res
}

func (s *Server) run(ctx context.Context, tenant string, sv *served, req *mcp.CallToolRequest, note *callNote) *mcp.CallToolResult {
	invalid := func(outcome string, r Result) *mcp.CallToolResult {
		note.outcome = outcome
		s.count(tenant, sv.action, metrics.OutcomeInvalid)
		r.Action = sv.action
		return result(r, true)
	}
	fields, modelRef, errs := decodeArguments(req.Params.Arguments)
	if errs != nil {
		return invalid(StatusInvalid, Result{Status: StatusInvalid, Errors: errs,
			Message: "The arguments are not a JSON object: nothing was frozen and nothing was called. Call again with the tool's arguments as an object."})
	}
	ref, source, refErr := s.intentRef(sv, req, modelRef)
	if refErr != nil {
		r := *refErr
		return invalid(r.Status, r)
	}
	note.refSource = source
	sourceRef, _ := req.Params.Meta[MetaSourceRef].(string)
	if len(sourceRef) > edge.MaxSourceLen || !utf8.ValidString(sourceRef) {
		return invalid(StatusInvalid, Result{Status: StatusInvalid, Errors: []FieldError{{Field: "_meta." + MetaSourceRef, Reason: fmt.Sprintf("must be valid UTF-8 of at most %d bytes", edge.MaxSourceLen)}},
			Message: "The host's source reference is malformed: nothing was frozen and nothing was called. This is not something a new argument can fix."})
	}

	stopProgress := s.progress(ctx, req)
	// Detached from the client, as in the sidecar: a host that hangs up
	// (or a transport that breaks) mid-call must not cut the provider
	// call halfway; it finishes and is recorded, and the retry replays it.
	out, lost, err := edge.Execute(ctx, s.cfg.Executor, s.cfg.ExecuteTimeout, executor.Call{
		Tenant: tenant, Ref: ref, Action: sv.action, Fields: fields, SourceRef: sourceRef,
	})
	if err != nil {
		r := s.executeError(tenant, sv.action, err, note)
		stopProgress(r.Status)
		return result(r, true)
	}
	note.err = lost
	note.outcome, note.key = string(out.Status), out.Key
	r := Result{Status: string(out.Status), Action: sv.action, Answer: edge.AnswerOf(out), IntentRefSource: source, Guarantee: "per_intent"}
	isError := true
	switch out.Status {
	case executor.StatusCompleted:
		isError = false
		r.Message = "Done."
		if out.Replayed {
			r.Message = "Done earlier: this is the stored outcome of the first call for this intent (replayed); nothing was done again."
		}
		if len(out.Divergent) > 0 {
			r.Message += fmt.Sprintf(" The intent was frozen with other values for %s; the frozen values were used, not this call's.", strings.Join(out.Divergent, ", "))
		}
	case executor.StatusFailed:
		r.Message = "The provider refused this action definitively. Calling again for the same intent returns this same refusal; tell the user."
	case executor.StatusInFlight:
		r.RetryAfterMillis = max(out.RetryAfter.Milliseconds(), 1000)
		r.Message = fmt.Sprintf("This action is in progress in another call. Call again with the same arguments in %d ms; it is safe: the action happens at most once.", r.RetryAfterMillis)
	case executor.StatusReview:
		r.Message = "Do not retry. The outcome of this action is uncertain and a person will settle it; tell the user it is being checked. Calling again cannot act twice, but will not settle it either."
	default:
		note.err = fmt.Errorf("executor returned unknown status %q", out.Status)
		r.Status, r.Message = StatusError, "Internal error."
	}
	if source == RefFromModel {
		r.Guarantee = "weaker"
		r.Message += " Warning: the intent reference came from the model, not from the host application, so the guarantee is weaker: a call under a different reference is a new action."
	}
	stopProgress(r.Status)
	return result(r, isError)
}

// decodeArguments reads the tool arguments. Numbers stay json.Number so an
// amount is normalized digit by digit, never through float64. The
// intent_ref argument, a model's claim about the intent, is returned apart.
func decodeArguments(raw json.RawMessage) (map[string]any, string, []FieldError) {
	fields := map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&fields); err != nil || fields == nil {
			return nil, "", []FieldError{{Field: "arguments", Reason: "must be a JSON object"}}
		}
		if _, err := dec.Token(); err != io.EOF {
			return nil, "", []FieldError{{Field: "arguments", Reason: "must be one JSON object"}}
		}
	}
	var modelRef string
	if v, ok := fields[tools.RefField]; ok {
		modelRef, _ = v.(string)
		delete(fields, tools.RefField)
	}
	return fields, modelRef, nil
}

// intentRef picks the call's intent reference: the host's (_meta, or the
// HTTP connection's header; the two must agree), else the model's where the
// operator allowed it for this tool, else nothing (refused).
func (s *Server) intentRef(sv *served, req *mcp.CallToolRequest, modelRef string) (string, string, *Result) {
	bad := func(field, reason string) (string, string, *Result) {
		return "", "", &Result{Status: StatusInvalid, Errors: []FieldError{{Field: field, Reason: reason}},
			Message: "The intent reference supplied by the host application is malformed: nothing was frozen and nothing was called. This is a host configuration problem, not something a new argument can fix."}
	}
	var ref, source string
	if v, ok := req.Params.Meta[MetaIntentRef]; ok {
		str, isStr := v.(string)
		if !isStr {
			return bad("_meta."+MetaIntentRef, "must be a string")
		}
		ref, source = str, RefFromMeta
	}
	if req.Extra != nil && req.Extra.Header != nil {
		if h := req.Extra.Header.Values(HeaderIntentRef); len(h) > 0 {
			switch {
			case len(h) > 1:
				return bad(HeaderIntentRef, "given more than once")
			case source == RefFromMeta && h[0] != ref:
				return bad("_meta."+MetaIntentRef, "differs from the "+HeaderIntentRef+" header of the connection")
			case source == "":
				ref, source = h[0], RefFromHeader
			}
		}
	}
	if source == "" && sv.modelRef && modelRef != "" {
		ref, source = modelRef, RefFromModel
	}
	if source == "" {
		msg := fmt.Sprintf("Refused: the host application did not say which intent this call belongs to (_meta %q on the request, or the %s header), so a retry could not be told from a new action. Nothing was frozen and nothing was called. Do not retry; tell the user the tool is not configured for safe use.", MetaIntentRef, HeaderIntentRef)
		if sv.modelRef {
			msg = "Refused: no intent reference. Pass intent_ref, the id of the invoice or order this action is for, the same one every time for the same intent. Nothing was frozen and nothing was called."
		}
		return "", "", &Result{Status: StatusRefused, Errors: []FieldError{{Field: "_meta." + MetaIntentRef, Reason: "required"}}, Message: msg}
	}
	field := "_meta." + MetaIntentRef
	switch source {
	case RefFromHeader:
		field = HeaderIntentRef
	case RefFromModel:
		field = tools.RefField
	}
	reason := ""
	switch {
	case ref == "":
		reason = "must not be empty"
	case len(ref) > edge.MaxRefLen:
		reason = fmt.Sprintf("longer than %d bytes", edge.MaxRefLen)
	case !edge.CleanIdentifier(ref):
		// " inv-1" and "inv-1" would be two intents whose payloads (the
		// ref rule trims) give one key.
		reason = "must be valid UTF-8 without leading or trailing white space or control characters"
	}
	if reason != "" {
		if source == RefFromModel {
			return "", "", &Result{Status: StatusInvalid, Errors: []FieldError{{Field: field, Reason: reason}},
				Message: fmt.Sprintf("Invalid argument intent_ref: %s. Nothing was frozen and nothing was called; pass the invoice or order id as it is written.", reason)}
		}
		return bad(field, reason)
	}
	return ref, source, nil
}

// executeError answers an execution that produced no outcome, as the
// sidecar's 400, 404, 409 and 503 do.
func (s *Server) executeError(tenant, action string, err error, note *callNote) Result {
	r := Result{Action: action, Answer: Answer{DivergentFields: []string{}, IgnoredFields: []string{}}}
	kind, fes := edge.Classify(err)
	switch kind {
	case edge.InvalidFields:
		r.Status = StatusInvalid
		if fes != nil {
			// FieldError never carries the value (it may be a CPF).
			what := make([]string, len(fes))
			for i, fe := range fes {
				r.Errors = append(r.Errors, FieldError{Field: fe.Field, Reason: fe.Reason})
				what[i] = fe.Field + ": " + fe.Reason
			}
			if len(fes) == 1 {
				r.Message = fmt.Sprintf("Invalid argument %s. Nothing was frozen and nothing was called; fix the argument and call again.", what[0])
			} else {
				r.Message = fmt.Sprintf("Invalid arguments %s. Nothing was frozen and nothing was called; fix them all and call again.", strings.Join(what, "; "))
			}
		} else {
			r.Errors = []FieldError{{Reason: err.Error()}}
			r.Message = "Invalid arguments: " + err.Error() + ". Nothing was frozen and nothing was called; fix the arguments and call again."
		}
	case edge.InvalidCall:
		r.Status, r.Errors = StatusInvalid, []FieldError{{Reason: err.Error()}}
		r.Message = "Invalid call: " + err.Error() + ". Nothing was frozen and nothing was called."
	case edge.KeyInUse:
		r.Status = StatusInvalid
		r.Message = "Refused: another intent of this tenant already froze exactly this action; an intent reference must name one unit of intent. Nothing was called. Do not retry."
	case edge.RefusedData:
		// As the sidecar's 400: telling a model to retry what the
		// database refuses would have it call again and again.
		r.Status = StatusInvalid
		r.Message = "Refused: the database refused a value of this call. Nothing was frozen and nothing was called, and the same call would be refused again; fix the arguments. Do not retry with the same arguments."
	case edge.UnknownAction:
		// As the sidecar's 404.
		r.Status = StatusInvalid
		r.Message = "Unknown action: " + err.Error() + ". Nothing was frozen and nothing was called."
	default:
		r.Status, r.RetryAfterMillis = StatusError, 1000
		r.Message = "The action could not be completed or recorded (database or timeout). Calling again with the same arguments in a second is safe: it reaches the provider under the same key."
	}
	note.outcome, note.err = metrics.OutcomeInvalid, err
	if r.Status == StatusError {
		note.outcome = metrics.OutcomeError
	}
	s.count(tenant, action, note.outcome)
	return r
}

// progress reports, when the request asked for it, that the call is still
// waiting; the returned func sends the last report and stops.
func (s *Server) progress(ctx context.Context, req *mcp.CallToolRequest) func(status string) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return func(string) {}
	}
	notify := func(n float64, msg string) {
		// A client gone away gets no progress; the call goes on.
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: n, Message: msg})
	}
	notify(0, "freezing the intent and calling the provider")
	done, stopped := make(chan struct{}), make(chan struct{})
	n := 0 // written by the ticker until stopped is closed
	go func() {
		defer close(stopped)
		t := time.NewTicker(s.cfg.ProgressInterval)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				n++
				notify(float64(n), fmt.Sprintf("waiting for the provider (%s)", time.Since(start).Round(time.Second)))
			}
		}
	}()
	return func(status string) {
		close(done)
		<-stopped
		notify(float64(n+1), "finished: "+status)
	}
}

func result(r Result, isError bool) *mcp.CallToolResult {
	if r.DivergentFields == nil {
		r.DivergentFields = []string{}
	}
	if r.IgnoredFields == nil {
		r.IgnoredFields = []string{}
	}
	body, err := json.Marshal(r)
	if err != nil {
		body = []byte(`{"status":"error"}`)
	}
	return &mcp.CallToolResult{
		// The text is for hosts that show the model only text content:
		// the message first, then the same JSON as the structured content.
		Content:           []mcp.Content{&mcp.TextContent{Text: r.Message + "\n" + string(body)}},
		StructuredContent: json.RawMessage(body),
		IsError:           isError,
	}
}

func (s *Server) count(tenant, action, outcome string) {
	s.cfg.Metrics.Executions.WithLabelValues(tenant, action, outcome).Inc()
}
