package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/internal/ledger"
	"github.com/retrysafe/retrysafe/internal/lostconn"
)

// The lease: taken over when expired, extended while a call runs,
// released to a backoff after a transient failure, retaken at its end.

// takeover takes over an expired lease seen at attempt seen, for the
// call's owner. One lost with its connection is sent again (the
// compare-and-set wins if the lost one did not commit) and, when that
// loses, the row read: under the call's owner, the lost one won, and the
// call holds it as a lost claim's (adoptLost).
func (e *Executor) takeover(ctx context.Context, tenant, key, action, owner string, seen int) (attempt int, prev *ToolFailure, age time.Duration, won bool, err error) {
	var t *ledger.Taken
	queue := func(b *pgx.Batch) { t = ledger.QueueTakeover(b, tenant, key, seen, owner, e.cfg.Lease) }
	err = e.planned(ctx, queue)
	if err != nil && lostconn.Lost(err) {
		e.claimLost("takeover", action, err)
		ev := WriteEvent{Tenant: tenant, Action: action, Write: WriteTakeover, Lost: err}
		if err = e.sendAgain(ctx, ev, func() error { return e.planned(ctx, queue) }); err == nil && !t.Won {
			return e.takenLost(ctx, tenant, key, owner)
		}
	}
	if err != nil {
		return 0, nil, 0, false, fmt.Errorf("executor: takeover: %w", err)
	}
	if !t.Won {
		return 0, nil, 0, false, nil
	}
	return t.Attempt, decodeFailure(t.Error), t.Age, true, nil
}

// takenLost reads the row a lost takeover left and adopts it when it is
// under owner: the takeover's attempt, the failure it found, and the
// action's age by the database's clock (lease_until less what was left of
// it, less created_at).
func (e *Executor) takenLost(ctx context.Context, tenant, key, owner string) (int, *ToolFailure, time.Duration, bool, error) {
	a, err := Get(ctx, e.cfg.DB, tenant, key)
	if err != nil {
		return 0, nil, 0, false, fmt.Errorf("executor: takeover: reading the lost takeover's row: %w", err)
	}
	var age time.Duration
	if a.LeaseUntil != nil {
		age = a.LeaseUntil.Add(-a.LeaseLeft).Sub(a.CreatedAt)
	}
	adopted, err := e.adoptLost(ctx, &claim{act: a}, owner)
	if err != nil || !adopted {
		return 0, nil, 0, false, err
	}
	return a.Attempt, a.Failure, age, true, nil
}

// heartbeat extends the lease every Heartbeat. When the lease is lost, or
// cannot be extended before it would run out, the call is canceled: a taker
// may be about to act.
func (e *Executor) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, done <-chan struct{}, h held) {
	t := time.NewTicker(e.cfg.Heartbeat)
	defer t.Stop()
	deadline := time.Now().Add(e.cfg.Lease - e.cfg.LeaseMargin)
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		bctx, bcancel := context.WithTimeout(ctx, e.cfg.Heartbeat)
		var f *ledger.Fenced
		err := e.planned(bctx, func(b *pgx.Batch) {
			f = ledger.QueueHeartbeat(b, h.tenant, h.key, h.owner, h.attempt, e.cfg.Lease)
		})
		bcancel()
		switch {
		case err == nil && f.Matched:
			deadline = time.Now().Add(e.cfg.Lease - e.cfg.LeaseMargin)
		case err == nil:
			cancel(ErrLeaseLost)
			return
		case time.Now().After(deadline):
			cancel(fmt.Errorf("%w: heartbeat failed: %w", ErrLeaseLost, err))
			return
		}
	}
}

func (e *Executor) release(ctx context.Context, h held, delay time.Duration, f *ToolFailure) error {
	wctx := e.writeCtx(ctx)
	fj, _ := json.Marshal(f)
	var fenced *ledger.Fenced
	queue := func(b *pgx.Batch) {
		fenced = ledger.QueueRelease(b, h.tenant, h.key, h.owner, h.attempt, delay, string(fj))
	}
	err := e.planned(wctx, queue)
	if err != nil && lostconn.Lost(err) {
		// Sent, so it may have committed; lost, the lease would run its
		// full length instead of the backoff. Fenced by owner and attempt,
		// it is safe twice: sent again on another connection it commits
		// (again), or matches nothing once a taker has moved the attempt on.
		e.cfg.Logger.Warn("executor: release's connection lost, releasing again",
			"tenant", h.tenant, "action", h.action, "attempt", h.attempt, "err", err)
		ev := WriteEvent{Tenant: h.tenant, Action: h.action, Write: WriteRelease, Attempt: h.attempt, Lost: err}
		err = e.sendAgain(context.WithoutCancel(ctx), ev, func() error { return e.planned(e.writeCtx(ctx), queue) })
	}
	if err != nil {
		return fmt.Errorf("executor: release: %w", err)
	}
	if !fenced.Matched {
		return fmt.Errorf("%w (attempt %d)", ErrLeaseLost, h.attempt)
	}
	return nil
}

func (e *Executor) retake(ctx context.Context, h held) (int, time.Duration, bool, error) {
	var t *ledger.Taken
	err := e.planned(ctx, func(b *pgx.Batch) {
		t = ledger.QueueRetake(b, h.tenant, h.key, h.attempt, h.owner, e.cfg.Lease)
	})
	if err != nil {
		return 0, 0, false, fmt.Errorf("executor: retake: %w", err)
	}
	return t.Attempt, t.Age, t.Won, nil
}
