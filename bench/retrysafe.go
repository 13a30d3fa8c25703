package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/tools"
)

var secret = []byte("retrysafe-bench-secret-0123456789abcdef")

var quiet = slog.New(slog.DiscardHandler)

const benchTenant = "t1"

// rsEnv is retrysafe wired to a pool and a provider.
type rsEnv struct {
	pool  *pgxpool.Pool
	prov  *provider
	store *intent.Store
	ex    *executor.Executor
}

func newRS(ctx context.Context, db *database, conns int) (*rsEnv, error) {
	return newRSWith(ctx, db, conns, nil)
}

// newRSWith is newRS with the executor's Config changed by mod.
func newRSWith(ctx context.Context, db *database, conns int, mod func(*executor.Config)) (*rsEnv, error) {
	p, err := db.pool(ctx, conns)
	if err != nil {
		return nil, err
	}
	prov := newProvider()
	e, err := wireRSWith(p, prov, mod)
	if err != nil {
		prov.Close()
		p.Close()
		return nil, err
	}
	return e, nil
}

func wireRS(p *pgxpool.Pool, prov *provider) (*rsEnv, error) { return wireRSWith(p, prov, nil) }

func wireRSWith(p *pgxpool.Pool, prov *provider, mod func(*executor.Config)) (*rsEnv, error) {
	return wireRSTool(p, prov, prov.tool(), mod)
}

// wireRSTool is wireRSWith with tool as the benchmark action's tool (prov
// may then be nil).
func wireRSTool(p *pgxpool.Pool, prov *provider, tool tools.Tool, mod func(*executor.Config)) (*rsEnv, error) {
	reg, err := tools.NewRegistry(tool)
	if err != nil {
		return nil, err
	}
	d, err := reg.Deriver(secret)
	if err != nil {
		return nil, err
	}
	store, err := intent.New(intent.Config{Deriver: d, Logger: quiet})
	if err != nil {
		return nil, err
	}
	cfg := executor.Config{DB: p, Intents: store, Tools: reg, Owner: "bench", Logger: quiet}
	if tuning != nil {
		tuning(&cfg)
	}
	if mod != nil {
		mod(&cfg)
	}
	ex, err := executor.New(cfg)
	if err != nil {
		return nil, err
	}
	return &rsEnv{pool: p, prov: prov, store: store, ex: ex}, nil
}

func (e *rsEnv) close() {
	if e.prov != nil {
		e.prov.Close()
	}
	e.pool.Close()
}

// benchCall is call i: a new intent_ref per call, fields as a model would
// extract them.
func benchCall(run string, i int64) executor.Call {
	return executor.Call{
		Tenant: benchTenant, Ref: fmt.Sprintf("inv-%s-%d", run, i), Action: toolName,
		Fields:    map[string]any{"customer_id": fmt.Sprintf("cust-%d", i%1000), "amount": "180,00"},
		SourceRef: fmt.Sprintf("wamid.%s.%d", run, i),
	}
}

// execute runs call and checks it settled as wanted.
func (e *rsEnv) execute(ctx context.Context, call executor.Call, wantReplay bool) (toolSpan, error) {
	t := &toolTimer{}
	out, err := e.ex.Execute(withTimer(ctx, t), call, nil)
	if err != nil {
		return toolSpan{}, err
	}
	if out.Status != executor.StatusCompleted || out.Replayed != wantReplay {
		return toolSpan{}, fmt.Errorf("%s: status %s replayed %v (want completed, replayed %v)", call.Ref, out.Status, out.Replayed, wantReplay)
	}
	return t.get(), nil
}

func migrated(ctx context.Context, db *database) error {
	p, err := db.pool(ctx, 1)
	if err != nil {
		return err
	}
	defer p.Close()
	return migrate(ctx, p)
}

// rsFirstWorkload: first executions: freeze + claim (one round trip, one
// commit, shared with the concurrent calls grouped with it), the tool call,
// the fenced completion (likewise).
func (b *bench) rsFirstWorkload(name string, prep func(context.Context, *database) error) workload {
	return b.rsFirstWorkloadWith(name, prep, nil)
}

// rsFirstWorkloadWith is rsFirstWorkload with the executor's Config changed
// by mod (SyncCompletion, GroupCommit).
func (b *bench) rsFirstWorkloadWith(name string, prep func(context.Context, *database) error, mod func(*executor.Config)) workload {
	return b.rsFirstWorkloadOver(name, prep, mod, 1)
}

// rsFirstWorkloadOver is rsFirstWorkloadWith with the calls spread over
// tenants t0..t<tenants-1> (the scale database's), 1 meaning the
// benchmark's one tenant, t1: in a ledger of many tenants a key index that
// leads with the tenant takes each one's new keys at random in its range,
// so spread calls touch as many of its pages as a deployment's do.
func (b *bench) rsFirstWorkloadOver(name string, prep func(context.Context, *database) error, mod func(*executor.Config), tenants int) workload {
	run := newRun()
	if prep == nil {
		prep = migrated
	}
	var e *rsEnv
	return workload{
		system: "retrysafe", name: name, prep: prep,
		start: func(ctx context.Context, db *database, conns int) (opFunc, func(), error) {
			var err error
			if e, err = newRSWith(ctx, db, conns, mod); err != nil {
				return nil, nil, err
			}
			op := func(ctx context.Context, _ int, i int64) (toolSpan, error) {
				call := benchCall(run, i)
				if tenants > 1 {
					call.Tenant = fmt.Sprintf("t%d", i%int64(tenants))
				}
				return e.execute(ctx, call, false)
			}
			return op, e.close, nil
		},
		after: func(ctx context.Context, db *database, r *result) error {
			if extra, _ := e.prov.duplicates(); extra != 0 {
				return fmt.Errorf("%d duplicate tool calls", extra)
			}
			return nil
		},
	}
}

// replayKeys is how many finished intents a replay benchmark cycles through.
func (b *bench) replayKeys() int {
	if b.cfg.quick {
		return 50
	}
	return 500
}

// inParallel runs op(0) .. op(n-1) from 16 callers; a caller stops at its
// first error, and every error is returned.
func inParallel(n int, op func(i int64) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				if err := op(int64(i)); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// rsReplayWorkload: executions of intents that already completed (a
// redelivered message): one round trip, no write, the stored response.
func (b *bench) rsReplayWorkload() workload {
	run := newRun()
	keys := b.replayKeys()
	var e *rsEnv
	return workload{
		system: "retrysafe", name: "replay",
		prep: func(ctx context.Context, db *database) error {
			if err := migrated(ctx, db); err != nil {
				return err
			}
			pe, err := newRS(ctx, db, 16)
			if err != nil {
				return err
			}
			defer pe.close()
			return inParallel(keys, func(i int64) error {
				_, err := pe.execute(ctx, benchCall(run, i), false)
				return err
			})
		},
		start: func(ctx context.Context, db *database, conns int) (opFunc, func(), error) {
			var err error
			if e, err = newRS(ctx, db, conns); err != nil {
				return nil, nil, err
			}
			op := func(ctx context.Context, _ int, i int64) (toolSpan, error) {
				return e.execute(ctx, benchCall(run, i%int64(keys)), true)
			}
			return op, e.close, nil
		},
		after: func(ctx context.Context, db *database, r *result) error {
			if n := e.prov.calls.Load(); n != 0 {
				return fmt.Errorf("replays called the tool %d times", n)
			}
			return nil
		},
	}
}

// tuning applies the command line's executor settings (--group-commit,
// --group-commit-conns) before a workload's own.
var tuning func(*executor.Config)

func syncCompletion(c *executor.Config) { c.SyncCompletion = true }

func noGroupCommit(c *executor.Config) { c.GroupCommit = 1 }
