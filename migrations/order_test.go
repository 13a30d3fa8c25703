package migrations_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// On intents vacuumed while empty, a lookup by (tenant_id, idem_key)
// costs the same through either index, and PostgreSQL keeps the newer
// index's path: the key index must be the newer one, or the lookup reads
// every entry of the tenant in the primary key (migration 014). Migration
// 013 rebuilds both in an order the server's catalog decides; here the
// schema is first put in the order that went wrong (the primary key made
// again after 013), and migration 014 must mend it.
func TestIntentKeyIndexIsNewest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t, &pgtest.Opts{MaxConns: 1})
	schema := pgtest.SchemaName(t, "m14_")
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%.80s: %v", sql, err)
		}
	}
	exec(`CREATE SCHEMA ` + schema)
	// Put back as it was, not RESET: the pool's start of the session set
	// it (dbpool), and RESET would return it to the server's default.
	var path string
	if err := conn.QueryRow(ctx, `SELECT current_setting('search_path')`).Scan(&path); err != nil {
		t.Fatal(err)
	}
	exec(`SET search_path TO ` + schema)
	defer func() {
		if _, err := conn.Exec(ctx, `SELECT set_config('search_path', $1, false)`, path); err != nil {
			t.Error(err)
		}
	}()
	m14 := migrateBefore(t, 14, exec)
	makePrimaryKeyNewest(exec)

	newest := func() string { return newestIntentsIndex(ctx, t, conn) }
	// What a connection caches on intents vacuumed empty, under the
	// executor's planner settings (ledger's groupPlans: no sequential
	// scans).
	plan := func() string {
		t.Helper()
		exec(`VACUUM ANALYZE intents`)
		exec(`SET plan_cache_mode = force_generic_plan`)
		exec(`SET enable_seqscan = off`)
		defer exec(`RESET enable_seqscan`)
		defer exec(`RESET plan_cache_mode`)
		exec(`PREPARE by_key(text, text) AS SELECT * FROM intents WHERE tenant_id = $1 AND idem_key = $2`)
		defer exec(`DEALLOCATE by_key`)
		var line string
		if err := conn.QueryRow(ctx, `EXPLAIN (COSTS OFF) EXECUTE by_key(NULL, NULL)`).Scan(&line); err != nil {
			t.Fatal(err)
		}
		return line
	}
	if got := newest(); got != "intents_pkey" {
		t.Fatalf("set-up: newest index %s, want intents_pkey", got)
	}
	if got := plan(); !strings.Contains(got, "intents_pkey") {
		t.Fatalf("set-up: the lookup by key took %q; with intents_pkey newest it reads the primary key", got)
	}
	exec(m14)
	if got := newest(); got != "intents_idem_key_tenant_id_key" {
		t.Errorf("after 014: newest index %s, want intents_idem_key_tenant_id_key", got)
	}
	if got := plan(); !strings.Contains(got, "intents_idem_key_tenant_id_key") {
		t.Errorf("after 014: the lookup by key took %q, want intents_idem_key_tenant_id_key", got)
	}
	var unique bool
	if err := conn.QueryRow(ctx, `SELECT indisunique FROM pg_index WHERE indexrelid = 'intents_idem_key_tenant_id_key'::regclass`).Scan(&unique); err != nil || !unique {
		t.Errorf("after 014: key index unique %v, %v", unique, err)
	}

	// And on every schema the migrator makes.
	fresh, _ := pgtest.Schema(t, nil)
	if got := newestIntentsIndex(ctx, t, fresh); got != "intents_idem_key_tenant_id_key" {
		t.Errorf("a migrated schema: newest index on intents %q, want intents_idem_key_tenant_id_key", got)
	}
}

// makePrimaryKeyNewest makes the intents' primary key again, so that it
// is newer than the key index: the order 013 leaves on a server whose
// pg_depend has reused space.
func makePrimaryKeyNewest(exec func(sql string)) {
	exec(`ALTER TABLE intent_revisions DROP CONSTRAINT intent_revisions_tenant_id_intent_ref_action_fkey`)
	exec(`ALTER TABLE intents DROP CONSTRAINT intents_pkey, ADD PRIMARY KEY (tenant_id, intent_ref, action)`)
	exec(`ALTER TABLE intent_revisions ADD FOREIGN KEY (tenant_id, intent_ref, action) REFERENCES intents ON DELETE CASCADE`)
}

// newestIntentsIndex names the index on intents made last.
func newestIntentsIndex(ctx context.Context, t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) string {
	t.Helper()
	var name string
	if err := q.QueryRow(ctx, `SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'intents'::regclass ORDER BY c.oid DESC LIMIT 1`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}
