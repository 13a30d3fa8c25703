package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/intent"
)

// chargeInput is the DBOS workflow's input: the key (also the workflow id)
// and the normalized payload to send.
type chargeInput struct {
	Key  string `json:"key"`
	Body string `json:"body"`
}

// dbosEnv is DBOS Transact running the same work: a workflow with one step
// that calls the same provider, the workflow id being the intent's key.
type dbosEnv struct {
	pool  *pgxpool.Pool
	ctx   dbos.Context
	prov  *provider
	store *intent.Store // to normalize and key the call exactly as retrysafe does
	wf    dbos.Workflow[chargeInput, string]
	// toolTime[key] is when the step was in the provider (a toolSpan).
	toolTime sync.Map
}

// newDBOS launches DBOS on db with a pool of conns+1 connections: DBOS keeps
// one pooled connection for its LISTEN/NOTIFY listener.
func newDBOS(ctx context.Context, db *database, conns int) (*dbosEnv, error) {
	cfg, err := pgxpool.ParseConfig(db.url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(conns + 1)
	cfg.MinConns = int32(conns + 1)
	cfg.ConnConfig.RuntimeParams["application_name"] = "retrysafe-bench-dbos"
	for k, v := range db.srv.session {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	prov := newProvider()
	rs, err := wireRS(p, prov) // only for its intent store (extraction and key)
	if err != nil {
		prov.Close()
		p.Close()
		return nil, err
	}
	e := &dbosEnv{pool: p, prov: prov, store: rs.store}
	e.ctx, err = dbos.NewContext(ctx, dbos.Config{
		AppName: "retrysafe-bench", SystemDBPool: p, SkipMigrations: true, Logger: quiet,
		ExecutorID: "bench", ApplicationVersion: "bench",
	})
	if err != nil {
		prov.Close()
		p.Close()
		return nil, err
	}
	e.wf = func(wctx dbos.Context, in chargeInput) (string, error) {
		return dbos.RunAsStep(wctx, func(sctx context.Context) (string, error) {
			t0 := time.Now()
			resp, err := prov.charge(sctx, in.Key, []byte(in.Body))
			e.toolTime.Store(in.Key, span(t0))
			return string(resp), err
		}, dbos.WithStepName("charge"))
	}
	dbos.RegisterWorkflow(e.ctx, e.wf, dbos.WithWorkflowName("charge"))
	if err := dbos.Launch(e.ctx); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *dbosEnv) close() {
	_ = dbos.Shutdown(e.ctx, 10*time.Second)
	e.prov.Close()
	e.pool.Close()
}

// run executes (or re-runs) the workflow for run's call i and waits for its
// result; it returns the time spent in the provider.
func (e *dbosEnv) run(ctx context.Context, run string, i int64) (toolSpan, error) {
	call := benchCall(run, i)
	x, err := e.store.Extract(intent.FreezeParams{Tenant: call.Tenant, Ref: call.Ref, Action: call.Action, Fields: call.Fields})
	if err != nil {
		return toolSpan{}, err
	}
	if x.Err != nil {
		return toolSpan{}, x.Err
	}
	body, _ := x.Result.Payload.MarshalJSON()
	key := x.Result.Key
	h, err := dbos.RunWorkflow(e.ctx, e.wf, chargeInput{Key: key, Body: string(body)}, dbos.WithWorkflowID(key))
	if err != nil {
		return toolSpan{}, err
	}
	out, err := h.GetResult()
	if err != nil {
		return toolSpan{}, err
	}
	if out == "" {
		return toolSpan{}, errors.New("dbos: empty result")
	}
	var tool toolSpan
	if v, ok := e.toolTime.LoadAndDelete(key); ok {
		tool = v.(toolSpan)
	}
	return tool, nil
}

// dbosMigrated creates DBOS's system tables in db (DBOS's own migrator).
func dbosMigrated(ctx context.Context, db *database) error {
	return dbos.Migrate(ctx, db.url, dbos.WithMigrateLogger(quiet))
}

func (b *bench) dbosFirstWorkload() workload {
	run := randHex(4)
	var e *dbosEnv
	return workload{
		system: "dbos", name: "first execution", prep: dbosMigrated,
		start: func(ctx context.Context, db *database, conns int) (opFunc, func(), error) {
			var err error
			if e, err = newDBOS(ctx, db, conns); err != nil {
				return nil, nil, err
			}
			op := func(ctx context.Context, _ int, i int64) (toolSpan, error) { return e.run(ctx, run, i) }
			return op, e.close, nil
		},
		after: func(_ context.Context, _ *database, r *result) error {
			r.Note = "pool +1 connection for DBOS's LISTEN"
			if extra, _ := e.prov.duplicates(); extra != 0 {
				return fmt.Errorf("%d duplicate tool calls", extra)
			}
			return nil
		},
	}
}

// dbosReplayWorkload re-runs workflows that already finished (the same
// workflow id): DBOS returns the recorded result without running the step.
func (b *bench) dbosReplayWorkload() workload {
	run := randHex(4)
	keys := b.replayKeys()
	var e *dbosEnv
	return workload{
		system: "dbos", name: "replay (re-run)",
		prep: func(ctx context.Context, db *database) error {
			if err := dbosMigrated(ctx, db); err != nil {
				return err
			}
			pe, err := newDBOS(ctx, db, 16)
			if err != nil {
				return err
			}
			defer pe.close()
			return inParallel(keys, func(i int64) error {
				_, err := pe.run(ctx, run, i)
				return err
			})
		},
		start: func(ctx context.Context, db *database, conns int) (opFunc, func(), error) {
			var err error
			if e, err = newDBOS(ctx, db, conns); err != nil {
				return nil, nil, err
			}
			op := func(ctx context.Context, _ int, i int64) (toolSpan, error) {
				return e.run(ctx, run, i%int64(keys))
			}
			return op, e.close, nil
		},
		after: func(_ context.Context, _ *database, r *result) error {
			r.Note = "pool +1 connection for DBOS's LISTEN"
			if n := e.prov.calls.Load(); n != 0 {
				return fmt.Errorf("re-runs called the tool %d times", n)
			}
			return nil
		},
	}
}
