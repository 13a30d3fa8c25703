package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/ledger"
	"github.com/retrysafe/retrysafe/tools"
)

// writeTimeout bounds the bookkeeping writes that follow a provider call.
// They run detached from the caller's context: once the provider answered,
// a caller that gave up must not keep the answer from being recorded.
const writeTimeout = 10 * time.Second

func writeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func defaultOwner() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "worker"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b))
}

func (c Config) validate() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	if c.DB == nil {
		return bad("DB is required")
	}
	if _, isTx := c.DB.(pgx.Tx); isTx {
		return bad("DB must be a pool, not a transaction: the claim must commit before the provider is called")
	}
	if c.Intents == nil {
		return bad("Intents is required")
	}
	if c.Tools == nil {
		return bad("Tools is required")
	}
	if c.Owner == "" {
		c.Owner = defaultOwner()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Lease, 30*time.Second)
	def(&c.Timeout, 10*time.Second)
	def(&c.LeaseMargin, 2*time.Second)
	def(&c.BackoffBase, 200*time.Millisecond)
	def(&c.BackoffMax, time.Minute)
	def(&c.RetryHorizon, 6*time.Hour)
	def(&c.ReconcileInterval, 5*time.Second)
	if c.ReconcileBatch == 0 {
		c.ReconcileBatch = 50
	}
	if c.GroupCommit == 0 {
		c.GroupCommit = 32
	}
	if c.GroupCommitConns == 0 {
		c.GroupCommitConns = 2
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	c.defaultHooks()
	switch {
	case c.Lease < 0 || c.Timeout < 0 || c.LeaseMargin < 0 || c.Heartbeat < 0 || c.BackoffBase < 0 || c.BackoffMax < 0 || c.ReconcileInterval < 0 || c.RetryHorizon < 0:
		return bad("durations must not be negative")
	case c.MaxAttempts < 0:
		return bad("MaxAttempts must not be negative (0: no limit but RetryHorizon)")
	case c.ReconcileBatch < 1:
		return bad("ReconcileBatch must be at least 1")
	case c.GroupCommit < 1:
		return bad("GroupCommit must be at least 1 (1 turns grouping off)")
	case c.GroupCommitConns < 1:
		return bad("GroupCommitConns must be at least 1")
	case c.BackoffBase > c.BackoffMax:
		return bad("BackoffBase %s exceeds BackoffMax %s", c.BackoffBase, c.BackoffMax)
	case c.Lease.Microseconds() < 1:
		return bad("Lease must be at least 1µs")
	case c.Heartbeat == 0 && c.Lease <= c.Timeout+c.LeaseMargin:
		// Otherwise a taker could call the provider while this worker's
		// call is still running.
		return bad("Lease %s must exceed Timeout %s + LeaseMargin %s", c.Lease, c.Timeout, c.LeaseMargin)
	case c.Heartbeat > 0 && c.Lease <= 2*c.Heartbeat+c.LeaseMargin:
		// One missed beat must not lose the lease.
		return bad("with Heartbeat %s, Lease %s must exceed 2*Heartbeat + LeaseMargin %s", c.Heartbeat, c.Lease, c.LeaseMargin)
	}
	return c, nil
}

// backoff is the delay after a transient failure at attempt n: exponential,
// capped, with the upper half random so that callers that failed together do
// not come back together.
func (e *Executor) backoff(n int) time.Duration {
	d := e.cfg.BackoffBase
	for i := 1; i < n && d < e.cfg.BackoffMax; i++ {
		d *= 2
	}
	if d > e.cfg.BackoffMax {
		d = e.cfg.BackoffMax
	}
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + time.Duration(mrand.Int64N(int64(half)+1))
}

// actionOf is the ledger's row as an Action, its failure decoded; nil for
// nil.
func actionOf(a *ledger.Action) *Action {
	if a == nil {
		return nil
	}
	return &Action{
		Tenant: a.Tenant, Key: a.Key, Ref: a.Ref, Action: a.Action, Status: a.Status, Attempt: a.Attempt,
		LeaseOwner: a.LeaseOwner, LeaseUntil: a.LeaseUntil, Expired: a.Expired, LeaseLeft: a.LeaseLeft,
		Response: a.Response, Failure: decodeFailure(a.Error),
		CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt, FinishedAt: a.FinishedAt,
	}
}

// intentOf is the ledger's row as an Intent: the two types have the same
// fields, so the conversion copies nothing.
func intentOf(in *ledger.Intent) *intent.Intent { return (*intent.Intent)(in) }

func decodeFailure(raw []byte) *ToolFailure {
	if len(raw) == 0 {
		return nil
	}
	var f ToolFailure
	if json.Unmarshal(raw, &f) != nil {
		return nil
	}
	return &f
}

// prevUncertain reports whether the attempt before a takeover may have
// acted. Only a failure recorded by that very attempt as transient (the
// request never left) proves it did not; a worker that died mid-call left
// no record.
func prevUncertain(prev *ToolFailure, newAttempt int) bool {
	return !(prev != nil && prev.Attempt == newAttempt-1 && prev.Class == tools.ClassTransient)
}

func statusOf(row string) Status {
	switch row {
	case RowCompleted:
		return StatusCompleted
	case RowFailed:
		return StatusFailed
	case RowReview:
		return StatusReview
	}
	return StatusInFlight
}

// fromRow fills out from a stored row that this call did not settle.
func fromRow(out *Outcome, a *Action) *Outcome {
	out.Status = statusOf(a.Status)
	out.Key = a.Key
	out.Attempt = a.Attempt
	out.Replayed = a.Status != RowStarted
	out.Response = a.Response
	out.Failure = a.Failure
	out.RetryAfter = 0
	if a.Status == RowStarted {
		out.RetryAfter = a.LeaseLeft
		if out.RetryAfter <= 0 {
			out.RetryAfter = time.Millisecond
		}
	}
	return out
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
	for i := range maxRaces {
		cu := &claimUnit{x: x, id: ledger.ID{Tenant: call.Tenant, Ref: call.Ref, Action: call.Action}}
		switch {
		case i > 0: // racing an amendment: the full freeze and claim
		case e.claims.readOnly.Load():
			// Redeliveries are what has been arriving: read first, and
			// skip the writes when the intent is settled or in flight.
			queue := func(b *pgx.Batch) { e.queueLookups(b, []*claimUnit{cu}) }
			if err := e.grouped(ctx, e.lookups, order, queue, cu); err != nil {
				return nil, refused(fmt.Errorf("executor: lookup: %w", err))
			}
		case x.Err == nil:
			// First executions are what has been arriving: freeze and
			// claim what is new in one statement, reading nothing back.
			queue := func(b *pgx.Batch) { e.queueFresh(b, []*claimUnit{cu}) }
			if err := e.grouped(ctx, e.fresh, order, queue, cu); err != nil {
				return nil, refused(fmt.Errorf("executor: freeze and claim: %w", err))
			}
		}
		fz, c, created := cu.settle()
		if c == nil {
			// One round trip, one implicit transaction (shared with the
			// calls grouped with this one): freeze, read back, claim,
			// read the action. Four statements, four snapshots.
			if err := e.grouped(ctx, e.claims, order, func(b *pgx.Batch) { e.queueOne(b, cu) }, cu); err != nil {
				return nil, refused(fmt.Errorf("executor: freeze and claim: %w", err))
			}
			fz, c, _ = cu.settle()
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
		res, err, again := e.drive(ctx, tool, c.fr.Intent, c, out, opts)
		if !again {
			return res, err
		}
	}
	return nil, fmt.Errorf("executor: intent %q kept changing under concurrent amendments", call.Ref)
}

func (e *Executor) executeKey(ctx context.Context, tenant, key string, opts *Opts) (*Outcome, error) {
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
		if err := e.planned(ctx, func(b *pgx.Batch) { lc = ledger.QueueClaim(b, id, e.cfg.Owner, e.cfg.Lease) }); err != nil {
			return nil, refused(fmt.Errorf("executor: claim: %w", err))
		}
		c := &claim{claimed: lc.Claimed, claimKey: lc.Key, attempt: lc.Attempt, act: actionOf(lc.Action)}
		out := &Outcome{Tenant: tenant, Ref: in.Ref, Action: in.Action, Key: in.Key}
		res, err, again := e.drive(ctx, tool, in, c, out, opts)
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
func (e *Executor) drive(ctx context.Context, tool tools.Tool, in *intent.Intent, c *claim, out *Outcome, opts *Opts) (*Outcome, error, bool) {
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
		res, err := e.work(ctx, tool, in, c.attempt, 0, false, opts, out)
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
	attempt, prev, age, won, err := e.takeover(ctx, a.Tenant, a.Key, a.Attempt)
	if err != nil {
		return nil, err, false
	}
	if !won {
		res, err := e.current(ctx, out)
		return res, err, false
	}
	out.tookOver = true
	res, err := e.work(ctx, tool, in, attempt, age, prevUncertain(prev, attempt), opts, out)
	return res, err, false
}

func (e *Executor) takeover(ctx context.Context, tenant, key string, seen int) (attempt int, prev *ToolFailure, age time.Duration, won bool, err error) {
	var t *ledger.Taken
	err = e.planned(ctx, func(b *pgx.Batch) {
		t = ledger.QueueTakeover(b, tenant, key, seen, e.cfg.Owner, e.cfg.Lease)
	})
	if err != nil {
		return 0, nil, 0, false, fmt.Errorf("executor: takeover: %w", err)
	}
	if !t.Won {
		return 0, nil, 0, false, nil
	}
	return t.Attempt, decodeFailure(t.Error), t.Age, true, nil
}

// current re-reads the action and reports it as stored.
func (e *Executor) current(ctx context.Context, out *Outcome) (*Outcome, error) {
	rctx, cancel := writeCtx(ctx)
	defer cancel()
	a, err := Get(rctx, e.cfg.DB, out.Tenant, out.Key)
	if err != nil {
		return nil, err
	}
	return fromRow(out, a), nil
}

// work holds the lease at attempt and drives it to an end: completed,
// failed, review, or (transient, NoWait) released for a later attempt.
// age is how long ago the action was first claimed (database clock);
// prevMayHaveActed says an earlier attempt may have reached the provider.
func (e *Executor) work(ctx context.Context, tool tools.Tool, in *intent.Intent, attempt int, age time.Duration, prevMayHaveActed bool, opts *Opts, out *Outcome) (*Outcome, error) {
	looker, canLookup := tools.CanLookup(tool)
	h := held{tenant: in.Tenant, key: in.Key, action: in.Action,
		relearnable: !e.cfg.SyncCompletion && (tool.Idempotent() || canLookup)}
	for {
		h.attempt = attempt
		out.Attempt = attempt
		var fail *tools.Error
		called := false
		if prevMayHaveActed && canLookup {
			resp, err := e.lookup(ctx, looker, h)
			switch {
			case err == nil:
				return e.finish(ctx, h, RowCompleted, resp, nil, out)
			case errors.Is(err, tools.ErrNotFound):
				prevMayHaveActed = false
			default:
				// The provider could not be asked: this attempt fails
				// without calling, and the doubt remains.
				fail = tools.Classify(err)
				if fail.Class == tools.ClassDefinitive {
					fail = &tools.Error{Class: tools.ClassUncertain, Code: "lookup_" + fail.Code, Message: "lookup refused"}
				}
			}
		}
		if fail == nil && prevMayHaveActed && !tool.Idempotent() {
			return e.finish(ctx, h, RowReview, nil, &ToolFailure{
				Class: tools.ClassUncertain, Code: "uncertain_without_key", Attempt: attempt,
				Message: "an earlier attempt may have acted; the tool takes no idempotency key and cannot be asked, so it is not called twice",
			}, out)
		}
		if fail == nil && e.pastBudget(attempt, age) {
			// Taken over beyond the budget: no new call. A Lookup above
			// has already settled the doubt where the tool can be asked.
			return e.giveUp(ctx, h, prevMayHaveActed, &ToolFailure{
				Class: tools.ClassUncertain, Code: "attempts_exhausted", Attempt: attempt,
				Message: e.budgetText(attempt, age),
			}, out)
		}
		if fail == nil {
			called = true
			resp, err := e.call(ctx, tool, in, h)
			if err == nil {
				if len(resp) == 0 || !json.Valid(resp) {
					resp = json.RawMessage(`null`)
				}
				return e.finish(ctx, h, RowCompleted, resp, nil, out)
			}
			fail = tools.Classify(err)
		}
		tf := &ToolFailure{Class: fail.Class, Code: fail.Code, Status: fail.Status, Message: fail.Message, Attempt: attempt}
		if fail.Class == tools.ClassDefinitive {
			return e.finish(ctx, h, RowFailed, nil, tf, out)
		}
		mayHaveActed := prevMayHaveActed || (called && fail.Class == tools.ClassUncertain)
		if mayHaveActed && !tool.Idempotent() && !canLookup {
			return e.finish(ctx, h, RowReview, nil, tf, out)
		}
		delay := e.backoff(attempt)
		if e.lastTry(attempt, age, delay) {
			if mayHaveActed && canLookup {
				resp, err := e.lookup(ctx, looker, h)
				switch {
				case err == nil:
					return e.finish(ctx, h, RowCompleted, resp, nil, out)
				case errors.Is(err, tools.ErrNotFound):
					mayHaveActed = false // the provider has nothing under the key
				}
			}
			return e.giveUp(ctx, h, mayHaveActed, tf, out)
		}
		if err := e.release(ctx, h, delay, tf); err != nil {
			if errors.Is(err, ErrLeaseLost) {
				res, cerr := e.current(ctx, out)
				if cerr != nil {
					return nil, cerr
				}
				return res, err
			}
			return nil, err
		}
		e.cfg.Logger.Info("executor: transient failure, retrying with the same key",
			"tenant", h.tenant, "action", h.action, "attempt", attempt, "class", string(fail.Class), "code", fail.Code)
		out.Status, out.Failure, out.RetryAfter, out.Replayed = StatusInFlight, tf, delay, false
		if opts != nil && opts.NoWait {
			return out, nil
		}
		if err := e.cfg.Clock.Sleep(ctx, delay); err != nil {
			return out, err
		}
		next, nextAge, won, err := e.retake(ctx, h)
		if err != nil {
			return nil, err
		}
		if !won {
			return e.current(ctx, out)
		}
		attempt, age = next, nextAge
		out.RetryAfter = 0
		prevMayHaveActed = mayHaveActed
	}
}

// held is a lease this worker holds.
type held struct {
	tenant, key, action string
	attempt             int
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
			f = ledger.QueueHeartbeat(b, h.tenant, h.key, e.cfg.Owner, h.attempt, e.cfg.Lease)
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
	wctx, cancel := writeCtx(ctx)
	defer cancel()
	fj, _ := json.Marshal(f)
	var fenced *ledger.Fenced
	err := e.planned(wctx, func(b *pgx.Batch) {
		fenced = ledger.QueueRelease(b, h.tenant, h.key, e.cfg.Owner, h.attempt, delay, string(fj))
	})
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
		t = ledger.QueueRetake(b, h.tenant, h.key, h.attempt, e.cfg.Owner, e.cfg.Lease)
	})
	if err != nil {
		return 0, 0, false, fmt.Errorf("executor: retake: %w", err)
	}
	return t.Attempt, t.Age, t.Won, nil
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
	wctx, cancel := writeCtx(ctx)
	defer cancel()
	cu := &completeUnit{Completion: ledger.Completion{Tenant: h.tenant, Key: h.key, Attempt: int32(h.attempt), Status: status}}
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
	if err := e.grouped(wctx, g, h.tenant+"\x00"+h.key, queue, cu); err != nil {
		return nil, fmt.Errorf("executor: complete: %w", err)
	}
	if !cu.fenced.Matched {
		e.cfg.Logger.Warn("executor: lease lost, result dropped",
			"tenant", h.tenant, "action", h.action, "attempt", h.attempt, "status", status)
		res, cerr := e.current(ctx, out)
		if cerr != nil {
			return nil, cerr
		}
		return res, fmt.Errorf("%w (attempt %d)", ErrLeaseLost, h.attempt)
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
// not (see ledger.QueueComplete).
func (e *Executor) queueComplete(b *pgx.Batch, async bool, cu *completeUnit) {
	cu.fenced = ledger.QueueComplete(b, &cu.Completion, e.cfg.Owner, async)
}

func (e *Executor) logOutcome(o *Outcome, replay bool) {
	if replay {
		e.cfg.Logger.Debug("executor: stored outcome", "tenant", o.Tenant, "action", o.Action, "status", string(o.Status), "attempt", o.Attempt)
		return
	}
	e.cfg.Logger.Info("executor: action settled", "tenant", o.Tenant, "action", o.Action, "status", string(o.Status), "attempt", o.Attempt)
}

// refused marks a database refusal of the call's own data (SQLSTATE class
// 22: a NUL, invalid UTF-8, a value out of range; class 54: a value too
// large for an index entry) as ErrRefused: nothing
// of the call committed, and the same call would be refused again.
// intent.Storable keeps such values from reaching the database; this is
// the backstop, so that no caller is told to retry what cannot succeed.
func refused(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "54")) {
		// The code only: the server's message may quote the value.
		return fmt.Errorf("%w (SQLSTATE %s)", ErrRefused, pgErr.Code)
	}
	return err
}

func isRetryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrInFlight), errors.Is(err, ErrLeaseLost):
		return true
	case errors.Is(err, ErrNeedsReview), errors.Is(err, ErrFailed):
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", "40P01", "55P03", "57P01", "57P02", "57P03", "53300":
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08")
	}
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}
