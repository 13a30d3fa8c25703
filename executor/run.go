package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/backoff"
	"github.com/retrysafe/retrysafe/internal/ledger"
	"github.com/retrysafe/retrysafe/internal/lostconn"
	"github.com/retrysafe/retrysafe/tools"
)

// Execute and ExecuteKey: the freeze and claim (see batch.go), then the
// state table (drive), then the attempts (attempt.go).

// writeCtx is ctx for a bookkeeping write that follows a provider call:
// detached from the caller's cancellation (once the provider answered, a
// caller that gave up must not keep the answer from being recorded) and
// bounded by the shared write bound instead (see writeBound).
func (e *Executor) writeCtx(ctx context.Context) context.Context {
	return e.bound.detach(ctx)
}

// backoff is the delay after a transient failure at attempt n: exponential,
// capped, with the upper half random so that callers that failed together do
// not come back together.
func (e *Executor) backoff(n int) time.Duration {
	return backoff.UpperHalf(backoff.Exponential(e.cfg.BackoffBase, e.cfg.BackoffMax, n))
}

// claim is what the freeze+claim batch found.
type claim struct {
	fr       *intent.FreezeResult
	frErr    error
	claimed  bool
	claimKey string
	attempt  int
	act      *Action
}

// claimLost reports a claim (what: "claim") or a takeover ("takeover")
// whose connection was lost after it was sent: it may have committed (the
// server had it whole) or not, and the call sends it again, alone
// (lostconn.SendAgain), to find out (adoptLost).
func (e *Executor) claimLost(what, action string, err error) {
	e.cfg.Logger.Warn("executor: "+what+"'s connection lost, sending it again", "action", action, "err", err)
	e.hit(FailClaimLost, action)
}

// adoptLost settles a claim sent again after its connection was lost
// that found the action already started: when the lease is under owner,
// which no other call writes, the lost claim had committed and nobody has
// acted under it, so the call holds it. Before acting, the lease is
// renewed, fenced by owner and attempt: a lost claim that waited long
// enough for its lease to run out may have been taken over since, and a
// taker bumps the attempt (the renewal then matches nothing and the call
// reports the row, as any call that found it in flight). c is updated in
// place when adopted.
func (e *Executor) adoptLost(ctx context.Context, c *claim, owner string) (bool, error) {
	a := c.act
	if a == nil || a.Status != RowStarted || a.LeaseOwner != owner {
		return false, nil
	}
	var f *ledger.Fenced
	if err := e.planned(ctx, func(b *pgx.Batch) {
		f = ledger.QueueHeartbeat(b, a.Tenant, a.Key, owner, a.Attempt, e.cfg.Lease)
	}); err != nil {
		return false, fmt.Errorf("executor: claim: renewing the lost claim's lease: %w", err)
	}
	if !f.Matched {
		return false, nil
	}
	e.cfg.Logger.Warn("executor: the lost claim had committed; acting under it", "action", a.Action, "attempt", a.Attempt)
	c.claimed, c.claimKey, c.attempt = true, a.Key, a.Attempt
	return true, nil
}

// maxRaces bounds how often Execute starts over after racing an amendment.
const maxRaces = 3

func (e *Executor) execute(ctx context.Context, call Call, opts *Opts) (*Outcome, error) {
	tool, ok := e.cfg.Tools.Tool(call.Action)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTool, call.Action)
	}
	var version int
	if opts != nil {
		version = opts.Version
	}
	x, err := e.cfg.Intents.Extract(intent.FreezeParams{
		Tenant: call.Tenant, Ref: call.Ref, Action: call.Action, Fields: call.Fields,
		SourceRef: call.SourceRef, Version: version,
	})
	if err != nil {
		return nil, err
	}
	order := call.Tenant + "\x00" + call.Ref + "\x00" + call.Action
	owner := e.newOwner()
	for i := range maxRaces {
		fz, c, created, err := e.freezeAndClaim(ctx, x, order, owner, i > 0)
		if err != nil {
			return nil, err
		}
		c.fr, c.frErr = e.cfg.Intents.Outcome(x, intentOf(fz.Intent), fz.Inserted)
		if created && c.frErr == nil {
			c.fr.Created = true // the fresh claim inserted it
		}
		e.noteClaim(c.claimed || (c.frErr == nil && c.fr.Created))
		if c.frErr != nil {
			return nil, c.frErr
		}
		out := &Outcome{
			Tenant: call.Tenant, Ref: call.Ref, Action: call.Action, Key: c.fr.Intent.Key,
			Created: c.fr.Created, Divergent: c.fr.Divergent, Ignored: c.fr.Ignored,
		}
		res, err, again := e.drive(ctx, tool, c.fr.Intent, c, owner, out, opts)
		if !again {
			return res, err
		}
	}
	return nil, fmt.Errorf("executor: intent %q kept changing under concurrent amendments", call.Ref)
}

// freezeAndClaim freezes x and claims its action for owner, or finds
// both as they stand: by the read-first lookup while redeliveries are
// what arrives, the fresh claim while first executions are, else (or when
// either leaves it to them, or full, racing an amendment) the four
// statements of the freeze and claim. created says the fresh claim
// inserted the intent without claiming its action (see settle). A claim
// lost with its connection is sent again, and adopted when it committed.
func (e *Executor) freezeAndClaim(ctx context.Context, x *intent.Extraction, order, owner string, full bool) (fz ledger.Freeze, c *claim, created bool, err error) {
	cu := newClaimUnit(x, owner)
	lost := false // a claim of this call was lost with its connection
	// What the Observer hears of a lost claim: from the loss to the end
	// of the sends after it, the grouped one below included.
	var ev WriteEvent
	var lostAt time.Time
	loses := func(err error) {
		e.claimLost("claim", x.Action, err)
		ev, lostAt, lost = WriteEvent{Tenant: x.Tenant, Action: x.Action, Write: WriteClaim, Lost: err}, e.start(), true
	}
	switch {
	case full:
	case e.claims.readOnly.Load():
		// Redeliveries are what has been arriving: read first, and
		// skip the writes when the intent is settled or in flight.
		queue := func(b *pgx.Batch) { e.queueLookups(b, []*claimUnit{cu}) }
		if err := e.grouped(ctx, e.lookups, order, queue, cu); err != nil {
			if !lostconn.Lost(err) {
				return fz, nil, false, refused(fmt.Errorf("executor: lookup: %w", err))
			}
			// A read: lost, it changed nothing, and the freeze and
			// claim below, on another connection, find what it would have.
			cu = newClaimUnit(x, owner)
		}
	case x.Err == nil:
		// First executions are what has been arriving: freeze and
		// claim what is new in one statement, reading nothing back.
		queue := func(b *pgx.Batch) { e.queueFresh(b, []*claimUnit{cu}) }
		if err := e.grouped(ctx, e.fresh, order, queue, cu); err != nil {
			if !lostconn.Lost(err) {
				return fz, nil, false, refused(fmt.Errorf("executor: freeze and claim: %w", err))
			}
			// What it read before the loss says nothing of its
			// commit: the freeze and claim below find out.
			loses(err)
			cu = newClaimUnit(x, owner)
		}
	}
	fz, c, created = cu.settle()
	if c == nil {
		// One round trip, one implicit transaction (shared with the
		// calls grouped with this one): freeze, read back, claim,
		// read the action. Four statements, four snapshots.
		queue := func(b *pgx.Batch) { e.queueOne(b, cu) }
		err := e.grouped(ctx, e.claims, order, queue, cu)
		if lost {
			ev.Sends++ // the fresh claim's, lost: this was its first send again
		}
		if err != nil && lostconn.Lost(err) {
			if !lost {
				loses(err)
			}
			err = e.resend(ctx, &ev, func() error {
				cu = newClaimUnit(x, owner)
				return e.send(ctx, e.claims.plans, queue)
			})
		}
		if lost {
			e.wroteAgain(ev, lostAt, err)
		}
		if err != nil {
			return fz, nil, false, refused(fmt.Errorf("executor: freeze and claim: %w", err))
		}
		fz, c, _ = cu.settle()
	}
	if lost && !c.claimed {
		adopted, err := e.adoptLost(ctx, c, owner)
		if err != nil {
			return fz, nil, false, err
		}
		if adopted && fz.Intent != nil && fz.Intent.CreatedAt.Equal(c.act.CreatedAt) {
			// Both rows have their transaction's now(): the lost
			// batch froze the intent too.
			fz.Inserted = true
		}
	}
	return fz, c, created, nil
}

func (e *Executor) executeKey(ctx context.Context, tenant, key string, opts *Opts) (*Outcome, error) {
	owner := e.newOwner()
	for range maxRaces {
		in, err := e.intentByKey(ctx, tenant, key)
		if errors.Is(err, intent.ErrNotFound) {
			return nil, fmt.Errorf("%w: no intent under that key for tenant %q", ErrNotFound, tenant)
		}
		if err != nil {
			return nil, err
		}
		tool, ok := e.cfg.Tools.Tool(in.Action)
		if !ok {
			return nil, fmt.Errorf("%w: %q", ErrUnknownTool, in.Action)
		}
		var lc *ledger.Claim
		id := ledger.ID{Tenant: tenant, Ref: in.Ref, Action: in.Action}
		// Under the plan settings: their plans, and their synchronous commit.
		queue := func(b *pgx.Batch) { lc = ledger.QueueClaim(b, id, owner, e.cfg.Lease) }
		err = e.planned(ctx, queue)
		lost := err != nil && lostconn.Lost(err)
		if lost {
			e.claimLost("claim", in.Action, err)
			ev := WriteEvent{Tenant: tenant, Action: in.Action, Write: WriteClaim, Lost: err}
			err = e.sendAgain(ctx, ev, func() error { return e.planned(ctx, queue) })
		}
		if err != nil {
			return nil, refused(fmt.Errorf("executor: claim: %w", err))
		}
		c := &claim{claimed: lc.Claimed, claimKey: lc.Key, attempt: lc.Attempt, act: actionOf(lc.Action)}
		if lost && !c.claimed {
			if _, err := e.adoptLost(ctx, c, owner); err != nil {
				return nil, err
			}
		}
		out := &Outcome{Tenant: tenant, Ref: in.Ref, Action: in.Action, Key: in.Key}
		res, err, again := e.drive(ctx, tool, in, c, owner, out, opts)
		if !again {
			return res, err
		}
		if in.Key != key {
			break
		}
	}
	return nil, fmt.Errorf("%w: the intent under that key was amended", ErrNotFound)
}

// drive applies the state table to what the batch found. again asks the
// caller to start over: an amendment changed the key between statements.
func (e *Executor) drive(ctx context.Context, tool tools.Tool, in *intent.Intent, c *claim, owner string, out *Outcome, opts *Opts) (*Outcome, error, bool) {
	if c.claimed {
		if c.claimKey != in.Key {
			// The claim read a newer key than the read-back: act on the
			// intent as it now stands.
			cur, err := e.intentByKey(ctx, in.Tenant, c.claimKey)
			if err != nil {
				return nil, err, false
			}
			in = cur
			out.Key, out.Divergent = in.Key, nil
		}
		res, err := e.work(ctx, tool, in, owner, c.attempt, 0, false, opts, out)
		return res, err, false
	}
	a := c.act
	if a == nil || a.Key != in.Key || (a.Failure != nil && a.Failure.Class == intent.SupersededClass) {
		return nil, nil, true
	}
	if a.Status != RowStarted || !a.Expired {
		res := fromRow(out, a)
		e.logOutcome(res, true)
		return res, nil, false
	}
	// Started with an expired lease: compare-and-set takeover.
	attempt, prev, age, won, err := e.takeover(ctx, a.Tenant, a.Key, in.Action, owner, a.Attempt)
	if err != nil {
		return nil, err, false
	}
	if !won {
		res, err := e.current(ctx, out)
		return res, err, false
	}
	out.tookOver = true
	res, err := e.work(ctx, tool, in, owner, attempt, age, prevUncertain(prev, attempt), opts, out)
	return res, err, false
}

// current re-reads the action and reports it as stored.
func (e *Executor) current(ctx context.Context, out *Outcome) (*Outcome, error) {
	rctx := e.writeCtx(ctx)
	a, err := Get(rctx, e.cfg.DB, out.Tenant, out.Key)
	if err != nil {
		return nil, err
	}
	return fromRow(out, a), nil
}
