package executor

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/ledger"
)

// ClaimSeen is what one call's freeze and claim found, for comparing the
// grouped statements with the per-call ones.
type ClaimSeen struct {
	Err           string
	Key           string
	Created       bool
	Divergent     []string
	ExtractionErr string
	Claimed       bool
	ClaimAttempt  int
	ActStatus     string
	ActAttempt    int
	ActOwner      string
	LookedUp      bool // ClaimReadFirst, ClaimFresh: the first group settled it (not compared)
}

// How ClaimAll runs its calls.
type ClaimHow int

const (
	ClaimAlone     ClaimHow = iota // each call's freeze and claim alone, in turn
	ClaimGrouped                   // one claims group
	ClaimReadFirst                 // one group of read-first lookups, then each call the lookup left alone, in turn
	ClaimFresh                     // one fresh claims group of the calls without field errors, then each call it left alone, in turn
)

// ClaimAll runs the freeze and claim of calls as how says, and reports what
// each found. The tool is never called.
func (e *Executor) ClaimAll(ctx context.Context, calls []Call, how ClaimHow) ([]ClaimSeen, error) {
	cus := make([]*claimUnit, len(calls))
	for i, c := range calls {
		x, err := e.cfg.Intents.Extract(intent.FreezeParams{Tenant: c.Tenant, Ref: c.Ref, Action: c.Action, Fields: c.Fields, SourceRef: c.SourceRef})
		if err != nil {
			return nil, err
		}
		// An owner per call, the same whatever how is, so that what
		// the modes find compares.
		cus[i] = newClaimUnit(x, e.cfg.Owner+"/"+strconv.Itoa(i))
	}
	lookedUp := make([]bool, len(calls))
	if how == ClaimGrouped {
		b := &pgx.Batch{}
		e.queueClaims(b, cus)
		if err := e.cfg.DB.SendBatch(ctx, b).Close(); err != nil {
			return nil, err
		}
	} else {
		if how == ClaimReadFirst {
			b := &pgx.Batch{}
			e.queueLookups(b, cus)
			if err := e.cfg.DB.SendBatch(ctx, b).Close(); err != nil {
				return nil, err
			}
		}
		if how == ClaimFresh {
			var fresh []*claimUnit
			for _, cu := range cus {
				if cu.x.Err == nil {
					fresh = append(fresh, cu)
				}
			}
			b := &pgx.Batch{}
			e.queueFresh(b, fresh)
			if err := e.cfg.DB.SendBatch(ctx, b).Close(); err != nil {
				return nil, err
			}
		}
		for i, cu := range cus {
			if _, c, _ := cu.settle(); c != nil {
				lookedUp[i] = true
				continue // the first group settled it
			}
			b := &pgx.Batch{}
			e.queueOne(b, cu)
			if err := e.cfg.DB.SendBatch(ctx, b).Close(); err != nil {
				return nil, err
			}
		}
	}
	out := make([]ClaimSeen, len(calls))
	for i, cu := range cus {
		s := &out[i]
		fz, c, created := cu.settle()
		if c == nil {
			return nil, fmt.Errorf("call %d: no claim", i)
		}
		fr, err := e.cfg.Intents.Outcome(cu.x, intentOf(fz.Intent), fz.Inserted)
		if err == nil && (created || (cu.fresh != nil && cu.fresh.Inserted)) {
			fr.Created = true
		}
		if err != nil {
			s.Err = err.Error()
		} else {
			s.Key, s.Created, s.Divergent = fr.Intent.Key, fr.Created, fr.Divergent
			if fr.ExtractionErr != nil {
				s.ExtractionErr = fr.ExtractionErr.Error()
			}
		}
		s.Claimed, s.ClaimAttempt = c.claimed, c.attempt
		s.LookedUp = lookedUp[i]
		if c.claimed && c.claimKey != s.Key {
			s.Err += " claim key differs from the read-back"
		}
		// The action read back matters only to a call that did not claim
		// (a claimed call acts on its claim; the fresh claim reads nothing
		// back).
		if a := c.act; a != nil && !c.claimed {
			s.ActStatus, s.ActAttempt, s.ActOwner = a.Status, a.Attempt, a.LeaseOwner
		}
	}
	return out, nil
}

// Grouper exposes the group commit machinery to tests.
type Grouper = grouper

// ErrAlone is errAlone.
var ErrAlone = errAlone

// NewGrouper is newGrouper with each unit's own statements.
func NewGrouper(db DBTX, max, slots int) *Grouper {
	return newGrouper(db, &writeBound{}, max, slots, func(b *pgx.Batch, units []*unit) {
		for _, u := range units {
			u.queue(b)
		}
	})
}

// Do is grouper.do.
func (g *Grouper) Do(ctx context.Context, order string, queue func(*pgx.Batch)) error {
	return g.do(ctx, order, queue, nil)
}

// ClaimsReadOnly reports whether the claims grouper is in its read-only
// mode (further groups go out as soon as anything waits).
func (e *Executor) ClaimsReadOnly() bool { return e.claims.readOnly.Load() }

// Pending is how many units wait for the next group.
func (g *Grouper) Pending() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pending)
}

// CompleteArgs is one completion for CompleteAll.
type CompleteArgs struct {
	Tenant, Key string
	Attempt     int
	Status      string
	Resp, Fail  *string
	Owner       string // default: the executor's Config.Owner
}

// CompleteAll writes completions, under the executor's owner unless one
// says otherwise, as one
// completions group (the statement a group of len(cs) sends) or each alone
// in turn, and reports which matched their fence.
func (e *Executor) CompleteAll(ctx context.Context, cs []CompleteArgs, grouped, async bool) ([]bool, error) {
	cus := make([]*completeUnit, len(cs))
	units := make([]*unit, len(cs))
	for i, c := range cs {
		owner := c.Owner
		if owner == "" {
			owner = e.cfg.Owner
		}
		cu := &completeUnit{Completion: ledger.Completion{Tenant: c.Tenant, Key: c.Key, Owner: owner, Attempt: int32(c.Attempt), Status: c.Status, Response: c.Resp, Error: c.Fail}}
		cus[i] = cu
		units[i] = &unit{data: cu, queue: func(b *pgx.Batch) { e.queueComplete(b, async, cu) }}
	}
	if grouped {
		b := &pgx.Batch{}
		e.buildCompletes(async)(b, units)
		if err := e.cfg.DB.SendBatch(ctx, b).Close(); err != nil {
			return nil, err
		}
	} else {
		for _, u := range units {
			b := &pgx.Batch{}
			u.queue(b)
			if err := e.cfg.DB.SendBatch(ctx, b).Close(); err != nil {
				return nil, err
			}
		}
	}
	matched := make([]bool, len(cs))
	for i, cu := range cus {
		matched[i] = cu.Matched
	}
	return matched, nil
}

// Refused is refused, for the backstop's test.
var Refused = refused
