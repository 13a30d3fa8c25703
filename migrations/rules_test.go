package migrations_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/migrations"
)

// The column rules of intents and actions hold as they did when they were
// table CHECK constraints (migration 013 made them domains): each bad
// value is refused, and a good row goes in.
func TestLedgerColumnRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.Schema(t, nil)

	intent := func(tenant, ref, action, key string) string {
		return `INSERT INTO intents (tenant_id, intent_ref, action, rules_version, payload, idem_key) VALUES ('` +
			tenant + `', '` + ref + `', '` + action + `', 1, '{}', '` + key + `')`
	}
	action := func(key, status, attempt, lease string) string {
		return `INSERT INTO actions (tenant_id, idem_key, intent_ref, action, status, attempt, lease_until) VALUES ('t1', '` +
			key + `', 'r', 'a', '` + status + `', ` + attempt + `, ` + lease + `)`
	}
	refused := map[string]string{
		"empty tenant":            intent("", "r1", "a", "k1"),
		"empty ref":               intent("t1", "", "a", "k2"),
		"empty action":            intent("t1", "r3", "", "k3"),
		"empty key":               intent("t1", "r4", "a", ""),
		"key of 256":              intent("t1", "r5", "a", strings.Repeat("k", 256)),
		"unknown status":          action("k6", "done", "1", "NULL"),
		"attempt 0":               action("k7", "completed", "0", "NULL"),
		"started without a lease": action("k8", "started", "1", "NULL"),
		"completed with a lease":  action("k9", "completed", "1", "now()"),
		"amended to empty ref":    `UPDATE intents SET intent_ref = '' WHERE tenant_id = 't1'`,
		"completed to bad status": `UPDATE actions SET status = 'nope' WHERE tenant_id = 't1'`,
	}
	for _, ok := range []string{intent("t1", "r0", "a", strings.Repeat("k", 255)), action("k0", "completed", "1", "NULL"),
		action("k00", "started", "2", "now()")} {
		if _, err := pool.Exec(ctx, ok); err != nil {
			t.Fatalf("%s: %v", ok, err)
		}
	}
	for name, stmt := range refused {
		_, err := pool.Exec(ctx, stmt)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23514" {
			t.Errorf("%s: got %v, want a check violation (23514)", name, err)
		}
	}
}

// intents and actions keep no table CHECK but the one cross-column rule:
// a table's CHECK constraints are parsed and planned again by every
// statement that writes the table, which the claim and the completion of
// every call pay (see migrations/013_domain_checks.sql); a column's rule
// belongs in a domain, whose constraints a backend plans once.
func TestLedgerTablesCheckOnlyAcrossColumns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := pgtest.Schema(t, nil)
	rows, err := pool.Query(ctx, `SELECT conrelid::regclass::text, conname FROM pg_constraint
WHERE connamespace = $1::regnamespace AND contype = 'c' AND conrelid IN ('intents'::regclass, 'actions'::regclass)
ORDER BY 1, 2`, schema)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var table, name string
		err := r.Scan(&table, &name)
		return table + "." + name, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "actions.actions_check" {
		t.Fatalf("table CHECK constraints on intents and actions: %v, want only actions.actions_check", got)
	}
}

// Migration 013 changes the types of key columns of the two largest
// tables: it must rewrite neither table nor their key indexes (a rewrite
// holds an exclusive lock for as long as it copies every row). On a schema
// with rows at version 12, their storage is the same file afterwards, and
// the rows satisfy the new rules.
func TestDomainMigrationRewritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx, exec, m13 := schemaBefore(t, "m13_", 13)
	exec(`INSERT INTO intents (tenant_id, intent_ref, action, rules_version, payload, idem_key)
SELECT 't1', 'r' || g, 'pix.charge', 1, '{}', md5(g::text) FROM generate_series(1, 500) g`)
	exec(`INSERT INTO actions (tenant_id, idem_key, intent_ref, action, status, attempt, lease_owner, lease_until)
SELECT 't1', md5(g::text), 'r' || g, 'pix.charge', 'started', 1, 'w', now() + interval '1 minute' FROM generate_series(1, 500) g`)
	applyRewritingNothing(t, tx, exec, m13, "intents", "actions", "intents_pkey", "intents_idem_key_tenant_id_key", "actions_pkey")
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM intents i JOIN actions a USING (tenant_id, idem_key) WHERE a.status = 'started'`).Scan(&n); err != nil || n != 500 {
		t.Fatalf("after 013: %d rows, %v", n, err)
	}
}

// schemaBefore makes a new schema in a transaction rolled back at the
// test's end, migrated to just before version v, with search_path on it;
// it returns the transaction, an exec that fails the test on error, and
// v's SQL, unapplied.
func schemaBefore(t *testing.T, prefix string, v int) (pgx.Tx, func(sql string), string) {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t, nil)
	schema := pgtest.SchemaName(t, prefix)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	exec := func(sql string) {
		t.Helper()
		if _, err := tx.Exec(ctx, sql); err != nil {
			t.Fatalf("%.80s: %v", sql, err)
		}
	}
	exec(`CREATE SCHEMA ` + schema)
	exec(`SET LOCAL search_path TO ` + schema)
	return tx, exec, migrateBefore(t, v, exec)
}

// applyRewritingNothing runs a migration's SQL and fails the test if
// any of the named relations was rewritten by it.
func applyRewritingNothing(t *testing.T, tx pgx.Tx, exec func(string), sql string, rels ...string) {
	t.Helper()
	before := relFiles(t, tx, rels...)
	exec(sql)
	after := relFiles(t, tx, rels...)
	for name, node := range before {
		if after[name] != node {
			t.Errorf("%s was rewritten (file %d, now %d)", name, node, after[name])
		}
	}
}

// relFiles maps each named relation of the current schema to its storage
// file: a rewrite gives it a new one.
func relFiles(t *testing.T, tx pgx.Tx, names ...string) map[string]uint32 {
	t.Helper()
	rows, err := tx.Query(context.Background(), `SELECT relname, relfilenode FROM pg_class
WHERE relnamespace = current_schema()::regnamespace AND relname = ANY ($1)`, names)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]uint32{}
	var name string
	var node uint32
	if _, err := pgx.ForEachRow(rows, []any{&name, &node}, func() error {
		m[name] = node
		return nil
	}); err != nil || len(m) != len(names) {
		t.Fatalf("relations %v, %v", m, err)
	}
	return m
}

// migrateBefore runs every migration before version v through exec and
// returns v's SQL, unapplied.
func migrateBefore(t *testing.T, v int, exec func(sql string)) string {
	t.Helper()
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	var sql string
	for _, m := range all {
		switch {
		case m.Version < v:
			exec(m.SQL)
		case m.Version == v:
			sql = m.SQL
		}
	}
	if sql == "" {
		t.Fatalf("no migration %03d", v)
	}
	return sql
}
