package executor

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/intent"
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
}

// ClaimAll runs the freeze and claim of calls, either as one claims group
// (the statements a group of len(calls) sends) or each alone in turn, and
// reports what each found. The tool is never called.
func (e *Executor) ClaimAll(ctx context.Context, calls []Call, grouped bool) ([]ClaimSeen, error) {
	cus := make([]*claimUnit, len(calls))
	units := make([]*unit, len(calls))
	for i, c := range calls {
		x, err := e.cfg.Intents.Extract(intent.FreezeParams{Tenant: c.Tenant, Ref: c.Ref, Action: c.Action, Fields: c.Fields, SourceRef: c.SourceRef})
		if err != nil {
			return nil, err
		}
		cus[i] = &claimUnit{x: x, tenant: c.Tenant, ref: c.Ref, action: c.Action}
		units[i] = &unit{data: cus[i]}
	}
	if grouped {
		b := &pgx.Batch{}
		e.buildClaims(b, units)
		if err := e.cfg.DB.SendBatch(ctx, b).Close(); err != nil {
			return nil, err
		}
	} else {
		for _, cu := range cus {
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
		fr, err := cu.pf.Result()
		if err != nil {
			s.Err = err.Error()
		} else {
			s.Key, s.Created, s.Divergent = fr.Intent.Key, fr.Created, fr.Divergent
			if fr.ExtractionErr != nil {
				s.ExtractionErr = fr.ExtractionErr.Error()
			}
		}
		s.Claimed, s.ClaimAttempt = cu.c.claimed, cu.c.attempt
		if cu.c.claimed && cu.c.claimKey != s.Key {
			s.Err += " claim key differs from the read-back"
		}
		if a := cu.c.act; a != nil {
			s.ActStatus, s.ActAttempt, s.ActOwner = a.Status, a.Attempt, a.LeaseOwner
		}
	}
	return out, nil
}

// Grouper exposes the group commit machinery to tests.
type Grouper = grouper

// ErrAlone is errAlone.
var ErrAlone = errAlone

// NewGrouper is newGrouper with each unit's own statements (buildEach).
func NewGrouper(db DBTX, max, slots int) *Grouper { return newGrouper(db, max, slots, buildEach) }

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
