package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/tools"
)

// An attempt: the call with the frozen key (or, in doubt, the Lookup by
// it), and what decides whether another follows.

// prevUncertain reports whether the attempt before a takeover may have
// acted. Only a failure recorded by that very attempt as transient (the
// request never left) proves it did not; a worker that died mid-call left
// no record.
func prevUncertain(prev *ToolFailure, newAttempt int) bool {
	return !(prev != nil && prev.Attempt == newAttempt-1 && prev.Class == tools.ClassTransient)
}

// work holds the lease (owner's, at attempt) and drives it to an end: completed,
// failed, review, or (transient, NoWait) released for a later attempt.
// age is how long ago the action was first claimed (database clock);
// prevMayHaveActed says an earlier attempt may have reached the provider.
func (e *Executor) work(ctx context.Context, tool tools.Tool, in *intent.Intent, owner string, attempt int, age time.Duration, prevMayHaveActed bool, opts *Opts, out *Outcome) (*Outcome, error) {
	looker, canLookup := tools.CanLookup(tool)
	a := &attempts{tool: tool, looker: looker, canLookup: canLookup, in: in, age: age, doubt: prevMayHaveActed, out: out,
		h: held{tenant: in.Tenant, key: in.Key, action: in.Action, owner: owner,
			relearnable: !e.cfg.SyncCompletion && (tool.Idempotent() || canLookup)}}
	for {
		a.h.attempt = attempt
		out.Attempt = attempt
		tf, delay, end := e.attempt(ctx, a)
		if end != nil {
			return end.out, end.err
		}
		e.cfg.Logger.Info("executor: transient failure, retrying with the same key",
			"tenant", a.h.tenant, "action", a.h.action, "attempt", attempt, "class", string(tf.Class), "code", tf.Code)
		out.Status, out.Failure, out.RetryAfter, out.Replayed = StatusInFlight, tf, delay, false
		if opts != nil && opts.NoWait {
			return out, nil
		}
		if err := e.cfg.Clock.Sleep(ctx, delay); err != nil {
			return out, err
		}
		next, nextAge, won, err := e.retake(ctx, a.h)
		if err != nil {
			return nil, err
		}
		if !won {
			return e.current(ctx, out)
		}
		attempt, a.age = next, nextAge
		out.RetryAfter = 0
	}
}

// attempts is what work carries from one attempt of an action to the next.
type attempts struct {
	tool      tools.Tool
	looker    tools.Looker
	canLookup bool
	in        *intent.Intent
	h         held          // the lease, at the current attempt
	age       time.Duration // since the action was first claimed (database clock)
	doubt     bool          // an earlier attempt may have reached the provider
	out       *Outcome
}

// ended is how an action ended (or why nothing can be said of it).
type ended struct {
	out *Outcome
	err error
}

func endWith(out *Outcome, err error) *ended { return &ended{out: out, err: err} }

// attempt makes the current attempt (try) and, when it failed for now,
// releases the lease to a backoff for the next one: it returns that
// attempt's failure and the backoff, or how the action ended.
func (e *Executor) attempt(ctx context.Context, a *attempts) (*ToolFailure, time.Duration, *ended) {
	fail, called, end := e.try(ctx, a)
	if end != nil {
		return nil, 0, end
	}
	h := a.h
	tf := &ToolFailure{Class: fail.Class, Code: fail.Code, Status: fail.Status, Message: fail.Message, Attempt: h.attempt}
	if fail.Class == tools.ClassDefinitive {
		return nil, 0, endWith(e.finish(ctx, h, RowFailed, nil, tf, a.out))
	}
	mayHaveActed := a.doubt || (called && fail.Class == tools.ClassUncertain)
	if mayHaveActed && !a.tool.Idempotent() && !a.canLookup {
		return nil, 0, endWith(e.finish(ctx, h, RowReview, nil, tf, a.out))
	}
	delay := e.backoff(h.attempt)
	if e.lastTry(h.attempt, a.age, delay) {
		if mayHaveActed && a.canLookup {
			resp, err := e.lookup(ctx, a.looker, h)
			switch {
			case err == nil:
				return nil, 0, endWith(e.finish(ctx, h, RowCompleted, resp, nil, a.out))
			case errors.Is(err, tools.ErrNotFound):
				mayHaveActed = false // the provider has nothing under the key
			}
		}
		return nil, 0, endWith(e.giveUp(ctx, h, mayHaveActed, tf, a.out))
	}
	if err := e.release(ctx, h, delay, tf); err != nil {
		if errors.Is(err, ErrLeaseLost) {
			res, cerr := e.current(ctx, a.out)
			if cerr != nil {
				return nil, 0, endWith(nil, cerr)
			}
			return nil, 0, endWith(res, err)
		}
		return nil, 0, endWith(nil, err)
	}
	a.doubt = mayHaveActed
	return tf, delay, nil
}

// try makes the current attempt's request: where an earlier attempt may
// have acted, a Lookup by the key first (found, the action completes; the
// provider cannot be asked, the attempt fails without calling), and a tool
// that can neither be asked nor take the key goes to review instead of
// being called twice; past the retry budget, no new call; else the call
// with the same key. It returns how the action ended, or the attempt's
// failure and whether the provider was called.
func (e *Executor) try(ctx context.Context, a *attempts) (fail *tools.Error, called bool, end *ended) {
	h := a.h
	if a.doubt && a.canLookup {
		resp, err := e.lookup(ctx, a.looker, h)
		switch {
		case err == nil:
			return nil, false, endWith(e.finish(ctx, h, RowCompleted, resp, nil, a.out))
		case errors.Is(err, tools.ErrNotFound):
			a.doubt = false
		default:
			// The provider could not be asked: this attempt fails
			// without calling, and the doubt remains.
			fail = tools.Classify(err)
			if fail.Class == tools.ClassDefinitive {
				fail = &tools.Error{Class: tools.ClassUncertain, Code: "lookup_" + fail.Code, Message: "lookup refused"}
			}
			return fail, false, nil
		}
	}
	if a.doubt && !a.tool.Idempotent() {
		return nil, false, endWith(e.finish(ctx, h, RowReview, nil, &ToolFailure{
			Class: tools.ClassUncertain, Code: "uncertain_without_key", Attempt: h.attempt,
			Message: "an earlier attempt may have acted; the tool takes no idempotency key and cannot be asked, so it is not called twice",
		}, a.out))
	}
	if e.pastBudget(h.attempt, a.age) {
		// Taken over beyond the budget: no new call. A Lookup above
		// has already settled the doubt where the tool can be asked.
		return nil, false, endWith(e.giveUp(ctx, h, a.doubt, &ToolFailure{
			Class: tools.ClassUncertain, Code: "attempts_exhausted", Attempt: h.attempt,
			Message: e.budgetText(h.attempt, a.age),
		}, a.out))
	}
	resp, err := e.call(ctx, a.tool, a.in, h)
	if err == nil {
		if len(resp) == 0 || !json.Valid(resp) {
			resp = json.RawMessage(`null`)
		}
		return nil, true, endWith(e.finish(ctx, h, RowCompleted, resp, nil, a.out))
	}
	return tools.Classify(err), true, nil
}

// held is a lease this worker holds.
type held struct {
	tenant, key, action string
	// owner is the lease owner the call's claim or takeover wrote, unique
	// to the call (Executor.newOwner): its fenced writes match it.
	owner   string
	attempt int
	// relearnable: the provider can tell the outcome again by the key, so
	// a completion need not wait for its WAL flush.
	relearnable bool
}

func (e *Executor) lookup(ctx context.Context, l tools.Looker, h held) (resp json.RawMessage, err error) {
	cctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	defer e.looked(h, e.start(), &err)
	defer func() {
		if r := recover(); r != nil {
			resp, err = nil, tools.Uncertain("panic", "tool lookup panicked", nil)
		}
	}()
	resp, err = l.Lookup(cctx, h.key)
	if err == nil && (len(resp) == 0 || !json.Valid(resp)) {
		resp = json.RawMessage(`null`)
	}
	return resp, err
}

// call runs the tool with the frozen key under the call timeout, with the
// heartbeat when configured. No transaction is open here.
func (e *Executor) call(ctx context.Context, tool tools.Tool, in *intent.Intent, h held) (resp json.RawMessage, err error) {
	cctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	if e.cfg.Heartbeat > 0 {
		hctx, hcancel := context.WithCancelCause(cctx)
		defer hcancel(nil)
		done := make(chan struct{})
		defer func() { close(done) }()
		go e.heartbeat(hctx, hcancel, done, h)
		cctx = hctx
	}
	defer e.called(h, e.calling(h), &err)
	defer func() {
		if r := recover(); r != nil {
			resp, err = nil, tools.Uncertain("panic", "tool panicked", nil)
		}
	}()
	return tool.Execute(cctx, in.Key, in.Payload)
}

// pastBudget reports whether attempt, taken over age after the action was
// first claimed, is beyond the retry budget: past RetryHorizon, or beyond
// MaxAttempts when that is set.
func (e *Executor) pastBudget(attempt int, age time.Duration) bool {
	return age > e.cfg.RetryHorizon || (e.cfg.MaxAttempts > 0 && attempt > e.cfg.MaxAttempts)
}

// lastTry reports whether attempt, which failed, is the last: the next
// one, after delay, would start past RetryHorizon, or MaxAttempts (when
// set) is reached.
func (e *Executor) lastTry(attempt int, age, delay time.Duration) bool {
	return age+delay > e.cfg.RetryHorizon || (e.cfg.MaxAttempts > 0 && attempt >= e.cfg.MaxAttempts)
}

func (e *Executor) budgetText(attempt int, age time.Duration) string {
	if e.cfg.MaxAttempts > 0 && attempt > e.cfg.MaxAttempts {
		return fmt.Sprintf("taken over after %d attempts", e.cfg.MaxAttempts)
	}
	return fmt.Sprintf("attempt %d would start %s after the first claim, past the retry horizon of %s", attempt, age.Round(time.Millisecond), e.cfg.RetryHorizon)
}
