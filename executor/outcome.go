package executor

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/internal/ledger"
	"github.com/retrysafe/retrysafe/internal/lostconn"
	"github.com/retrysafe/retrysafe/tools"
)

// The end of an action: the fenced completion, grouped, and its log.

// giveUp ends an action whose retries are spent. When nothing can have
// acted (every attempt failed before reaching the provider, or the
// provider, asked by key, has nothing) that is certain, and the action
// fails: a new try needs a new intent_ref. Otherwise nobody can tell
// whether it acted, and it goes to review with its last failure.
func (e *Executor) giveUp(ctx context.Context, h held, mayHaveActed bool, last *ToolFailure, out *Outcome) (*Outcome, error) {
	if mayHaveActed {
		return e.finish(ctx, h, RowReview, nil, last, out)
	}
	return e.finish(ctx, h, RowFailed, nil, &ToolFailure{
		Class: tools.ClassDefinitive, Code: "retries_exhausted", Status: last.Status, Attempt: h.attempt,
		Message: fmt.Sprintf("retries spent and the provider never acted (last failure: %s %s)", last.Class, last.Code),
	}, out)
}

// finish writes the outcome, fenced by owner and attempt.
func (e *Executor) finish(ctx context.Context, h held, status string, resp json.RawMessage, f *ToolFailure, out *Outcome) (*Outcome, error) {
	wctx := e.writeCtx(ctx)
	cu := &completeUnit{Completion: ledger.Completion{Tenant: h.tenant, Key: h.key, Owner: h.owner, Attempt: int32(h.attempt), Status: status}}
	if resp != nil {
		s := string(resp)
		cu.Response = &s
	}
	if f != nil {
		fj, _ := json.Marshal(f)
		s := string(fj)
		cu.Error = &s
	}
	async, g := false, e.completions
	if h.relearnable && status == RowCompleted {
		// Its own groups: the setting it turns off for its transaction
		// would hold for every completion grouped with it.
		async, g = true, e.completionsAsync
	}
	queue := func(b *pgx.Batch) { e.queueComplete(b, async, cu) }
	err := e.grouped(wctx, g, h.tenant+"\x00"+h.key, queue, cu)
	again := err != nil && lostconn.Lost(err)
	if again {
		// The connection was lost with the write sent, so it may have
		// committed; the outcome in hand would otherwise wait for the
		// lease to run out and the provider to be asked again. The write
		// is fenced by this call's attempt: sent again, alone on another
		// connection, it commits, or it matches nothing because the first
		// one did, which the row then shows.
		e.cfg.Logger.Warn("executor: completion's connection lost, writing it again",
			"tenant", h.tenant, "action", h.action, "attempt", h.attempt, "err", err)
		ev := WriteEvent{Tenant: h.tenant, Action: h.action, Write: WriteCompletion, Attempt: h.attempt, Lost: err}
		err = e.sendAgain(context.WithoutCancel(ctx), ev, func() error {
			cu.Matched = false
			return e.send(e.writeCtx(ctx), nil, queue)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("executor: complete: %w", err)
	}
	if !cu.Matched {
		res, cerr := e.current(ctx, out)
		if cerr != nil {
			return nil, cerr
		}
		// Only this call writes a final status at its attempt without a
		// resolution: a takeover writes at the next one, an operator's
		// resolution of an expired lease records itself.
		ours := again && res.Status == statusOf(status) && res.Attempt == h.attempt &&
			(res.Failure == nil || res.Failure.Resolution == nil)
		if !ours {
			e.cfg.Logger.Warn("executor: lease lost, result dropped",
				"tenant", h.tenant, "action", h.action, "attempt", h.attempt, "status", status)
			return res, fmt.Errorf("%w (attempt %d)", ErrLeaseLost, h.attempt)
		}
	}
	out.Status = statusOf(status)
	out.Replayed = false
	out.Response = resp
	out.Failure = f
	out.Attempt = h.attempt
	out.RetryAfter = 0
	e.logOutcome(out, false)
	return out, nil
}

// queueComplete queues cu's own completion statement, asynchronous or
// not (see ledger.QueueComplete), behind its plan settings: the lighter
// ledger.QueueCompletePlans for an asynchronous one, ledger.QueuePlans
// (which also makes it commit synchronously) for the other (see
// buildCompletes).
func (e *Executor) queueComplete(b *pgx.Batch, async bool, cu *completeUnit) {
	if async {
		ledger.QueueCompletePlans(b)
	} else {
		ledger.QueuePlans(b)
	}
	ledger.QueueComplete(b, &cu.Completion, async)
}

func (e *Executor) logOutcome(o *Outcome, replay bool) {
	if replay {
		e.cfg.Logger.Debug("executor: stored outcome", "tenant", o.Tenant, "action", o.Action, "status", string(o.Status), "attempt", o.Attempt)
		return
	}
	e.cfg.Logger.Info("executor: action settled", "tenant", o.Tenant, "action", o.Action, "status", string(o.Status), "attempt", o.Attempt)
}
