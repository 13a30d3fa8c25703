package main

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/retrysafe/retrysafe/executor"
)

// scaleResult describes the scale section's preload and purge.
type scaleResult struct {
	Rows          int     `json:"rows"` // intents and as many actions preloaded
	LoadSeconds   float64 `json:"load_seconds"`
	PurgeSeconds  float64 `json:"purge_seconds"`
	PurgedActions int64   `json:"purged_actions"`
	PurgedIntents int64   `json:"purged_intents"`
	PurgeBatches  int     `json:"purge_batches"`
	Err           string  `json:"error,omitempty"`
}

// The preloaded rows: settled 30 days ago, spread over 100 tenants (the
// benchmark's tenant among them), keys as random as real HMAC keys, loaded
// in key order as a table that grew over time would be laid out by its
// indexes.
//
// They are the one place outside internal/ledger that writes the ledger's
// tables, on purpose: a bulk load of synthetic history (a million rows from
// generate_series in one statement each), which no owner API offers or
// should, since no engine path writes that way. Everything the benchmark
// reads of the ledger goes through the executor (Execute, Purge) or its test
// API (executortest); the module is apart from the engine's (bench/go.mod),
// outside internal/importrule's checks.
const (
	preloadIntents = `INSERT INTO intents (tenant_id, intent_ref, action, rules_version, payload, idem_key, source_ref, created_at, updated_at)
SELECT 't' || (g % 100), 'old-' || g, '` + toolName + `', 2,
	jsonb_build_object('amount', '18000', 'customer_id', 'cust-' || (g % 1000), 'intent_ref', 'old-' || g),
	encode(sha256(('old-' || g)::bytea), 'hex'), 'wamid.old.' || g,
	now() - interval '30 days', now() - interval '30 days'
FROM generate_series(1, $1) g ORDER BY 1, 6`
	preloadActions = `INSERT INTO actions (tenant_id, idem_key, intent_ref, action, status, attempt, response, created_at, updated_at, finished_at)
SELECT 't' || (g % 100), encode(sha256(('old-' || g)::bytea), 'hex'), 'old-' || g, '` + toolName + `', 'completed', 1,
	jsonb_build_object('id', 'ch_old_' || g, 'status', 'paid', 'amount', 18000),
	now() - interval '30 days', now() - interval '30 days', now() - interval '30 days'
FROM generate_series(1, $1) g ORDER BY 1, 2`
)

// settle vacuums, analyzes and checkpoints, so that a measurement starts
// from the state autovacuum keeps a table in and no checkpoint or
// autovacuum of the preload lands inside it.
func settle(ctx context.Context, db *database) error {
	p, err := db.pool(ctx, 1)
	if err != nil {
		return err
	}
	defer p.Close()
	for _, q := range []string{`VACUUM (ANALYZE) intents`, `VACUUM (ANALYZE) actions`, `CHECKPOINT`} {
		if _, err := p.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// preload migrates db and loads rows intents and rows actions, in parallel.
func preload(ctx context.Context, db *database, rows int) error {
	if err := migrated(ctx, db); err != nil {
		return err
	}
	p, err := db.pool(ctx, 2)
	if err != nil {
		return err
	}
	defer p.Close()
	g, gctx := errgroup.WithContext(ctx)
	for _, q := range []string{preloadIntents, preloadActions} {
		g.Go(func() error {
			_, err := p.Exec(gctx, q, rows)
			return err
		})
	}
	return g.Wait()
}

// scaleRounds is how often the empty and the full database are each
// measured, alternating. Run to run, a point on this kind of machine moves
// by 10-15 % (other tenants' load, checkpoints); measured once each, the
// empty and the full run compared that noise as often as the table size.
// Alternating them puts the drift on both sides.
const scaleRounds = 2

// runScale measures first executions on an empty database and on one
// holding rows existing intents and actions (alternately, scaleRounds
// times each, every full run starting from a vacuumed, analyzed and
// checkpointed table as the first did), then again while the retention
// purge deletes those rows (they are 30 days old).
func (b *bench) runScale(ctx context.Context) ([]*result, *scaleResult) {
	callers := b.cfg.scaleCallers
	rows := b.cfg.scaleRows
	sr := &scaleResult{Rows: rows}
	var out []*result

	emptyName, fullName := "first execution, 0 rows", fmt.Sprintf("first execution, %s rows", count(rows))
	empty := func() *result {
		return b.run(ctx, b.rsFirstWorkload(emptyName, func(ctx context.Context, db *database) error {
			if err := migrated(ctx, db); err != nil {
				return err
			}
			return settle(ctx, db)
		}), callers)
	}
	// A workload per run: each has its own intent refs.
	full := func() workload { return b.rsFirstWorkload(fullName, nil) }
	round := func(r *result, i int) *result {
		if r.Err == "" {
			r.Note = fmt.Sprintf("round %d of %d; %.2f full-page images/op", i, scaleRounds, r.FPIPerOp)
		}
		return r
	}
	out = append(out, round(empty(), 1))
	db, err := b.srv.create(ctx, "scale")
	if err != nil {
		sr.Err = err.Error()
		return append(out, b.failed(full(), callers, err)), sr
	}
	defer b.drop(db)
	t0 := time.Now()
	if err := preload(ctx, db, rows); err != nil {
		sr.Err = err.Error()
		return append(out, b.failed(full(), callers, fmt.Errorf("preload: %w", err))), sr
	}
	if err := settle(ctx, db); err != nil {
		sr.Err = err.Error()
		return append(out, b.failed(full(), callers, err)), sr
	}
	sr.LoadSeconds = time.Since(t0).Seconds()
	b.logf("  preloaded %s intents and actions in %.1fs", count(rows), sr.LoadSeconds)
	out = append(out, round(b.point(ctx, db, full(), callers, nil), 1))
	for i := 2; i <= scaleRounds; i++ {
		out = append(out, round(empty(), i))
		if err := settle(ctx, db); err != nil {
			sr.Err = err.Error()
			return append(out, b.failed(full(), callers, err)), sr
		}
		out = append(out, round(b.point(ctx, db, full(), callers, nil), i))
	}

	// The same again while the purge runs on its own connection.
	during := b.rsFirstWorkload("first execution during purge", nil)
	purge := func() error {
		p, err := db.pool(ctx, 1)
		if err != nil {
			return err
		}
		defer p.Close()
		t := time.Now()
		res, err := executor.Purge(ctx, p, executor.PurgeParams{})
		sr.PurgeSeconds = time.Since(t).Seconds()
		sr.PurgedActions, sr.PurgedIntents, sr.PurgeBatches = res.Actions, res.Intents, res.Batches
		return err
	}
	r := b.point(ctx, db, during, callers, purge)
	if r.Err == "" {
		r.Note = fmt.Sprintf("purge deleted %s actions + %s intents in %.1fs (%d batches)",
			count(int(sr.PurgedActions)), count(int(sr.PurgedIntents)), sr.PurgeSeconds, sr.PurgeBatches)
		if sr.PurgedActions != int64(rows) || sr.PurgedIntents != int64(rows) {
			r.Err = fmt.Sprintf("purge deleted %d actions and %d intents, want %d each", sr.PurgedActions, sr.PurgedIntents, rows)
		}
	}
	b.logf("  purge: %d actions, %d intents in %.1fs, %d batches", sr.PurgedActions, sr.PurgedIntents, sr.PurgeSeconds, sr.PurgeBatches)
	return append(out, r), sr
}

// count prints 1000000 as 1M, 20000 as 20k.
func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
