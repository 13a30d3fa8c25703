package migrations_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// keyColumns are the ledger's identifier columns, collated "C" since
// migration 015.
var keyColumns = map[string][]string{
	"intents":          {"tenant_id", "intent_ref", "action", "idem_key"},
	"intent_revisions": {"tenant_id", "intent_ref", "action"},
	"actions":          {"tenant_id", "idem_key", "intent_ref", "action"},
}

// keyCollations reads the collation of every key column, by table and
// column, and of every column of the tables' primary and unique keys, so
// that a key column added later without "C" is caught too.
func keyCollations(ctx context.Context, t *testing.T, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) map[string]string {
	t.Helper()
	rows, err := q.Query(ctx, `SELECT DISTINCT c.relname || '.' || a.attname, coalesce(co.collname, '')
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
LEFT JOIN pg_collation co ON co.oid = a.attcollation
WHERE c.relnamespace = current_schema()::regnamespace
  AND c.relname IN ('intents', 'intent_revisions', 'actions')
  AND a.attcollation <> 0
  AND (a.attname IN ('tenant_id', 'intent_ref', 'action', 'idem_key')
       OR EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND (i.indisprimary OR i.indisunique)
                  AND a.attnum = ANY (i.indkey)))`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var col, coll string
	if _, err := pgx.ForEachRow(rows, []any{&col, &coll}, func() error {
		got[col] = coll
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// Every key column of a migrated schema is collated "C": byte order, a
// memcmp per comparison in the claims' B-tree descents, and an index
// order that no locale data can change under it.
func TestKeyColumnsCollateC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fresh, _ := pgtest.Schema(t, nil)
	conn, err := fresh.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	checkKeysCollateC(ctx, t, conn)
}

// checkKeysCollateC fails the test unless every column of keyColumns, and
// every other column keyCollations finds, is collated "C".
func checkKeysCollateC(ctx context.Context, t *testing.T, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) {
	t.Helper()
	got := keyCollations(ctx, t, q)
	n := 0
	for table, cols := range keyColumns {
		for _, c := range cols {
			n++
			if coll := got[table+"."+c]; coll != "C" {
				t.Errorf("%s.%s collated %q, want \"C\"", table, c, coll)
			}
		}
	}
	for col, coll := range got {
		if coll != "C" {
			t.Errorf("key column %s collated %q, want \"C\"", col, coll)
		}
	}
	if len(got) < n {
		t.Errorf("found %d key columns, want at least %d: %v", len(got), n, got)
	}
}

// Migration 015 changes only the key columns' collation: on a schema with
// rows at version 14, in the index order that went wrong once (the
// primary key newer than the key index, see TestIntentKeyIndexIsNewest),
// it rewrites neither table, keeps every row findable through the
// rebuilt indexes, and leaves the key index newest.
func TestKeyCollationMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx, exec, m15 := schemaBefore(t, "m15_", 15)
	makePrimaryKeyNewest(exec)
	if got := newestIntentsIndex(ctx, t, tx); got != "intents_pkey" {
		t.Fatalf("set-up: newest index %s, want intents_pkey", got)
	}
	// Refs and keys whose order differs between byte order and a
	// linguistic one, and a non-ASCII ref.
	exec(`INSERT INTO intents (tenant_id, intent_ref, action, rules_version, payload, idem_key)
SELECT 't1', CASE WHEN g % 3 = 0 THEN 'Fatura-' WHEN g % 3 = 1 THEN 'fatura-' ELSE 'função-' END || g,
       'pix.charge', 1, '{}', md5(g::text) FROM generate_series(1, 300) g`)
	exec(`INSERT INTO actions (tenant_id, idem_key, intent_ref, action, status, attempt, lease_owner, lease_until)
SELECT tenant_id, idem_key, intent_ref, action, 'started', 1, 'w', now() + interval '1 minute' FROM intents`)
	exec(`INSERT INTO intent_revisions (tenant_id, intent_ref, action, revision, old_rules_version, old_payload, old_key, new_key, reason)
SELECT tenant_id, intent_ref, action, 0, 1, '{}', idem_key, idem_key, 'test' FROM intents WHERE intent_ref LIKE 'função-%'`)
	applyRewritingNothing(t, tx, exec, m15, "intents", "actions", "intent_revisions")
	if got := newestIntentsIndex(ctx, t, tx); got != "intents_idem_key_tenant_id_key" {
		t.Errorf("after 015: newest index %s, want intents_idem_key_tenant_id_key", got)
	}
	checkKeysCollateC(ctx, t, tx)
	// Every row is found by each rebuilt index (index scans forced), and
	// the unique keys still refuse a duplicate.
	exec(`SET LOCAL enable_seqscan = off`)
	exec(`SET LOCAL enable_bitmapscan = off`)
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM intents i
WHERE EXISTS (SELECT 1 FROM intents k WHERE k.idem_key = i.idem_key AND k.tenant_id = i.tenant_id)
  AND EXISTS (SELECT 1 FROM intents p WHERE p.tenant_id = i.tenant_id AND p.intent_ref = i.intent_ref AND p.action = i.action)
  AND EXISTS (SELECT 1 FROM actions a WHERE a.tenant_id = i.tenant_id AND a.idem_key = i.idem_key)`).Scan(&n); err != nil || n != 300 {
		t.Fatalf("after 015: %d of 300 intents found through the indexes, %v", n, err)
	}
	if _, err := tx.Exec(ctx, `SAVEPOINT dup`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO intents (tenant_id, intent_ref, action, rules_version, payload, idem_key)
VALUES ('t1', 'other', 'pix.charge', 1, '{}', md5('7'))`); err == nil {
		t.Error("after 015: a second intent with an existing key went in")
	}
	if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT dup`); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM intent_revisions r JOIN intents i USING (tenant_id, intent_ref, action)`).Scan(&n); err != nil || n != 100 {
		t.Fatalf("after 015: %d of 100 revisions joined to their intents, %v", n, err)
	}
}
