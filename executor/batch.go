package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/ledger"
)

// errAlone tells a unit of a failed group to run on its own: the server
// refused the group (one call's statement failed, a deadlock between two
// groups, ...) and rolled all of it back, or the group never left.
var errAlone = errors.New("executor: group failed, retry alone")

// unit is one call's share of a group: the statements it queues and, once
// the group has run, the group's error.
type unit struct {
	ctx   context.Context // a unit whose caller gave up before its group left is not sent
	order string          // units are queued in this order, so that groups lock rows alike
	queue func(*pgx.Batch)
	data  any // what a grouper's build needs besides queue
	err   error
	done  chan struct{}
}

// grouper is group commit for the executor's own writes. Calls that arrive
// while the database is busy with earlier ones share the next round trip:
// their statements go out as one pgx batch, which PostgreSQL runs as one
// implicit transaction, so N claims cost one commit and one WAL flush
// instead of N. Nothing waits for a group to fill: a call that finds no
// group in flight sends at once with whatever is queued (at one caller that
// is itself alone, as without grouping); calls that arrive while a group is
// in flight queue for the next one. A further group goes out beside the
// first (up to slots) only once half a group is waiting: on two cores one
// connection at a time gave the most first executions per second up to 32
// callers, and a second one helped only beyond. Groups that write nothing
// (a storm of redeliveries) have no commit to share, and for them waiting
// is all cost: while the latest claims were read-only, a further group
// goes out as soon as anything waits. Each statement still runs as before
// (READ COMMITTED, a snapshot per statement), so a call's statements see
// what they would have seen alone.
//
// A group is all-or-nothing: when the server refuses it, every unit runs
// again on its own, so one bad call costs the others a retry, never a
// result.
type grouper struct {
	db    DBTX
	bound *writeBound // the deadline of every group's batch
	max   int         // units per group
	slots int         // groups in flight at once
	// build queues a group's statements, folding the units' into one
	// statement over arrays per step where it can: claimsBuild(queueClaims,
	// queueFresh or queueLookups), buildCompletes.
	build func(*pgx.Batch, []*unit)
	// plans opens every group's batch, and the batch of a unit run alone
	// (see grouped): ledger.QueuePlans, ledger.QueueLookupPlans for the
	// read-first lookups, nil for the fresh claims, whose statement makes
	// the settings itself (ledger.QueueFreshClaims).
	plans func(*pgx.Batch)

	// readOnly: the latest groups wrote nothing (see Executor.noteClaim),
	// so a further group goes out as soon as anything waits.
	readOnly atomic.Bool

	mu      sync.Mutex
	pending []*unit
	running int
}

func newGrouper(db DBTX, bound *writeBound, max, slots int, build func(*pgx.Batch, []*unit)) *grouper {
	return &grouper{db: db, bound: bound, max: max, slots: slots, build: build, plans: ledger.QueuePlans}
}

// do runs queue's statements in the next group and returns the group's
// error: nil when the group committed, errAlone when the caller must run its
// statements alone, any other error when the outcome is unknown (the
// connection failed after the group was sent). A canceled ctx returns at
// once: if the group has not left yet, the unit's statements are dropped
// from it; if it has, they may still commit, as a statement canceled
// mid-flight may.
func (g *grouper) do(ctx context.Context, order string, queue func(*pgx.Batch), data any) error {
	if g.max <= 1 {
		return errAlone
	}
	u := &unit{ctx: ctx, order: order, queue: queue, data: data, done: make(chan struct{})}
	g.mu.Lock()
	g.pending = append(g.pending, u)
	if g.running == 0 || (g.running < g.slots && (g.readOnly.Load() || 2*len(g.pending) >= g.max)) {
		g.running++
		units := g.takeLocked()
		g.mu.Unlock()
		g.run(units)
	} else {
		g.mu.Unlock()
	}
	select {
	case <-u.done:
		return u.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *grouper) takeLocked() []*unit {
	n := min(len(g.pending), g.max)
	units := slices.Clone(g.pending[:n])
	rest := copy(g.pending, g.pending[n:])
	clear(g.pending[rest:])
	g.pending = g.pending[:rest]
	return units
}

// run sends units as one group, then hands the slot to the next group (on
// a new goroutine, so that the caller whose call opened this group returns
// as soon as its own result is in).
func (g *grouper) run(units []*unit) {
	g.send(units)
	g.mu.Lock()
	if len(g.pending) == 0 {
		g.running--
		g.mu.Unlock()
		return
	}
	next := g.takeLocked()
	g.mu.Unlock()
	go g.run(next)
}

func (g *grouper) send(units []*unit) {
	live := units[:0]
	for _, u := range units {
		if err := u.ctx.Err(); err != nil {
			u.err = err
			close(u.done)
			continue
		}
		live = append(live, u)
	}
	units = live
	if len(units) == 0 {
		return
	}
	slices.SortFunc(units, func(a, b *unit) int { return strings.Compare(a.order, b.order) })
	b := &pgx.Batch{}
	if g.plans != nil {
		g.plans(b)
	}
	g.build(b, units)
	// The group outlives any one caller: a caller that gives up must not
	// cancel the others' writes.
	err := g.db.SendBatch(g.bound.get(), b).Close()
	var pgErr *pgconn.PgError
	if err != nil && len(units) > 1 && (errors.As(err, &pgErr) || pgconn.SafeToRetry(err)) {
		err = errAlone
	}
	for _, u := range units {
		u.err = err
		close(u.done)
	}
}

// grouped runs queue's statements in g's next group, or alone when grouping
// is off or the group failed (queue is then called again, and must start
// its results afresh), in a batch opened as g opens its groups'.
func (e *Executor) grouped(ctx context.Context, g *grouper, order string, queue func(*pgx.Batch), data any) error {
	err := g.do(ctx, order, queue, data)
	if !errors.Is(err, errAlone) {
		return err
	}
	return e.send(ctx, g.plans, queue)
}

// planned runs what queue queues in a batch opened by the plan settings
// (ledger.QueuePlans), so that its cached plans are index lookups and it
// commits synchronously: the one-offs of the failure paths and the
// reconciler.
func (e *Executor) planned(ctx context.Context, queue func(*pgx.Batch)) error {
	return e.send(ctx, ledger.QueuePlans, queue)
}

// send runs what queue queues in one batch, opened by plans unless nil.
func (e *Executor) send(ctx context.Context, plans, queue func(*pgx.Batch)) error {
	b := &pgx.Batch{}
	if plans != nil {
		plans(b)
	}
	queue(b)
	return e.cfg.DB.SendBatch(ctx, b).Close()
}

// intentByKey is intent.GetByKey under the plan settings (see planned).
func (e *Executor) intentByKey(ctx context.Context, tenant, key string) (*intent.Intent, error) {
	if tenant == "" || key == "" {
		return nil, fmt.Errorf("%w: empty tenant or key", intent.ErrInvalid)
	}
	var in **ledger.Intent
	err := e.planned(ctx, func(b *pgx.Batch) { in = ledger.QueueIntentByKey(b, tenant, key) })
	if err != nil {
		return nil, fmt.Errorf("intent: get by key: %w", err)
	}
	if *in == nil {
		return nil, intent.ErrNotFound
	}
	return intentOf(*in), nil
}

// claimUnit is one Execute's share of a claims, fresh or lookups group.
// Each step's queue function sets where that step's results land (afresh
// when a failed group is queued again); settle reads them once the group
// has run.
type claimUnit struct {
	x     *intent.Extraction
	id    ledger.ID
	owner string             // the lease owner its claim writes (Executor.newOwner)
	row   ledger.NewIntent   // x as the ledger inserts it (see newIntent)
	fresh *ledger.FreshClaim // queueFresh
	found *ledger.Found      // queueLookups
	fz    *ledger.Freeze     // queueOne, queueClaims: the freeze and claim
	lc    *ledger.Claim
}

// settle returns what the unit's steps found: the freeze and the claim,
// or a nil claim when its first step (the fresh claim, the read-first
// lookup) left it to the freeze and claim. created says the fresh claim
// inserted the intent without claiming its action (a row already held its
// key: an amendment's tombstone); the freeze and claim that follow report
// the intent created.
func (cu *claimUnit) settle() (fz ledger.Freeze, c *claim, created bool) {
	switch {
	case cu.lc != nil:
		lc := cu.lc
		return *cu.fz, &claim{claimed: lc.Claimed, claimKey: lc.Key, attempt: lc.Attempt, act: actionOf(lc.Action)}, false
	case cu.fresh != nil:
		if f := cu.fresh; f.Inserted && f.Attempt > 0 {
			return ledger.Freeze{Inserted: true, Intent: f.Intent}, &claim{claimed: true, claimKey: f.Intent.Key, attempt: f.Attempt}, false
		}
		return fz, nil, cu.fresh.Inserted
	case cu.found != nil && cu.found.Intent != nil:
		a := actionOf(cu.found.Action)
		if a.Failure != nil && a.Failure.Class == intent.SupersededClass {
			return fz, nil, false // an amendment's tombstone: the write path sorts it out
		}
		return ledger.Freeze{Intent: cu.found.Intent}, &claim{act: a}, false
	}
	return fz, nil, false
}

// newClaimUnit is the unit of x's freeze and claim, for owner.
func newClaimUnit(x *intent.Extraction, owner string) *claimUnit {
	cu := &claimUnit{x: x, id: ledger.ID{Tenant: x.Tenant, Ref: x.Ref, Action: x.Action}, owner: owner}
	if x.Err == nil {
		r := x.Result
		cu.row = ledger.NewIntent{ID: cu.id, Version: r.Version, Payload: r.Payload, Key: r.Key, SourceRef: x.SourceRef}
	}
	return cu
}

// newIntent is the unit's intent as the ledger inserts it; nil when its
// extraction has a field error (nothing of it can be frozen, but the
// frozen intent can be found).
func (cu *claimUnit) newIntent() *ledger.NewIntent {
	if cu.x.Err != nil {
		return nil
	}
	return &cu.row
}

// queueOne queues the unit's freeze and claim as four statements of its own.
func (e *Executor) queueOne(b *pgx.Batch, cu *claimUnit) {
	cu.fz = ledger.QueueFreeze(b, cu.id, cu.newIntent())
	cu.lc = ledger.QueueClaim(b, cu.id, cu.owner, e.cfg.Lease)
}

// queueClaims queues a claims group: a group of one as Execute alone would,
// a larger one as four statements for all of it (freeze, read back, claim,
// read the actions), so that the database starts four statements per group
// rather than four per call. Each statement still reads what committed
// before it started, as the per-call statements do.
func (e *Executor) queueClaims(b *pgx.Batch, cus []*claimUnit) {
	if len(cus) == 1 {
		e.queueOne(b, cus[0])
		return
	}
	ids, rows, owners := make([]ledger.ID, len(cus)), make([]*ledger.NewIntent, len(cus)), make([]string, len(cus))
	for i, cu := range cus {
		ids[i], rows[i], owners[i] = cu.id, cu.newIntent(), cu.owner
	}
	fzs := ledger.QueueFreezeMany(b, ids, rows)
	lcs := ledger.QueueClaimMany(b, ids, owners, e.cfg.Lease)
	for i, cu := range cus {
		cu.fz, cu.lc = &fzs[i], &lcs[i]
	}
}

// claimsBuild is a grouper's build for queue, a step of the freeze and
// claim that queues its statements for a whole group (queueClaims,
// queueFresh, queueLookups).
func claimsBuild(queue func(*pgx.Batch, []*claimUnit)) func(*pgx.Batch, []*unit) {
	return func(b *pgx.Batch, units []*unit) {
		cus := make([]*claimUnit, len(units))
		for i, u := range units {
			cus[i] = u.data.(*claimUnit)
		}
		queue(b, cus)
	}
}

// queueFresh queues the fresh claim of cus, which must all have
// extractions without field errors: one statement that inserts their
// intents and claims the actions of the intents it inserted
// (ledger.QueueFreshClaims). A unit whose intent it inserted and whose
// action it claimed is settled: frozen and claimed by this call, as the
// freeze and claim would have found it. Any other unit is left for them:
// its intent was already frozen (a redelivery, a concurrent duplicate), or
// a row under its key kept the action from being claimed. Of units for
// the same intent, the first is settled and the others go on, as in a
// claims group.
func (e *Executor) queueFresh(b *pgx.Batch, cus []*claimUnit) {
	rows, owners := make([]*ledger.NewIntent, len(cus)), make([]string, len(cus))
	for i, cu := range cus {
		rows[i], owners[i] = cu.newIntent(), cu.owner
	}
	fs := ledger.QueueFreshClaims(b, rows, owners, e.cfg.Lease)
	for i, cu := range cus {
		cu.fresh = &fs[i]
	}
}

// queueLookups queues the read-first lookup of cus: one statement for all
// of them (ledger.QueueLookups). A unit whose intent and action it finds
// gets the claim and freeze outcome the four write statements would have
// given it (nothing inserted, nothing claimed, both rows as read); any
// other unit is left without, for the freeze and claim to handle. Reading
// both rows in one statement is what the write path does in four snapshots
// instead of one, so whatever the lookup returns, the write path run at
// that instant would have returned too.
func (e *Executor) queueLookups(b *pgx.Batch, cus []*claimUnit) {
	ids := make([]ledger.ID, len(cus))
	for i, cu := range cus {
		ids[i] = cu.id
	}
	fs := ledger.QueueLookups(b, ids)
	for i, cu := range cus {
		cu.found = &fs[i]
	}
}

// completeUnit is one call's share of a completions group (its Matched
// says, once the group ran, whether the fence matched).
type completeUnit struct {
	ledger.Completion
}

// buildCompletes returns the completions groups' build: a group of one
// queues the call's own statement, a larger one a single statement for all
// of it (ledger.QueueCompleteMany). Neither completions grouper opens its
// batches (their plans are nil): a lone completion opens its own
// (queueComplete does, grouped or alone), a group of them with
// ledger.QueueCompleteGroupPlans, whose settings leave the join over the
// arrays one plan, a probe of the primary key per element, whatever the
// table's size when the connection cached it.
func (e *Executor) buildCompletes(async bool) func(*pgx.Batch, []*unit) {
	return func(b *pgx.Batch, units []*unit) {
		if len(units) == 1 {
			units[0].queue(b)
			return
		}
		ledger.QueueCompleteGroupPlans(b)
		cus := make([]*completeUnit, len(units))
		cs := make([]*ledger.Completion, len(units))
		for i, u := range units {
			cus[i] = u.data.(*completeUnit)
			cs[i] = &cus[i].Completion
		}
		ledger.QueueCompleteMany(b, cs, async)
	}
}

// readOnlyRunLimit is how many freeze-and-claims in a row must write
// nothing before the claims grouper stops holding calls back for a fuller
// group.
const readOnlyRunLimit = 32

// noteClaim tells the claims grouper whether a freeze-and-claim wrote.
func (e *Executor) noteClaim(wrote bool) {
	if wrote {
		if e.readOnlyRun.Swap(0) >= readOnlyRunLimit {
			e.claims.readOnly.Store(false)
		}
		return
	}
	if e.readOnlyRun.Add(1) == readOnlyRunLimit {
		e.claims.readOnly.Store(true)
	}
}
