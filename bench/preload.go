package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/retrysafe/retrysafe/executor"
)

// The scale database holds rows intents, each with its completed action,
// laid out as tables that served a steady rate for a week and a day would
// be: the heap in the order the rows finished (the oldest first), the keys
// as random as HMAC keys, so that every index but the heap's order is
// random. The oldest expired rows (a day's share: 1,296,000 of 10,000,000,
// a day at 15 executions per second) finished 8 to 7 days before the
// preload and are what the retention purge deletes; the others finished in
// the 7 days before it and stay. Ten million rows take about 11 GB, so the
// database can be kept between runs (--scale-db): what a run's purge
// deleted, the next run inserts again before it measures.

// preloadTenants is how many tenants the preload spreads its rows over:
// t0..t99, the benchmark's t1 among them. The scale runs' calls are spread
// over the same.
const preloadTenants = 100

// dayShare is the share of the preload's rows that expired: a day at 15
// executions per second out of 10,000,000 rows.
const dayShare = 15 * 86400.0 / 10_000_000

// preloadChunk is how many rows one INSERT of the preload writes: a chunk
// is one transaction, so an interrupted preload loses at most one.
const preloadChunk = 500_000

// The rows of the preload and of a top-up: $1..$2 number them, $3 prefixes
// their refs (and so their keys), $4 is the preload's clock; rows up to $5
// finished 8 to 7 days before $4, the others (up to $6) in the 7 days
// before it. The shapes are what Executor.Execute writes for the benchmark
// tool (232-byte intents, 208-byte actions), apart from the tenants: 100 of
// them, the benchmark's t1 among them.
//
// They are the one place outside internal/ledger that writes the ledger's
// tables, on purpose: a bulk load of synthetic history from generate_series,
// which no owner API offers or should, since no engine path writes that way.
// The module is apart from the engine's (bench/go.mod), outside
// internal/importrule's checks.
const (
	tenantsSQL      = "100" // preloadTenants
	preloadFinished = `CASE WHEN g <= $5 THEN $4::timestamptz - interval '8 days' + ((g - 1)::float8 / $5::float8) * interval '23 hours'
		ELSE $4::timestamptz - interval '167 hours' + ((g - $5 - 1)::float8 / nullif($6 - $5, 0)::float8) * interval '167 hours' END`
	preloadIntentRows = `INSERT INTO intents (tenant_id, intent_ref, action, rules_version, payload, idem_key, source_ref, created_at, updated_at)
SELECT 't' || (g % ` + tenantsSQL + `), $3 || '-' || g, '` + toolName + `', 2,
	jsonb_build_object('amount', '18000', 'intent_ref', $3 || '-' || g, 'customer_id', 'cust-' || (g % 1000)),
	encode(sha256(($3 || '-' || g)::bytea), 'hex'), 'wamid.' || $3 || '.' || g, f.at - interval '2 ms', f.at - interval '2 ms'
FROM generate_series($1::bigint, $2::bigint) g CROSS JOIN LATERAL (SELECT ` + preloadFinished + `) f(at)`
	preloadActionRows = `INSERT INTO actions (tenant_id, idem_key, intent_ref, action, status, attempt, response, created_at, updated_at, finished_at)
SELECT 't' || (g % ` + tenantsSQL + `), encode(sha256(($3 || '-' || g)::bytea), 'hex'), $3 || '-' || g, '` + toolName + `', 'completed', 1,
	jsonb_build_object('id', 'ch_' || $3 || '_' || g, 'status', 'paid'), f.at - interval '2 ms', f.at, f.at
FROM generate_series($1::bigint, $2::bigint) g CROSS JOIN LATERAL (SELECT ` + preloadFinished + `) f(at)`
)

// preloadMeta is the scale database's record of its preload
// (public.bench_preload, one row).
type preloadMeta struct {
	Rows     int64     // intents (and actions) the preload wrote
	Expired  int64     // of them expired
	Present  int64     // expired rows there now (a purge deletes them, a top-up restores them)
	LoadedAt time.Time // the preload's clock
	Gen      int       // top-ups so far: the prefix of their refs
	// Dirty: a purge was running and Present may be stale.
	Dirty bool
}

const (
	preloadMetaCreate = `CREATE TABLE public.bench_preload (rows bigint NOT NULL, expired bigint NOT NULL, present bigint NOT NULL,
	loaded_at timestamptz NOT NULL, gen integer NOT NULL, dirty boolean NOT NULL)`
	preloadMetaRead  = `SELECT rows, expired, present, loaded_at, gen, dirty FROM public.bench_preload`
	preloadMetaWrite = `UPDATE public.bench_preload SET present = $1, gen = $2, dirty = $3`
)

func (m *preloadMeta) save(ctx context.Context, p *pgxpool.Pool) error {
	_, err := p.Exec(ctx, preloadMetaWrite, m.Present, m.Gen, m.Dirty)
	return err
}

// readMeta reads db's preload record; nil when it has none (not a scale
// database, or a preload that did not finish).
func readMeta(ctx context.Context, db *database) (*preloadMeta, error) {
	p, err := db.pool(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	var exists bool
	if err := p.QueryRow(ctx, `SELECT to_regclass('public.bench_preload') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return nil, err
	}
	m := &preloadMeta{}
	err = p.QueryRow(ctx, preloadMetaRead).Scan(&m.Rows, &m.Expired, &m.Present, &m.LoadedAt, &m.Gen, &m.Dirty)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return m, err
}

// preloadTimes is how long each step of a preload took, in seconds.
type preloadTimes struct {
	Load, Index, Settle float64
}

// preload migrates db and loads rows intents and actions, expired of them
// expired, into tables without their key indexes, which it then builds:
// sorting once is much faster than inserting ten million random keys into
// B-trees that outgrow shared buffers.
func preload(ctx context.Context, db *database, rows, expired int, logf func(string, ...any)) (*preloadMeta, preloadTimes, error) {
	var tm preloadTimes
	if err := migrated(ctx, db); err != nil {
		return nil, tm, err
	}
	p, err := db.pool(ctx, 2)
	if err != nil {
		return nil, tm, err
	}
	defer p.Close()
	var t0 time.Time
	if err := p.QueryRow(ctx, `SELECT now()`).Scan(&t0); err != nil {
		return nil, tm, err
	}
	keys, err := keyDDL(ctx, p)
	if err != nil {
		return nil, tm, err
	}
	for _, k := range keys {
		if _, err := p.Exec(ctx, k.drop); err != nil {
			return nil, tm, fmt.Errorf("%s: %w", k.drop, err)
		}
	}
	start := time.Now()
	if err := insertRows(ctx, p, rowBatch{prefix: "old", t0: t0, from: 1, to: int64(rows), expired: int64(expired), total: int64(rows)}, logf); err != nil {
		return nil, tm, err
	}
	tm.Load = time.Since(start).Seconds()
	start = time.Now()
	if err := buildKeys(ctx, p, keys); err != nil {
		return nil, tm, err
	}
	tm.Index = time.Since(start).Seconds()
	m := &preloadMeta{Rows: int64(rows), Expired: int64(expired), Present: int64(expired), LoadedAt: t0}
	if _, err := p.Exec(ctx, preloadMetaCreate); err != nil {
		return nil, tm, err
	}
	if _, err := p.Exec(ctx, `INSERT INTO public.bench_preload VALUES ($1, $2, $3, $4, 0, false)`, m.Rows, m.Expired, m.Present, m.LoadedAt); err != nil {
		return nil, tm, err
	}
	start = time.Now()
	if err := settle(ctx, db); err != nil {
		return nil, tm, err
	}
	tm.Settle = time.Since(start).Seconds()
	return m, tm, nil
}

// rowBatch is a range of rows to insert (see preloadIntentRows).
type rowBatch struct {
	prefix                   string
	t0                       time.Time
	from, to, expired, total int64
	// sorted: into tables that have their indexes, each table's rows in
	// the order of its random key index, so that inserting walks each
	// index once instead of reading a random leaf for every row; chunk
	// is then the whole range, sorted at once.
	sorted bool
}

// insertRows inserts rb's rows into intents and actions, the two tables at
// once, in chunks.
func insertRows(ctx context.Context, p *pgxpool.Pool, rb rowBatch, logf func(string, ...any)) error {
	chunk := int64(preloadChunk)
	queries := []string{preloadIntentRows, preloadActionRows}
	if rb.sorted {
		chunk = rb.to - rb.from + 1
		// intents by (idem_key): its primary key takes the new refs in a
		// range of their own per tenant whatever the order; actions by
		// (tenant_id, idem_key), its primary key.
		queries = []string{preloadIntentRows + ` ORDER BY 6`, preloadActionRows + ` ORDER BY 1, 2`}
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, q := range queries {
		g.Go(func() error {
			c, err := p.Acquire(gctx)
			if err != nil {
				return err
			}
			defer c.Release()
			// The preload's commits need not wait for the flush: settle's
			// checkpoint makes them durable before anything is measured.
			// A sorted batch sorts in memory. The two settings are put
			// back as they were, not RESET: that would undo what the
			// pool's start of the session set (dbpool: search_path, and
			// synchronous_commit on over a default of off).
			var sc, wm string
			if err := c.QueryRow(gctx, `SELECT current_setting('synchronous_commit'), current_setting('work_mem')`).Scan(&sc, &wm); err != nil {
				return err
			}
			for _, set := range []string{`SET synchronous_commit = off`, `SET work_mem = '512MB'`} {
				if _, err := c.Exec(gctx, set); err != nil {
					return err
				}
			}
			defer func() {
				_, _ = c.Exec(context.Background(), `SELECT set_config('synchronous_commit', $1, false), set_config('work_mem', $2, false)`, sc, wm)
			}()
			for lo := rb.from; lo <= rb.to; lo += chunk {
				hi := min(lo+chunk-1, rb.to)
				if _, err := c.Exec(gctx, q, lo, hi, rb.prefix, rb.t0, rb.expired, rb.total); err != nil {
					return err
				}
				if q == preloadActionRows && logf != nil && (hi-rb.from+1)%(4*chunk) == 0 {
					logf("    %s rows of %s", count(int(hi-rb.from+1)), count(int(rb.to-rb.from+1)))
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// keyFill is the fillfactor the preload builds each random-key index of
// the ledger with, so that its pages are as full as the executor leaves
// them: a bulk-built B-tree packs its leaves to 90 %, and inserts in random
// key order into such pages split nearly every page they reach until the
// index has settled near the density random inserts keep, a storm of page
// splits (their WAL and their CPU) that a table written over a week does
// not have. The figures are the sizes per million intents of the same
// indexes written by Executor.Execute (the scale run's empty database,
// vacuumed: its "written by the executor" sizes) against the bulk-built
// ones, times 90: intents_pkey 85 against 47 MB, the key index 117
// against 91, actions_pkey 178 against 91 (each completion is a new row
// version with a second key entry, which vacuum removes, leaving the page
// half empty).
var keyFill = map[string]int{
	"intents_pkey":                   50,
	"intents_idem_key_tenant_id_key": 70,
	"actions_pkey":                   45,
}

// keyStmt is how to drop one key constraint or index of the preloaded
// tables and how to build it again.
type keyStmt struct {
	table, drop, create string
	fk                  bool // a foreign key: built after every key
}

// keyDDL lists the primary keys, unique constraints, foreign keys and
// plain indexes of intents and actions (and the foreign keys that refer to
// them), read from the catalog so that the preload follows the migrations.
// Partial indexes stay: no preloaded row enters them.
func keyDDL(ctx context.Context, p *pgxpool.Pool) ([]keyStmt, error) {
	rows, err := p.Query(ctx, `WITH t AS (SELECT ARRAY['intents', 'actions']::regclass[] AS rels)
SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid), c.contype = 'f'
FROM pg_constraint c, t
WHERE (c.contype IN ('p', 'u') AND c.conrelid = ANY (t.rels)) OR (c.contype = 'f' AND (c.conrelid = ANY (t.rels) OR c.confrelid = ANY (t.rels)))
UNION ALL
SELECT i.indrelid::regclass::text, i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid), NULL
FROM pg_index i, t
WHERE i.indrelid = ANY (t.rels) AND i.indpred IS NULL
	AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid AND c.contype IN ('p', 'u', 'x'))`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []keyStmt
	for rows.Next() {
		var table, name, def string
		var fk *bool
		if err := rows.Scan(&table, &name, &def, &fk); err != nil {
			return nil, err
		}
		ident := pgx.Identifier{name}.Sanitize()
		if fk == nil { // a plain index: pg_get_indexdef is its CREATE INDEX
			out = append(out, keyStmt{table: table, drop: "DROP INDEX " + ident, create: def})
			continue
		}
		if f, ok := keyFill[name]; ok && !*fk {
			def += fmt.Sprintf(" WITH (fillfactor = %d)", f)
		}
		out = append(out, keyStmt{table: table, fk: *fk,
			drop:   fmt.Sprintf("ALTER TABLE %s DROP CONSTRAINT %s", table, ident),
			create: fmt.Sprintf("ALTER TABLE %s ADD CONSTRAINT %s %s", table, ident, def)})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// Foreign keys go first and come back last.
	var fks, others []keyStmt
	for _, k := range out {
		if k.fk {
			fks = append(fks, k)
		} else {
			others = append(others, k)
		}
	}
	return append(fks, others...), nil
}

// buildKeys builds keys again: each table's on a connection of its own,
// the two tables at once, then the foreign keys.
func buildKeys(ctx context.Context, p *pgxpool.Pool, keys []keyStmt) error {
	byTable := map[string][]string{}
	var fks []string
	for _, k := range keys {
		if k.fk {
			fks = append(fks, k.create)
		} else {
			byTable[k.table] = append(byTable[k.table], k.create)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, stmts := range byTable {
		g.Go(func() error {
			c, err := p.Acquire(gctx)
			if err != nil {
				return err
			}
			defer c.Release()
			// Session settings only: room to sort in memory.
			if _, err := c.Exec(gctx, `SET maintenance_work_mem = '1GB'`); err != nil {
				return err
			}
			defer func() { _, _ = c.Exec(context.Background(), `RESET maintenance_work_mem`) }()
			for _, s := range stmts {
				if _, err := c.Exec(gctx, s); err != nil {
					return fmt.Errorf("%s: %w", s, err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, s := range fks {
		if _, err := p.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// trimBenchRows deletes the intents and actions earlier runs' executions
// left in a kept database (their refs start with "inv-"; the preload's
// with "old-" and "exp"), so that each run measures the tables the preload
// made: a purge under load alone adds a million of them. It returns how
// many intents it deleted.
func trimBenchRows(ctx context.Context, p *pgxpool.Pool) (int64, error) {
	var n int64
	err := p.QueryRow(ctx, `WITH mine AS (
	SELECT tenant_id, idem_key FROM intents
	WHERE tenant_id IN (SELECT 't' || g FROM generate_series(0, `+tenantsSQL+` - 1) g)
		AND intent_ref >= 'inv-' AND intent_ref < 'inv.'
), gone_actions AS (
	DELETE FROM actions a USING mine m WHERE a.tenant_id = m.tenant_id AND a.idem_key = m.idem_key RETURNING 1
), gone AS (
	DELETE FROM intents i USING mine m WHERE i.tenant_id = m.tenant_id AND i.idem_key = m.idem_key RETURNING 1
)
SELECT count(*) FROM gone`).Scan(&n)
	return n, err
}

// restoreExpired deletes earlier runs' rows (trimBenchRows) and inserts
// again the expired rows a purge deleted, under new refs, so that the
// database holds what its preload wrote before each measurement. It
// returns how long it took, 0 when there was nothing to do.
func restoreExpired(ctx context.Context, db *database, m *preloadMeta, logf func(string, ...any)) (float64, error) {
	p, err := db.pool(ctx, 2)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	if m.Dirty {
		// A purge was interrupted: count what it left.
		err := p.QueryRow(ctx, `SELECT count(*) FROM actions WHERE finished_at < $1::timestamptz - interval '7 days'`, m.LoadedAt).Scan(&m.Present)
		if err != nil {
			return 0, err
		}
		m.Dirty = false
		if err := m.save(ctx, p); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	trimmed, err := trimBenchRows(ctx, p)
	if err != nil {
		return 0, fmt.Errorf("delete earlier runs' rows: %w", err)
	}
	if trimmed > 0 {
		logf("  deleted %s intents and actions earlier runs' executions left", groupDigits(trimmed))
	}
	missing := m.Expired - m.Present
	if missing <= 0 && trimmed == 0 {
		return 0, nil
	}
	// The dead rows first, so that the new ones take their place (the
	// expired ones at the start of the heap, as the next day's rows would).
	for _, q := range []string{`VACUUM intents`, `VACUUM actions`} {
		if _, err := p.Exec(ctx, q); err != nil {
			return 0, fmt.Errorf("%s: %w", q, err)
		}
	}
	if missing <= 0 {
		return time.Since(start).Seconds(), nil
	}
	m.Gen++
	prefix := fmt.Sprintf("exp%d", m.Gen)
	rb := rowBatch{prefix: prefix, t0: m.LoadedAt, from: 1, to: missing, expired: missing, total: missing, sorted: true}
	if err := insertRows(ctx, p, rb, nil); err != nil {
		return 0, fmt.Errorf("restore %d expired rows: %w", missing, err)
	}
	m.Present = m.Expired
	if err := m.save(ctx, p); err != nil {
		return 0, err
	}
	took := time.Since(start).Seconds()
	logf("  restored %s expired intents and actions (deleted by the last purge) in %.1fs", count(int(missing)), took)
	return took, nil
}

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

// purgeRetention is the retention that makes exactly the preload's expired
// rows expired: executor.DefaultRetention (7 days) on the preload's clock.
func purgeRetention(ctx context.Context, p *pgxpool.Pool, m *preloadMeta) (time.Duration, error) {
	var since float64
	if err := p.QueryRow(ctx, `SELECT extract(epoch FROM now() - $1::timestamptz)`, m.LoadedAt).Scan(&since); err != nil {
		return 0, err
	}
	return executor.DefaultRetention + time.Duration(since*float64(time.Second)), nil
}

// scaleName is the row name of the preloaded tables' point.
func scaleName(rows int) string {
	return fmt.Sprintf("first execution, %s rows", count(rows))
}
