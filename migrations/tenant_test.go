package migrations_test

import (
	"context"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// Every table of retrysafe's is a tenant's table: it has a tenant_id
// column, and every primary key and unique index contains it. That keeps a
// read by key scoped to one tenant, and is what lets the schema be
// distributed by tenant_id (Citus requires the distribution column in
// every primary key and unique constraint; docs/scaling.md). River's
// tables and the migrations' own bookkeeping are not tenants' tables:
// they are listed in notTenant with the reason.
func TestTenantTablesKeyedByTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := pgtest.Schema(t, nil)

	notTenant := map[string]string{
		"schema_migrations": "the migrator's own bookkeeping, one row per file",
		"console_operators": "operators are people, each scoped to several tenants (a reference table when distributed)",
		"console_sessions":  "an operator's sessions, like the operator (a reference table when distributed)",
	}
	rows, err := pool.Query(ctx, `
SELECT c.relname,
       EXISTS (SELECT 1 FROM pg_attribute a
               WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND c.relname NOT LIKE 'river\_%'
ORDER BY 1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		var has bool
		if err := rows.Scan(&name, &has); err != nil {
			t.Fatal(err)
		}
		if _, skip := notTenant[name]; skip {
			continue
		}
		tables = append(tables, name)
		if !has {
			t.Errorf("table %s has no tenant_id column", name)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(tables) < 10 {
		t.Fatalf("found only %d tables in %s (%v): the test is not looking at the migrated schema", len(tables), schema, tables)
	}

	idx, err := pool.Query(ctx, `
SELECT t.relname, i.relname, x.indisprimary,
       EXISTS (SELECT 1 FROM unnest(x.indkey) k
               JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k
               WHERE a.attname = 'tenant_id')
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = $1 AND x.indisunique AND t.relname = ANY($2)
ORDER BY 1, 2`, schema, tables)
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	checked := 0
	for idx.Next() {
		var table, index string
		var primary, has bool
		if err := idx.Scan(&table, &index, &primary, &has); err != nil {
			t.Fatal(err)
		}
		checked++
		if !has {
			kind := "unique index"
			if primary {
				kind = "primary key"
			}
			t.Errorf("%s of %s (%s) does not contain tenant_id", kind, table, index)
		}
	}
	if err := idx.Err(); err != nil {
		t.Fatal(err)
	}
	if checked < len(tables) {
		t.Fatalf("checked %d unique indexes for %d tables: some table has no primary key (%s)", checked, len(tables), strings.Join(tables, ", "))
	}
}
