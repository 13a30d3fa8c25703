package migrations_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// keyColumns are identifier columns collated "C": the ledger's since
// migration 015, the rest of the schema's since 016 (a sample, besides
// every key column keyCollations finds on its own).
var keyColumns = map[string][]string{
	"intents":              {"tenant_id", "intent_ref", "action", "idem_key"},
	"intent_revisions":     {"tenant_id", "intent_ref", "action"},
	"actions":              {"tenant_id", "idem_key", "intent_ref", "action"},
	"idempotency_requests": {"tenant_id", "operation", "idem_key"},
	"processed_effects":    {"tenant_id", "effect_key", "order_ref", "payment_ref", "charge_ref"},
	"orders":               {"tenant_id", "order_ref", "last_effect_key"}, // last_effect_key is compared with processed_effects.effect_key
	"messages":             {"tenant_id", "message_id", "conversation_id"},
	"agent_turns":          {"tenant_id", "message_id", "reply_key", "reply_wamid"},
	"console_sessions":     {"operator"},
}

// ledgerTables are the tables migration 015 collated.
var ledgerTables = []string{"intents", "intent_revisions", "actions"}

// keyCollations reads the collation of every key column of the named
// tables (every retrysafe table when none is named; River's own are
// River's): the columns of keyColumns, and every column an index orders
// by or a foreign key matches, so that a key column added later without
// "C" is caught too.
func keyCollations(ctx context.Context, t *testing.T, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, tables []string) map[string]string {
	t.Helper()
	var named []string
	for table, cols := range keyColumns {
		for _, c := range cols {
			named = append(named, table+"."+c)
		}
	}
	rows, err := q.Query(ctx, `SELECT DISTINCT c.relname || '.' || a.attname, coalesce(co.collname, '')
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
LEFT JOIN pg_collation co ON co.oid = a.attcollation
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
  AND c.relname NOT LIKE 'river\_%'
  AND (coalesce(cardinality($1::text[]), 0) = 0 OR c.relname = ANY ($1))
  AND a.attcollation <> 0 AND NOT a.attisdropped
  AND (c.relname || '.' || a.attname = ANY ($2)
       OR EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid
                  AND a.attnum = ANY ((i.indkey::int2[])[0:i.indnkeyatts - 1]))
       OR EXISTS (SELECT 1 FROM pg_constraint f WHERE f.contype = 'f'
                  AND ((f.conrelid = c.oid AND a.attnum = ANY (f.conkey))
                       OR (f.confrelid = c.oid AND a.attnum = ANY (f.confkey)))))`, tables, named)
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

// checkKeysCollateC fails the test unless every key column of the named
// tables (of every table when none is named) is collated "C", and finds
// every column keyColumns names for them.
func checkKeysCollateC(ctx context.Context, t *testing.T, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, tables ...string) {
	t.Helper()
	got := keyCollations(ctx, t, q, tables)
	for table, cols := range keyColumns {
		if len(tables) > 0 && !slices.Contains(tables, table) {
			continue
		}
		for _, c := range cols {
			if _, ok := got[table+"."+c]; !ok {
				t.Errorf("key column %s.%s not found", table, c)
			}
		}
	}
	for col, coll := range got {
		if coll != "C" {
			t.Errorf("key column %s collated %q, want \"C\"", col, coll)
		}
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
	checkKeysCollateC(ctx, t, tx, ledgerTables...)
	// Every row is found by each rebuilt index (index scans forced), and
	// the unique keys still refuse a duplicate.
	forceIndexScans(exec)
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM intents i
WHERE EXISTS (SELECT 1 FROM intents k WHERE k.idem_key = i.idem_key AND k.tenant_id = i.tenant_id)
  AND EXISTS (SELECT 1 FROM intents p WHERE p.tenant_id = i.tenant_id AND p.intent_ref = i.intent_ref AND p.action = i.action)
  AND EXISTS (SELECT 1 FROM actions a WHERE a.tenant_id = i.tenant_id AND a.idem_key = i.idem_key)`).Scan(&n); err != nil || n != 300 {
		t.Fatalf("after 015: %d of 300 intents found through the indexes, %v", n, err)
	}
	checkRefused(ctx, t, tx, "after 015", `INSERT INTO intents (tenant_id, intent_ref, action, rules_version, payload, idem_key)
VALUES ('t1', 'other', 'pix.charge', 1, '{}', md5('7'))`)
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM intent_revisions r JOIN intents i USING (tenant_id, intent_ref, action)`).Scan(&n); err != nil || n != 100 {
		t.Fatalf("after 015: %d of 100 revisions joined to their intents, %v", n, err)
	}
}

// Migration 016 changes only the collation of the other tables' keys: on a
// schema with rows at version 15 it rewrites none of the deduplicating
// tables, makes every index again with its definition and in its table's
// first order (where costs tie, the newer index's path is the one kept),
// and leaves every row findable through the rebuilt indexes, every
// duplicate refused and every foreign key intact.
func TestKeyCollationRestMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx, exec, m16 := schemaBefore(t, "m16_", 16)
	// Keys whose order differs between byte order and a linguistic one,
	// some not ASCII.
	exec(`INSERT INTO processed_effects (tenant_id, effect_key, provider, transition, order_ref, payment_ref, event_id, event_type, event_at, outcome)
SELECT 't1', encode(sha256(g::text::bytea), 'hex'), 'stripe', 'order.paid',
       CASE WHEN g % 3 = 0 THEN 'Pedido-' WHEN g % 3 = 1 THEN 'pedido-' ELSE 'ação-' END || g,
       'pi_' || g, 'evt_' || g, 'payment_intent.succeeded', now(), 'applied' FROM generate_series(1, 300) g`)
	exec(`INSERT INTO orders (tenant_id, order_ref, status, last_event_at, last_effect_key)
SELECT tenant_id, order_ref, 'paid', now(), effect_key FROM processed_effects`)
	exec(`INSERT INTO payment_notifications (tenant_id, effect_key, order_ref, action, idem_key)
SELECT tenant_id, effect_key, order_ref, 'whatsapp.send_template', 'k' || order_ref FROM processed_effects`)
	exec(`INSERT INTO idempotency_requests (tenant_id, operation, idem_key, fingerprint, status, response_status, expires_at)
SELECT 't1', 'POST /cobranças', order_ref, '\x00', 'done', 201, now() + interval '1 day' FROM orders`)
	before, defs := indexOrder(ctx, t, tx)
	applyRewritingNothing(t, tx, exec, m16, "idempotency_requests", "processed_effects", "orders", "payment_notifications",
		"stale_events", "messages", "agent_turns", "inbound_ignored", "conversations", "model_calls", "model_journal",
		"payment_webhook_log", "console_operators", "console_sessions", "console_audit")
	after, defsAfter := indexOrder(ctx, t, tx)
	for table, o := range before {
		if after[table] != o {
			t.Errorf("%s: indexes in the order %s, were %s", table, after[table], o)
		}
	}
	for index, d := range defs {
		if defsAfter[index] != d {
			t.Errorf("%s: %q, was %q", index, defsAfter[index], d)
		}
	}
	if len(after) != len(before) || len(defsAfter) != len(defs) {
		t.Errorf("%d tables with %d indexes, were %d with %d", len(after), len(defsAfter), len(before), len(defs))
	}
	checkKeysCollateC(ctx, t, tx)
	forceIndexScans(exec)
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM processed_effects e
WHERE EXISTS (SELECT 1 FROM processed_effects k WHERE k.tenant_id = e.tenant_id AND k.effect_key = e.effect_key)
  AND EXISTS (SELECT 1 FROM processed_effects p WHERE p.payment_ref = e.payment_ref)
  AND EXISTS (SELECT 1 FROM processed_effects o WHERE o.order_ref = e.order_ref)
  AND EXISTS (SELECT 1 FROM orders r WHERE r.tenant_id = e.tenant_id AND r.order_ref = e.order_ref AND r.last_effect_key = e.effect_key)
  AND EXISTS (SELECT 1 FROM payment_notifications m WHERE m.tenant_id = e.tenant_id AND m.effect_key = e.effect_key)
  AND EXISTS (SELECT 1 FROM idempotency_requests q WHERE q.tenant_id = e.tenant_id AND q.operation = 'POST /cobranças' AND q.idem_key = e.order_ref)`).Scan(&n); err != nil || n != 300 {
		t.Fatalf("after 016: %d of 300 effects found through the indexes, %v", n, err)
	}
	checkRefused(ctx, t, tx, "after 016",
		`INSERT INTO processed_effects (tenant_id, effect_key, provider, transition, order_ref, payment_ref, event_id, event_type, event_at, outcome)
VALUES ('t1', encode(sha256('7'::bytea), 'hex'), 'stripe', 'order.paid', 'x', 'y', 'z', 'w', now(), 'applied')`,
		`INSERT INTO idempotency_requests (tenant_id, operation, idem_key, fingerprint, status, response_status, expires_at)
VALUES ('t1', 'POST /cobranças', 'ação-2', '\x00', 'done', 201, now())`,
		// A notification of no effect: the foreign key still holds.
		`INSERT INTO payment_notifications (tenant_id, effect_key, order_ref, action, idem_key)
VALUES ('t1', repeat('0', 64), 'x', 'whatsapp.send_template', 'k')`)
}

// checkRefused fails the test for each statement the server accepts,
// undoing each one's effect (a savepoint around it) so that the
// transaction goes on either way.
func checkRefused(ctx context.Context, t *testing.T, tx pgx.Tx, when string, stmts ...string) {
	t.Helper()
	for _, stmt := range stmts {
		if _, err := tx.Exec(ctx, `SAVEPOINT refused`); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, stmt); err == nil {
			t.Errorf("%s this went in: %.60s", when, stmt)
		}
		if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT refused`); err != nil {
			t.Fatal(err)
		}
	}
}

// forceIndexScans makes the rest of the transaction read through indexes,
// so that a row an index has lost is not found another way.
func forceIndexScans(exec func(sql string)) {
	exec(`SET LOCAL enable_seqscan = off`)
	exec(`SET LOCAL enable_bitmapscan = off`)
}

// indexOrder lists each table's indexes of the current schema in the
// order they were made (by OID), and each index's definition.
func indexOrder(ctx context.Context, t *testing.T, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) (order, defs map[string]string) {
	t.Helper()
	rows, err := q.Query(ctx, `SELECT t.relname, c.relname, pg_get_indexdef(c.oid)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid
WHERE t.relnamespace = current_schema()::regnamespace ORDER BY c.oid`)
	if err != nil {
		t.Fatal(err)
	}
	order, defs = map[string]string{}, map[string]string{}
	var table, index, def string
	if _, err := pgx.ForEachRow(rows, []any{&table, &index, &def}, func() error {
		order[table] += index + " "
		defs[index] = def
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return order, defs
}
