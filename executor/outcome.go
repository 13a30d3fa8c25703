package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrysafe/retrysafe/internal/backoff"
	"github.com/retrysafe/retrysafe/internal/ledger"
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
	again := err != nil && connectionLost(err)
	if again {
		// The connection was lost with the write sent, so it may have
		// committed; the outcome in hand would otherwise wait for the
		// lease to run out and the provider to be asked again. The write
		// is fenced by this call's attempt: sent again, alone on another
		// connection, it commits, or it matches nothing because the first
		// one did, which the row then shows.
		e.cfg.Logger.Warn("executor: completion's connection lost, writing it again",
			"tenant", h.tenant, "action", h.action, "attempt", h.attempt, "err", err)
		err = sendAgain(context.WithoutCancel(ctx), func() error {
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

// connectionLost reports whether err leaves a write's outcome unknown
// because its connection failed: neither the server's answer (a
// *pgconn.PgError: what it refused, it rolled back) nor the end of the
// write's bound. A server that refuses a new connection only for now
// (startingUp) counts too: nothing was sent, and the write is sent again
// like a lost one.
func connectionLost(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var pgErr *pgconn.PgError
	return !errors.As(err, &pgErr) || startingUp(err, pgErr)
}

// startingUp reports whether err is a connection refused by a server that
// will take it soon: one starting up or recovering from a crash (57P03
// cannot_connect_now: "the database system is starting up", "... is in
// recovery mode"), shutting down (57P01), or at max_connections (53300).
// Each is a fatal error in answer to a startup message, before any
// statement.
func startingUp(err error, pgErr *pgconn.PgError) bool {
	var connect *pgconn.ConnectError
	if !errors.As(err, &connect) {
		return false
	}
	switch pgErr.Code {
	case "57P03", "57P01", "53300":
		return true
	}
	return false
}

// The pauses between the tries of a write sent again (sendAgain): from
// lostPause, doubling to lostPauseMax, the upper half random.
const (
	lostPause    = 50 * time.Millisecond
	lostPauseMax = time.Second
)

// sendAgain sends a write whose connection was lost (send), and sends it
// once more after a pause whenever that try cannot reach the server either
// (no connection could be made, or the new one was lost too), for up to
// writeTimeout from the loss or until ctx ends; it returns the last try's
// error. A PostgreSQL that restarts or fails over is back within seconds,
// and the outcome in hand, the claim or the release would otherwise wait
// for a lease to run out. Every write sent so is safe to repeat: a
// completion or a release is fenced by owner and attempt; a
// takeover is a compare-and-set of the attempt; a claim sent again claims,
// or finds the lease its lost try took under the call's own owner
// (adoptLost).
func sendAgain(ctx context.Context, send func() error) error {
	deadline := time.Now().Add(writeTimeout)
	for n := 1; ; n++ {
		err := send()
		if err == nil || !unreachable(err) {
			return err
		}
		d := backoff.UpperHalf(backoff.Exponential(lostPause, lostPauseMax, n))
		if time.Until(deadline) < d || backoff.Sleep(ctx, d) != nil {
			return err
		}
	}
}

// unreachable reports whether err is the network's or a server's that is
// not taking connections yet: no connection could be made (startingUp
// included), or the one a try had broke. Another try may get through; a
// server's refusal of the statement or the login, a closed pool or
// transaction, or the end of a context would only come back.
func unreachable(err error) bool {
	if !connectionLost(err) {
		return false
	}
	var connect *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connect) || errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
