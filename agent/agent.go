package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	openai "github.com/sashabaranov/go-openai"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/tools"
)

// Agent answers inbound messages. Safe for concurrent use; it holds no
// connection between calls.
type Agent struct {
	cfg        Config
	log        *slog.Logger
	modelTools []openai.Tool
	offered    map[string]bool // tool names the model may call
}

// New validates cfg.
func New(cfg Config) (*Agent, error) {
	cfg, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, log: cfg.Logger, offered: map[string]bool{}}
	funcs := map[string]bool{}
	for _, n := range cfg.ModelTools {
		a.offered[n] = true
		funcs[tools.FunctionName(n)] = true
	}
	for _, t := range cfg.Tools.OpenAITools() {
		if t.Function != nil && funcs[t.Function.Name] {
			a.modelTools = append(a.modelTools, t)
		}
	}
	return a, nil
}

// Config returns the validated configuration (defaults filled in).
func (a *Agent) Config() Config { return a.cfg }

// claim is this worker's hold on an inbound message.
type claim struct {
	tenant, messageID, conversationID, body, phoneNumberID string
	groupID                                                string
	seq                                                    int64
	n                                                      int // claims so far, the fencing token
}

// HandleInbox answers one inbound message: the inbox job's work. It returns
// nil when the message is answered (now or before), a *BusyError when
// another worker holds it or a tool's action is in flight, ErrNotFound when
// the message is not stored, and other errors (model or database) for River
// to retry.
func (a *Agent) HandleInbox(ctx context.Context, tenant, messageID string) error {
	start := a.cfg.Clock()
	cl, err := a.claim(ctx, tenant, messageID)
	if err != nil || cl == nil {
		return err
	}
	status, err := a.answer(ctx, cl)
	// Not deferred: a worker that dies mid-turn must leave its claim to
	// expire, as a crashed process would.
	if err != nil {
		a.release(cl)
		var busy *BusyError
		if !errors.As(err, &busy) {
			a.log.Warn("inbox: turn failed, will retry", "tenant", tenant, "message_id", messageID, "error", err)
		}
		return err
	}
	a.log.Info("inbox: answered", "tenant", tenant, "message_id", messageID, "status", status,
		"claims", cl.n, "elapsed", a.cfg.Clock().Sub(start))
	a.cfg.Failpoint(FailInboxBeforeAck)
	return nil
}

// claim takes the message's processing claim. nil, nil: already answered.
func (a *Agent) claim(ctx context.Context, tenant, messageID string) (*claim, error) {
	cl, err := claimMessage(ctx, a.cfg.DB, tenant, messageID, a.cfg.Owner, a.cfg.ClaimTTL)
	if err != nil {
		return nil, fmt.Errorf("agent: claim message: %w", err)
	}
	if cl != nil {
		return cl, nil
	}
	processed, left, err := messageState(ctx, a.cfg.DB, tenant, messageID)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("agent: claim message: %w", err)
	case processed:
		a.log.Debug("inbox: already answered", "tenant", tenant, "message_id", messageID)
		return nil, nil
	}
	return nil, &BusyError{What: "message", RetryAfter: left}
}

// release gives the claim back so that River's retry need not wait for it
// to expire. Best effort: the claim expires anyway.
func (a *Agent) release(cl *claim) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := releaseMessage(ctx, a.cfg.DB, cl, a.cfg.Owner); err != nil {
		a.log.Warn("inbox: release claim", "tenant", cl.tenant, "message_id", cl.messageID, "error", err)
	}
}

// turnResult is what a turn produced, to be recorded.
type turnResult struct {
	status string
	steps  int
	code   string
	tools  []ToolOutcome
	reply  string
	// hold: freeze the reply but send nothing (review).
	hold bool
	// set by replyKind for a template reply
	template     ReplyTemplate
	templateBody bool
}

// replyKind decides the reply's form: free text while the customer-service
// window is open (Config.ServiceWindow from the customer's last message, by
// Config.Clock), else the tenant's template; with no template configured
// the reply is held for review, since WhatsApp would refuse free text
// (error 131047).
func (a *Agent) replyKind(ctx context.Context, tx pgx.Tx, cl *claim, r *turnResult) (string, error) {
	last, err := lastInbound(ctx, tx, cl.tenant, cl.conversationID)
	if err != nil {
		return "", fmt.Errorf("agent: service window: %w", err)
	}
	now := a.cfg.Clock()
	if last == nil || now.Sub(*last) <= a.cfg.ServiceWindow {
		return ReplyKindText, nil
	}
	t, ok := a.cfg.template(cl.tenant)
	if !ok {
		a.log.Warn("inbox: service window closed and no template configured; reply held for review",
			"tenant", cl.tenant, "message_id", cl.messageID, "since_last_message", now.Sub(*last).Round(time.Minute))
		r.hold = true
		return ReplyKindText, nil
	}
	a.log.Info("inbox: service window closed; the reply goes out as the template", "tenant", cl.tenant,
		"message_id", cl.messageID, "template", t.Name, "since_last_message", now.Sub(*last).Round(time.Minute))
	r.template, r.templateBody = t, t.BodyParam
	return ReplyKindTemplate, nil
}

// recipientFields addresses the reply: the group, the phone number (a
// conversation id of digits is the wa_id), or the business-scoped user id.
func recipientFields(cl *claim) map[string]any {
	switch {
	case cl.groupID != "":
		return map[string]any{"group_id": cl.groupID}
	case strings.Trim(cl.conversationID, "0123456789") == "":
		return map[string]any{"to": "+" + cl.conversationID}
	default:
		return map[string]any{"user_id": cl.conversationID}
	}
}

// answer runs the model loop for a claimed message and records the turn.
func (a *Agent) answer(ctx context.Context, cl *claim) (string, error) {
	if cl.groupID != "" && a.cfg.Groups == GroupsRefuse {
		return a.record(ctx, cl, turnResult{status: TurnGroup, reply: a.cfg.Texts.Group})
	}
	conv, err := GetConversation(ctx, a.cfg.DB, cl.tenant, cl.conversationID)
	if errors.Is(err, ErrNotFound) || (err == nil && conv.InvoiceRef == "") {
		return a.record(ctx, cl, turnResult{status: TurnNoInvoice, reply: a.cfg.Texts.NoInvoice})
	}
	if err != nil {
		return "", err
	}
	msgs, err := a.prompt(ctx, cl, conv)
	if err != nil {
		return "", err
	}
	t := &turn{cl: cl, conv: conv, msgs: msgs}
	for step := 0; step < a.cfg.MaxSteps; step++ {
		res, err := a.step(ctx, t, step)
		if err != nil {
			return "", err
		}
		if res != nil {
			return a.record(ctx, cl, *res)
		}
	}
	a.log.Warn("inbox: model still calling tools at the step limit", "tenant", cl.tenant, "message_id", cl.messageID, "steps", a.cfg.MaxSteps)
	return a.record(ctx, cl, turnResult{status: TurnModelError, steps: a.cfg.MaxSteps, code: "step_limit", tools: t.outcomes, reply: a.cfg.Texts.StepLimit})
}

// turn is a model loop in progress.
type turn struct {
	cl       *claim
	conv     *Conversation
	msgs     []openai.ChatCompletionMessage // the next request's
	outcomes []ToolOutcome
}

// step makes one model call and acts on its answer. It returns the turn's
// result when the answer ends the turn, nil when the model called tools
// and reads their results in the next step.
func (a *Agent) step(ctx context.Context, t *turn, step int) (*turnResult, error) {
	cl := t.cl
	end := func(status, code, reply string) *turnResult {
		return &turnResult{status: status, steps: step + 1, code: code, tools: t.outcomes, reply: reply}
	}
	c, err := a.complete(ctx, cl.tenant, cl.messageID, step, t.msgs)
	var me *ModelError
	if errors.As(err, &me) && !me.Retryable {
		a.log.Warn("inbox: model refused the request", "tenant", cl.tenant, "message_id", cl.messageID, "step", step, "code", me.Code)
		return &turnResult{status: TurnModelError, steps: step, code: me.Code, tools: t.outcomes, reply: a.cfg.Texts.ModelError}, nil
	}
	if err != nil {
		return nil, err
	}
	a.log.Debug("inbox: model answered", "tenant", cl.tenant, "message_id", cl.messageID, "step", step,
		"replayed", c.Replayed, "tool_calls", len(c.Answer.Message.ToolCalls))
	a.cfg.Failpoint(FailModelAnswered)
	if ref := strings.TrimSpace(c.Answer.Message.Refusal); ref != "" {
		// The refusal is in the journal (the answer as received); the
		// customer gets what the policy says.
		a.log.Warn("inbox: the model refused", "tenant", cl.tenant, "message_id", cl.messageID, "step", step, "policy", a.cfg.Refusal)
		res := end(TurnRefused, "refusal", a.cfg.Texts.Refusal)
		switch a.cfg.Refusal {
		case RefusalRelay:
			res.reply = ref
		case RefusalReview:
			res.hold = true
		}
		return res, nil
	}
	switch fr := openai.FinishReason(c.Answer.FinishReason); fr {
	case openai.FinishReasonLength, openai.FinishReasonContentFilter:
		// Cut off or filtered: a tool call's arguments may be truncated
		// and a text is not what the model meant to say, so neither is
		// acted on.
		a.log.Warn("inbox: the model's answer is incomplete", "tenant", cl.tenant, "message_id", cl.messageID, "step", step, "finish_reason", fr)
		return end(TurnModelError, string(fr), a.cfg.Texts.Cut), nil
	}
	calls := c.Answer.Message.ToolCalls
	if len(calls) == 0 {
		return end(TurnAnswered, "", cmp.Or(strings.TrimSpace(c.Answer.Message.Content), a.cfg.Texts.Empty)), nil
	}
	if step+1 == a.cfg.MaxSteps {
		return nil, nil // no step left to read the tools' results
	}
	code, err := a.runTools(ctx, t, c.Answer.Message, step)
	if code != "" {
		return end(TurnToolError, code, a.cfg.Texts.ToolError), nil
	}
	return nil, err
}

// runTools prepares every tool call of the answer, then executes each and
// adds its result to the next request. A malformed call returns its code
// and executes nothing.
func (a *Agent) runTools(ctx context.Context, t *turn, m openai.ChatCompletionMessage, step int) (string, error) {
	cl := t.cl
	prepared, err := a.prepare(ctx, cl, t.conv, m.ToolCalls)
	var tce *ToolCallError
	if errors.As(err, &tce) {
		a.log.Warn("inbox: malformed tool call, nothing frozen", "tenant", cl.tenant, "message_id", cl.messageID,
			"step", step, "function", tce.Function, "code", tce.Code, "field", tce.Field)
		return tce.Code, nil
	}
	if err != nil {
		return "", err
	}
	t.msgs = append(t.msgs, assistantMessage(m))
	for i, p := range prepared {
		content, oc, err := a.execute(ctx, cl, t.conv, p)
		if errors.As(err, &tce) {
			// Only a key already frozen under another intent_ref gets
			// here: prepare caught every other refusal before anything
			// ran.
			return tce.Code, nil
		}
		if err != nil {
			return "", err
		}
		t.outcomes = append(t.outcomes, *oc)
		t.msgs = append(t.msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: m.ToolCalls[i].ID, Content: content})
	}
	return "", nil
}

// assistantMessage is the model's tool-calling answer as the next request
// must repeat it.
func assistantMessage(m openai.ChatCompletionMessage) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: m.Content, ToolCalls: m.ToolCalls}
}

// prompt is the system prompt and the conversation so far, oldest first,
// ending with the message being answered.
func (a *Agent) prompt(ctx context.Context, cl *claim, conv *Conversation) ([]openai.ChatCompletionMessage, error) {
	hist, err := conversationHistory(ctx, a.cfg.DB, cl.tenant, cl.conversationID, cl.seq, a.cfg.HistoryLimit)
	if err != nil {
		return nil, fmt.Errorf("agent: history: %w", err)
	}
	msgs := make([]openai.ChatCompletionMessage, 0, len(hist)+1)
	msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: a.cfg.Prompt(*conv)})
	for _, e := range hist {
		role := openai.ChatMessageRoleUser
		if e.out {
			role = openai.ChatMessageRoleAssistant
		}
		msgs = append(msgs, openai.ChatCompletionMessage{Role: role, Content: e.body})
	}
	return msgs, nil
}

// preparedCall is a tool call that passed every check that needs no write.
type preparedCall struct {
	fn     string
	action string
	fields map[string]any
}

// prepare checks every tool call of a step before any is executed, so that
// a malformed call next to a good one freezes nothing at all. A call whose
// fields cannot be normalized passes only when its intent is already frozen
// (a redelivery whose model now garbles what a first answer got right acts
// on the first, good extraction, as intent.Freeze documents).
func (a *Agent) prepare(ctx context.Context, cl *claim, conv *Conversation, calls []openai.ToolCall) ([]preparedCall, error) {
	out := make([]preparedCall, 0, len(calls))
	for _, tc := range calls {
		fn := tc.Function.Name
		parsed, err := a.cfg.Tools.ParseToolCall(tc)
		switch {
		case errors.Is(err, tools.ErrUnknownTool):
			return nil, &ToolCallError{Function: fn, Code: "unknown_tool", Err: err}
		case err != nil:
			return nil, &ToolCallError{Function: fn, Code: "bad_arguments", Err: err}
		case !a.offered[parsed.Action]:
			// Registered but not the model's to call (the reply tool).
			return nil, &ToolCallError{Function: fn, Code: "unknown_tool", Err: tools.ErrUnknownTool}
		}
		fields := a.systemFields(parsed, conv)
		x, err := a.cfg.Intents.Extract(intent.FreezeParams{Tenant: cl.tenant, Ref: conv.InvoiceRef, Action: parsed.Action, Fields: fields, SourceRef: cl.messageID})
		if err != nil {
			return nil, &ToolCallError{Function: fn, Code: "bad_arguments", Err: err}
		}
		if x.Err != nil {
			_, gerr := intent.Get(ctx, a.cfg.DB, cl.tenant, conv.InvoiceRef, parsed.Action)
			if errors.Is(gerr, intent.ErrNotFound) {
				return nil, fieldError(fn, x.Err)
			}
			if gerr != nil {
				return nil, fmt.Errorf("agent: read intent: %w", gerr)
			}
		}
		out = append(out, preparedCall{fn: fn, action: parsed.Action, fields: fields})
	}
	return out, nil
}

// systemFields overrides what the system knows better than the model: the
// customer id of the conversation. (The intent_ref is written by the intent
// store; system fields the model sent were dropped by the registry.)
func (a *Agent) systemFields(c *tools.Call, conv *Conversation) map[string]any {
	fields := c.Fields
	for _, f := range c.Tool.Schema().Fields {
		if f.Name == "customer_id" && conv.CustomerID != "" {
			fields["customer_id"] = conv.CustomerID
		}
	}
	return fields
}

func fieldError(fn string, err error) *ToolCallError {
	tce := &ToolCallError{Function: fn, Code: "invalid_field", Err: err}
	kind := err
	if fes := derive.FieldErrorsOf(err); fes != nil {
		// Several fields may be broken: the first names the code, as it
		// did when normalization stopped at it; Err names them all.
		tce.Field, kind = fes[0].Field, fes[0]
	}
	switch {
	case errors.Is(kind, derive.ErrMissingField):
		tce.Code = "missing_field"
	case errors.Is(kind, derive.ErrAmbiguous):
		tce.Code = "ambiguous_field"
	case errors.Is(kind, intent.ErrKeyInUse):
		tce.Code = "key_in_use"
	}
	return tce
}

// execute freezes one prepared call's intent and runs it through the
// executor. It returns what the model is told and what the turn records.
func (a *Agent) execute(ctx context.Context, cl *claim, conv *Conversation, p preparedCall) (string, *ToolOutcome, error) {
	fp := intent.FreezeParams{Tenant: cl.tenant, Ref: conv.InvoiceRef, Action: p.action, Fields: p.fields, SourceRef: cl.messageID}
	fr, err := a.cfg.Intents.Freeze(ctx, a.cfg.DB, fp)
	if err != nil {
		var fe *derive.FieldError
		if errors.As(err, &fe) || errors.Is(err, intent.ErrKeyInUse) {
			return "", nil, fieldError(p.fn, err)
		}
		return "", nil, fmt.Errorf("agent: freeze: %w", err)
	}
	if len(fr.Divergent) > 0 || fr.ExtractionErr != nil {
		a.log.Info("inbox: extraction differs from the frozen intent; the frozen one is used",
			"tenant", cl.tenant, "message_id", cl.messageID, "action", p.action,
			"divergent", fr.Divergent, "unusable", fr.ExtractionErr != nil)
	}
	a.cfg.Failpoint(FailIntentFrozen)
	out, err := a.cfg.Executor.Execute(ctx, executor.Call{Tenant: cl.tenant, Ref: conv.InvoiceRef, Action: p.action, Fields: p.fields, SourceRef: cl.messageID},
		&executor.Opts{NoWait: true})
	if err != nil {
		if executor.IsRetryable(err) {
			return "", nil, &BusyError{What: p.action, RetryAfter: time.Second}
		}
		return "", nil, fmt.Errorf("agent: execute %s: %w", p.action, err)
	}
	oc := &ToolOutcome{Action: p.action, Status: string(out.Status), Key: out.Key, Replayed: out.Replayed, Divergent: out.Divergent}
	a.log.Info("inbox: tool executed", "tenant", cl.tenant, "message_id", cl.messageID, "action", p.action,
		"status", out.Status, "replayed", out.Replayed, "attempt", out.Attempt)
	var result any
	switch out.Status {
	case executor.StatusCompleted:
		a.cfg.Failpoint(FailActionCompleted)
		result = map[string]any{"status": "completed"}
		if len(out.Response) > 0 {
			result = map[string]any{"status": "completed", "result": json.RawMessage(out.Response)}
		}
	case executor.StatusFailed:
		f := map[string]any{"status": "failed"}
		if out.Failure != nil {
			f["code"], f["message"] = out.Failure.Code, out.Failure.Message
		}
		result = f
	case executor.StatusReview:
		result = map[string]any{"status": "pending_review", "message": "the action is being checked by an operator"}
	case executor.StatusInFlight:
		return "", nil, &BusyError{What: p.action, RetryAfter: max(out.RetryAfter, 100*time.Millisecond)}
	default:
		return "", nil, fmt.Errorf("agent: execute %s: unexpected status %q", p.action, out.Status)
	}
	b, err := json.Marshal(result)
	if err != nil {
		return "", nil, fmt.Errorf("agent: encode tool result: %w", err)
	}
	return string(b), oc, nil
}

// record writes the turn, freezes the reply intent, stores the reply in the
// history, closes the message and enqueues the reply job, in one
// transaction. When another worker recorded this turn first, nothing is
// written and its reply stands.
func (a *Agent) record(ctx context.Context, cl *claim, r turnResult) (string, error) {
	toolsJSON, err := json.Marshal(r.tools)
	if err != nil {
		return "", fmt.Errorf("agent: record turn: %w", err)
	}
	if r.tools == nil {
		toolsJSON = []byte("[]")
	}
	ref := replyRef(cl.messageID)
	tx, err := a.cfg.DB.Begin(ctx)
	if err != nil {
		return "", fmt.Errorf("agent: record turn: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	kind, err := a.replyKind(ctx, tx, cl, &r)
	if err != nil {
		return "", err
	}
	first, err := insertTurn(ctx, tx, turnRecord{cl: cl, r: &r, tools: toolsJSON, ref: ref, kind: kind})
	if err != nil {
		return "", fmt.Errorf("agent: record turn: %w", err)
	}
	if !first {
		a.log.Info("inbox: turn already recorded by another worker", "tenant", cl.tenant, "message_id", cl.messageID)
		return "duplicate", nil
	}
	fields := recipientFields(cl)
	fields["body"] = r.reply
	if kind == ReplyKindTemplate {
		if !r.templateBody {
			delete(fields, "body")
		}
		fields["template"], fields["language"] = r.template.Name, r.template.Language
	}
	fr, err := a.cfg.Intents.Freeze(ctx, tx, intent.FreezeParams{
		Tenant: cl.tenant, Ref: ref, Action: a.cfg.ReplyAction, SourceRef: cl.messageID, Fields: fields,
	})
	if err != nil {
		return "", fmt.Errorf("agent: freeze reply: %w", err)
	}
	key := fr.Intent.Key
	if err := setReplyKey(ctx, tx, cl.tenant, cl.messageID, key); err != nil {
		return "", fmt.Errorf("agent: record turn: %w", err)
	}
	if err := insertReplyMessage(ctx, tx, cl, ref, r.reply); err != nil {
		return "", fmt.Errorf("agent: store reply: %w", err)
	}
	if err := markProcessed(ctx, tx, cl.tenant, cl.messageID); err != nil {
		return "", fmt.Errorf("agent: close message: %w", err)
	}
	if r.hold {
		// Frozen, not sent: an operator decides (the window is closed and
		// no template is configured, or the policy says so).
		if err := setReplyStatus(ctx, tx, cl.tenant, cl.messageID, ReplyReview); err != nil {
			return "", fmt.Errorf("agent: record turn: %w", err)
		}
	} else if _, err := a.cfg.Queue.InsertTx(ctx, tx, ReplyArgs{Tenant: cl.tenant, MessageID: cl.messageID, Key: key}, nil); err != nil {
		return "", fmt.Errorf("agent: enqueue reply: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return "", fmt.Errorf("agent: record turn: commit: %w", err)
	}
	a.cfg.Failpoint(FailTurnRecorded)
	return r.status, nil
}

// HandleReply sends a recorded reply: the reply job's work. The executor
// runs the frozen reply intent by key, so a job that runs again after the
// message went out replays the stored outcome (or asks the provider by
// key) instead of sending twice.
func (a *Agent) HandleReply(ctx context.Context, args ReplyArgs) error {
	if args.Tenant == "" || args.MessageID == "" || args.Key == "" {
		return fmt.Errorf("%w: reply job needs tenant, message id and key", ErrInvalid)
	}
	if err := a.sendKey(ctx, args.Tenant, args.MessageID, args.Key, "reply"); err != nil {
		return err
	}
	a.cfg.Failpoint(FailReplyBeforeAck)
	return nil
}
