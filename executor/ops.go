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
)

func get(ctx context.Context, db DBTX, tenant, key string) (*Action, error) {
	if tenant == "" || key == "" {
		return nil, fmt.Errorf("%w: empty tenant or key", ErrNotFound)
	}
	a, err := scanAction(db.QueryRow(ctx, ActionGet, tenant, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("executor: get: %w", err)
	}
	return a, nil
}

func list(ctx context.Context, db DBTX, p ListParams) ([]*Action, error) {
	if p.Tenant == "" {
		return nil, fmt.Errorf("%w: ListParams.Tenant is required", ErrConfig)
	}
	if p.Limit <= 0 {
		p.Limit = 100
	}
	rows, err := db.Query(ctx, ActionList, p.Tenant, p.Status, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("executor: list: %w", err)
	}
	defer rows.Close()
	var out []*Action
	for rows.Next() {
		a, err := scanAction(rows)
		if err != nil {
			return nil, fmt.Errorf("executor: list: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("executor: list: %w", err)
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
	var resp any
	if p.Status == RowCompleted {
		if len(p.Response) == 0 {
			p.Response = json.RawMessage(`null`)
		}
		if !json.Valid(p.Response) {
			return nil, fmt.Errorf("%w: response is not JSON", ErrNotResolvable)
		}
		resp = string(p.Response)
	}
	// An operator's decision commits synchronously, whatever the server
	// says (intent.IntentDurable, in the same round trip).
	var a *Action
	b := &pgx.Batch{}
	b.Queue(intent.IntentDurable)
	b.Queue(ActionResolve, p.Tenant, p.Key, p.Status, resp, p.Reason, p.By, p.Force).QueryRow(func(row pgx.Row) error {
		var err error
		a, err = scanAction(row)
		return err
	})
	err := db.SendBatch(ctx, b).Close()
	if errors.Is(err, pgx.ErrNoRows) {
		cur, gerr := get(ctx, db, p.Tenant, p.Key)
		if gerr != nil {
			return nil, gerr
		}
		return nil, fmt.Errorf("%w (status %s)", ErrNotResolvable, cur.Status)
	}
	if err != nil {
		return nil, fmt.Errorf("executor: resolve: %w", err)
	}
	return a, nil
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
	attempt     int
	prev        *ToolFailure
	age         time.Duration  // since the action was first claimed (database clock)
	in          *intent.Intent // nil: no intent under the key
}

func (e *Executor) reconcileOnce(ctx context.Context) (ReconcileResult, error) {
	var res ReconcileResult
	var batch []taken
	err := e.planned(ctx, func(b *pgx.Batch) {
		b.Queue(ActionReconcileTake, e.cfg.ReconcileBatch, e.cfg.Owner, e.leaseMicros(), toolNames(e.cfg.Tools)).Query(func(rows pgx.Rows) error {
			var (
				t    taken
				raw  []byte
				secs float64
			)
			_, err := pgx.ForEachRow(rows, []any{&t.tenant, &t.key, &t.attempt, &raw, &secs}, func() error {
				t.prev, t.age = decodeFailure(raw), seconds(secs)
				batch = append(batch, t)
				return nil
			})
			return err
		})
	})
	if err != nil {
		return res, fmt.Errorf("executor: reconcile: %w", err)
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

// intentsOf reads the intent of each taken action (IntentGetByKeyMany).
func (e *Executor) intentsOf(ctx context.Context, batch []taken) error {
	ts, ks := make([]string, len(batch)), make([]string, len(batch))
	for i, t := range batch {
		ts[i], ks[i] = t.tenant, t.key
	}
	return e.planned(ctx, func(b *pgx.Batch) {
		b.Queue(IntentGetByKeyMany, ts, ks).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var pos int64
				in, err := intent.Scan(rows, &pos)
				if err != nil {
					return err
				}
				if pos < 1 || pos > int64(len(batch)) {
					return fmt.Errorf("executor: intent position %d out of range", pos)
				}
				batch[pos-1].in = in
			}
			return rows.Err()
		})
	})
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
		h := held{tenant: t.tenant, key: t.key, action: in.Action, attempt: t.attempt}
		f := t.prev
		if f == nil {
			f = &ToolFailure{Class: "uncertain", Code: "unknown_tool", Attempt: t.attempt - 1}
		}
		if err := e.release(ctx, h, e.cfg.BackoffMax, f); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %q", ErrUnknownTool, in.Action)
	}
	return e.work(ctx, tool, in, t.attempt, t.age, prevUncertain(t.prev, t.attempt), &Opts{NoWait: true}, out)
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
