package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/ledger"
)

func get(ctx context.Context, db DBTX, tenant, key string) (*Action, error) {
	if tenant == "" || key == "" {
		return nil, fmt.Errorf("%w: empty tenant or key", ErrNotFound)
	}
	a, err := ledger.ActionGet(ctx, db, tenant, key)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("executor: get: %w", err)
	}
	return actionOf(a), nil
}

func list(ctx context.Context, db DBTX, p ListParams) ([]*Action, error) {
	if p.Tenant == "" {
		return nil, fmt.Errorf("%w: ListParams.Tenant is required", ErrConfig)
	}
	if p.Limit <= 0 {
		p.Limit = 100
	}
	as, err := ledger.ActionList(ctx, db, p.Tenant, p.Status, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("executor: list: %w", err)
	}
	var out []*Action
	for _, a := range as {
		out = append(out, actionOf(a))
	}
	return out, nil
}

func resolve(ctx context.Context, db DBTX, p ResolveParams) (*Action, error) {
	if p.Status != RowCompleted && p.Status != RowFailed {
		return nil, fmt.Errorf("%w: resolve to completed or failed, not %q", ErrNotResolvable, p.Status)
	}
	if strings.TrimSpace(p.Reason) == "" {
		return nil, fmt.Errorf("%w: a resolution needs a reason", ErrNotResolvable)
	}
	r := ledger.Resolution{Tenant: p.Tenant, Key: p.Key, Status: p.Status, Reason: p.Reason, By: p.By, Force: p.Force}
	if p.Status == RowCompleted {
		if len(p.Response) == 0 {
			p.Response = json.RawMessage(`null`)
		}
		if !json.Valid(p.Response) {
			return nil, fmt.Errorf("%w: response is not JSON", ErrNotResolvable)
		}
		resp := string(p.Response)
		r.Response = &resp
	}
	// An operator's decision commits synchronously, whatever the server
	// says (in the same round trip).
	a, err := ledger.ActionResolve(ctx, db, r)
	if errors.Is(err, ledger.ErrNotFound) {
		cur, gerr := get(ctx, db, p.Tenant, p.Key)
		if gerr != nil {
			return nil, gerr
		}
		return nil, fmt.Errorf("%w (status %s)", ErrNotResolvable, cur.Status)
	}
	if err != nil {
		return nil, fmt.Errorf("executor: resolve: %w", err)
	}
	return actionOf(a), nil
}

// ToolLister is implemented by tool sources that can list their tools
// (*tools.Registry and the wrappers around it). The reconciler of an
// executor whose source is a ToolLister takes over only those actions.
type ToolLister interface {
	Names() []string
}

// toolNames is nil (no filter) when src cannot list its tools.
func toolNames(src ToolSource) []string {
	if l, ok := src.(ToolLister); ok {
		if names := l.Names(); names != nil {
			return names
		}
	}
	return nil
}

// taken is one expired lease the reconciler took over.
type taken struct {
	tenant, key string
	owner       string // the pass's lease owner
	attempt     int
	prev        *ToolFailure
	age         time.Duration  // since the action was first claimed (database clock)
	in          *intent.Intent // nil: no intent under the key
}

func (e *Executor) reconcileOnce(ctx context.Context) (ReconcileResult, error) {
	var res ReconcileResult
	var leases *[]ledger.TakenLease
	owner := e.newOwner()
	err := e.planned(ctx, func(b *pgx.Batch) {
		leases = ledger.QueueReconcileTake(b, e.cfg.ReconcileBatch, owner, e.cfg.Lease, toolNames(e.cfg.Tools))
	})
	if err != nil {
		return res, fmt.Errorf("executor: reconcile: %w", err)
	}
	var batch []taken
	for _, l := range *leases {
		batch = append(batch, taken{tenant: l.Tenant, key: l.Key, owner: owner, attempt: l.Attempt, prev: decodeFailure(l.Error), age: l.Age})
	}
	res.TakenOver = len(batch)
	if len(batch) > 0 {
		// The intents of the whole batch in one statement. A failure here
		// leaves the leases taken: the next pass takes them again when
		// they expire, as after a crash.
		if err := e.intentsOf(ctx, batch); err != nil {
			return res, fmt.Errorf("executor: reconcile: intents: %w", err)
		}
	}
	// Each item in its own goroutine: every lease in the batch started now,
	// and settling them one after another could outlive the last ones.
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, t := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := e.settle(ctx, t)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, ErrLeaseLost):
				res.LeaseLost++
			case err != nil:
				res.Errors++
				e.cfg.Logger.Error("executor: reconcile", "tenant", t.tenant, "error", err)
			case out.Status == StatusCompleted:
				res.Completed++
			case out.Status == StatusFailed:
				res.Failed++
			case out.Status == StatusReview:
				res.Review++
			default:
				res.Retrying++
			}
		}()
	}
	wg.Wait()
	return res, nil
}

// intentsOf reads the intent of each taken action, in one statement
// (ledger.QueueIntentsByKey).
func (e *Executor) intentsOf(ctx context.Context, batch []taken) error {
	ts, ks := make([]string, len(batch)), make([]string, len(batch))
	for i, t := range batch {
		ts[i], ks[i] = t.tenant, t.key
	}
	var ins []*ledger.Intent
	if err := e.planned(ctx, func(b *pgx.Batch) { ins = ledger.QueueIntentsByKey(b, ts, ks) }); err != nil {
		return err
	}
	for i, in := range ins {
		if in != nil {
			batch[i].in = intentOf(in)
		}
	}
	return nil
}

// settle drives one taken-over action: Lookup first where the tool can,
// else the same-key call; never a wait (a transient failure releases the
// lease with backoff for the next pass).
func (e *Executor) settle(ctx context.Context, t taken) (*Outcome, error) {
	in := t.in
	if in == nil {
		return nil, fmt.Errorf("executor: reconcile: intent of action: %w", intent.ErrNotFound)
	}
	out := &Outcome{Tenant: in.Tenant, Ref: in.Ref, Action: in.Action, Key: in.Key}
	tool, ok := e.cfg.Tools.Tool(in.Action)
	if !ok {
		// Another deployment may know the tool: hand the lease back.
		h := held{tenant: t.tenant, key: t.key, action: in.Action, owner: t.owner, attempt: t.attempt}
		f := t.prev
		if f == nil {
			f = &ToolFailure{Class: "uncertain", Code: "unknown_tool", Attempt: t.attempt - 1}
		}
		if err := e.release(ctx, h, e.cfg.BackoffMax, f); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %q", ErrUnknownTool, in.Action)
	}
	return e.work(ctx, tool, in, t.owner, t.attempt, t.age, prevUncertain(t.prev, t.attempt), &Opts{NoWait: true}, out)
}

func (e *Executor) runReconciler(ctx context.Context) error {
	for {
		res, err := e.reconcileOnce(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			e.cfg.Logger.Error("executor: reconcile pass failed", "error", err)
		}
		if res.TakenOver > 0 {
			e.cfg.Logger.Info("executor: reconcile pass", "taken_over", res.TakenOver, "completed", res.Completed,
				"failed", res.Failed, "review", res.Review, "retrying", res.Retrying, "lease_lost", res.LeaseLost, "errors", res.Errors)
		}
		if err == nil && res.TakenOver == e.cfg.ReconcileBatch {
			continue
		}
		if err := e.cfg.Clock.Sleep(ctx, e.cfg.ReconcileInterval); err != nil {
			return err
		}
	}
}
