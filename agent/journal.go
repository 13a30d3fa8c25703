package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Answer is one model answer as journaled in model_calls.answer.
type Answer struct {
	Message      openai.ChatCompletionMessage `json:"message"`
	FinishReason string                       `json:"finish_reason,omitempty"`
	ResponseID   string                       `json:"id,omitempty"`
	// Model is the model the API says answered (ledger rows record the
	// requested name, which prices are configured by).
	Model string `json:"model,omitempty"`
}

// call is one model call's result.
type call struct {
	Answer   *Answer
	Replayed bool  // from the journal: no request was made
	CallID   int64 // the ledger row of the answer used
}

// complete returns the model's answer for (tenant, source, step): from the
// journal when it holds one (journal on), else from a real call, recorded in
// the ledger and, journal on, offered to the journal, whose first entry wins.
func (a *Agent) complete(ctx context.Context, tenant, source string, step int, msgs []openai.ChatCompletionMessage) (*call, error) {
	journal := a.cfg.Journal == JournalOn
	if journal {
		c, err := a.replay(ctx, tenant, source, step)
		if err != nil || c != nil {
			return c, err
		}
	}
	req := openai.ChatCompletionRequest{Model: a.cfg.ModelName, Messages: msgs, Tools: a.modelTools}
	hint := &retryHint{}
	mctx, cancel := context.WithTimeout(withHint(ctx, hint), a.cfg.ModelTimeout)
	resp, err := a.cfg.Model.CreateChatCompletion(mctx, req)
	cancel()
	if err != nil {
		me := classifyModelError(ctx, err)
		me.RetryAfter = hint.get()
		return nil, me
	}
	if len(resp.Choices) == 0 {
		return nil, &ModelError{Code: "no_choices", Retryable: true, Err: errors.New("the answer has no choices")}
	}
	ans := &Answer{
		Message:      resp.Choices[0].Message,
		FinishReason: string(resp.Choices[0].FinishReason),
		ResponseID:   resp.ID,
		Model:        resp.Model,
	}
	body, err := json.Marshal(ans)
	if err != nil {
		return nil, fmt.Errorf("agent: encode answer: %w", err)
	}
	// The call is paid for: record it even if the job's context ended
	// while the model answered.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	id, err := insertModelCall(wctx, a.cfg.DB, ledgerCall{tenant: tenant, source: source, step: step, model: a.cfg.ModelName,
		prompt: max(resp.Usage.PromptTokens, 0), completion: max(resp.Usage.CompletionTokens, 0), answer: body})
	if err != nil {
		return nil, fmt.Errorf("agent: ledger: %w", err)
	}
	if !journal {
		return &call{Answer: ans, CallID: id}, nil
	}
	if err := insertJournal(wctx, a.cfg.DB, tenant, source, step, id); err != nil {
		return nil, fmt.Errorf("agent: journal: %w", err)
	}
	// A new statement, so a new snapshot: it sees the entry of a worker
	// whose insert committed while ours waited on the conflict.
	e, err := getJournal(ctx, a.cfg.DB, tenant, source, step)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, fmt.Errorf("agent: journal entry for step %d vanished", step)
	}
	if e.id != id {
		// Another worker answered this step first: follow its answer, so
		// that both reach the same tool call. Ours stays in the ledger as
		// what it cost.
		a.log.Info("model journal: another worker answered first, using its answer",
			"tenant", tenant, "message_id", source, "step", step)
		return &call{Answer: e.answer, CallID: e.id}, nil
	}
	return &call{Answer: ans, CallID: id}, nil
}

// replay returns the journaled answer and writes its replayed ledger row,
// or nil when nothing is journaled.
func (a *Agent) replay(ctx context.Context, tenant, source string, step int) (*call, error) {
	e, err := getJournal(ctx, a.cfg.DB, tenant, source, step)
	if err != nil || e == nil {
		return nil, err
	}
	// The avoided call is priced at what the original cost; its answer is
	// not copied (it is in the original's row).
	if _, err := insertModelCall(ctx, a.cfg.DB, ledgerCall{tenant: tenant, source: source, step: step, model: e.model,
		prompt: e.prompt, completion: e.completion, replayed: true}); err != nil {
		return nil, fmt.Errorf("agent: ledger: %w", err)
	}
	return &call{Answer: e.answer, Replayed: true, CallID: e.id}, nil
}

// journalEntry is the answer journaled for one (tenant, source, step).
type journalEntry struct {
	id                 int64
	model              string
	prompt, completion int
	answer             *Answer
}

func decodeAnswer(raw []byte) (*Answer, error) {
	var ans Answer
	if len(raw) == 0 {
		return nil, errors.New("agent: journaled call has no answer")
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		return nil, fmt.Errorf("agent: journaled answer: %w", err)
	}
	return &ans, nil
}

// classifyModelError decides whether River should retry a failed model
// call. Rate limits, server errors, timeouts and transport errors may pass;
// a request the API refuses as it stands (400, 413, 422) will be refused
// again.
func classifyModelError(ctx context.Context, err error) *ModelError {
	status := 0
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr):
		status = apiErr.HTTPStatusCode
	case errors.As(err, &reqErr):
		status = reqErr.HTTPStatusCode
	}
	me := &ModelError{Status: status, Retryable: true, Err: err}
	var ne net.Error
	switch {
	case ctx.Err() != nil:
		me.Code = "canceled"
	case status == http.StatusBadRequest, status == http.StatusRequestEntityTooLarge, status == http.StatusUnprocessableEntity:
		me.Code = fmt.Sprintf("http_%d", status)
		me.Retryable = false
	case status != 0:
		me.Code = fmt.Sprintf("http_%d", status)
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		me.Code = "timeout"
	default:
		me.Code = "transport"
	}
	return me
}
