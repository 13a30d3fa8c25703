package pgtest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// planProblems prepares query on conn and explains the generic plan
// the server would cache for it: the plan a pooled connection keeps, once
// a statement has run five times, for as long as it lives. It returns what
// in that plan reads more than the rows the statement names, for each
// table whose indexes keys maps (indexKeys):
//   - a sequential scan;
//   - an index scan without an index condition (a whole index read in
//     order, which is how a plan made with enable_seqscan off reads a
//     table it believes empty);
//   - an index scan whose condition leaves out the index's leading column
//     (the whole index, filtered);
//   - an index scan whose condition names no key column but tenant_id
//     (every entry of a tenant: every key of retrysafe's schema leads with
//     it, so any index can serve a tenant condition alone).
//
// A condition on the leading columns that leaves the last ones to order
// the rows (tenant and invoice, newest first) is not a problem.
//
// settings (such as a set_config(..., true) that the caller's batches
// start with) run first, in the same transaction as EXPLAIN. conn is left
// with plan_cache_mode forced to generic plans: give it a connection of
// its own. Parameters are NULL: a generic plan does not depend on them.
//
// Plans depend on statistics: call it on the tables in the state to
// guard: never analyzed (a new deployment's tables), or vacuumed while
// empty (PlanCheck.Vacuumed). Indexes on expressions are not checked.
func planProblems(ctx context.Context, conn *pgx.Conn, query string, keys map[string][]string, scoped map[string]bool, settings []string) ([]string, error) {
	sd, err := conn.PgConn().Prepare(ctx, "", query, nil)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	var types []string
	if err := conn.QueryRow(ctx, `SELECT coalesce(array_agg(format_type(o, NULL) ORDER BY n), '{}')
		FROM unnest($1::oid[]) WITH ORDINALITY AS u(o, n)`, sd.ParamOIDs).Scan(&types); err != nil {
		return nil, err
	}
	nulls := slices.Repeat([]string{"NULL"}, len(types))
	const name = "pgtest_generic_plan"
	prep, exec := "PREPARE "+name, "EXPLAIN (FORMAT JSON) EXECUTE "+name
	if len(types) > 0 {
		prep += "(" + strings.Join(types, ", ") + ")"
		exec += "(" + strings.Join(nulls, ", ") + ")"
	}
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, prep+" AS "+query); err != nil {
		return nil, fmt.Errorf("PREPARE: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "DEALLOCATE "+name) }()
	var out []byte
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, s := range settings {
			if _, err := tx.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return tx.QueryRow(ctx, exec).Scan(&out)
	})
	if err != nil {
		return nil, fmt.Errorf("EXPLAIN: %w", err)
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(out, &plans); err != nil {
		return nil, err
	}
	var problems, unscoped []string
	for _, p := range plans {
		p.Plan.check(keys, &problems)
		p.Plan.unscoped(scoped, &unscoped)
	}
	for _, rel := range slices.Compact(unscoped) {
		problems = append(problems, fmt.Sprintf("reads %s without a condition on %s: every tenant's rows (a multi-shard query when distributed by tenant; docs/scaling.md)", rel, scopeColumn))
	}
	return problems, nil
}

// scopeColumn leads every key of retrysafe's schema.
const scopeColumn = "tenant_id"

type planNode struct {
	NodeType    string     `json:"Node Type"`
	Relation    string     `json:"Relation Name"`
	Index       string     `json:"Index Name"`
	IndexCond   string     `json:"Index Cond"`
	RecheckCond string     `json:"Recheck Cond"`
	TIDCond     string     `json:"TID Cond"`
	Filter      string     `json:"Filter"`
	Plans       []planNode `json:"Plans"`
}

// unscoped appends the relation of every scan in n that names no tenant in
// its conditions, for the tenants' tables under guard (scoped: the tables
// with a tenant_id column; a table without one, such as the console's
// operators, is not a tenant's and would be a reference table).
func (n planNode) unscoped(scoped map[string]bool, out *[]string) {
	if n.Relation != "" && strings.HasSuffix(n.NodeType, "Scan") { // not ModifyTable: an INSERT reads nothing
		if scoped[n.Relation] {
			conds := n.IndexCond + " " + n.RecheckCond + " " + n.TIDCond + " " + n.Filter
			if !mentions(conds, scopeColumn) && !slices.ContainsFunc(n.Plans, func(c planNode) bool { return mentions(c.IndexCond, scopeColumn) }) {
				*out = append(*out, n.Relation)
			}
		}
	}
	for _, c := range n.Plans {
		c.unscoped(scoped, out)
	}
}

// check appends n's problems and its children's. keys maps each index of
// the tables under guard to its key columns; a relation or index outside
// it is not checked.
func (n planNode) check(keys map[string][]string, problems *[]string) {
	switch n.NodeType {
	case "Seq Scan", "Tid Range Scan":
		if _, ok := keys[n.Relation]; ok {
			*problems = append(*problems, fmt.Sprintf("%s on %s", n.NodeType, n.Relation))
		}
	case "Index Scan", "Index Only Scan", "Bitmap Index Scan":
		cols, ok := keys[n.Index]
		if !ok {
			break
		}
		switch {
		case n.IndexCond == "":
			*problems = append(*problems, fmt.Sprintf("%s using %s without a condition: the whole index", n.NodeType, n.Index))
		case !mentions(n.IndexCond, cols[0]):
			*problems = append(*problems, fmt.Sprintf("%s using %s on %s: no condition on its leading column %s", n.NodeType, n.Index, n.IndexCond, cols[0]))
		case len(cols) > 1 && !slices.ContainsFunc(cols, func(c string) bool { return c != scopeColumn && mentions(n.IndexCond, c) }):
			*problems = append(*problems, fmt.Sprintf("%s using %s on %s: every entry of the tenant", n.NodeType, n.Index, n.IndexCond))
		}
	}
	for _, c := range n.Plans {
		c.check(keys, problems)
	}
}

// mentions reports whether cond names column as a whole word.
func mentions(cond, column string) bool {
	for i := 0; ; {
		j := strings.Index(cond[i:], column)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(column)
		if (j == 0 || !isIdent(cond[j-1])) && (end == len(cond) || !isIdent(cond[end])) {
			return true
		}
		i = end
	}
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// indexKeys maps each table in tables (of the current schema) and each of
// their indexes to the key columns: a table to none, an index to its own.
func indexKeys(ctx context.Context, conn *pgx.Conn, tables []string) (map[string][]string, error) {
	rows, err := conn.Query(ctx, `SELECT t.relname, i.relname, array_agg(a.attname ORDER BY k.n)
		FROM pg_index x
		JOIN pg_class t ON t.oid = x.indrelid
		JOIN pg_class i ON i.oid = x.indexrelid
		CROSS JOIN LATERAL unnest(x.indkey[:x.indnkeyatts - 1]) WITH ORDINALITY AS k(attnum, n)
		JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
		WHERE t.relnamespace = current_schema()::regnamespace AND t.relname = ANY($1) AND x.indexprs IS NULL
		GROUP BY t.relname, i.relname`, tables)
	if err != nil {
		return nil, err
	}
	keys := map[string][]string{}
	for _, t := range tables {
		keys[t] = nil
	}
	var table, index string
	var cols []string
	_, err = pgx.ForEachRow(rows, []any{&table, &index, &cols}, func() error {
		keys[index] = cols
		return nil
	})
	if err != nil {
		return nil, err
	}
	return keys, nil
}

// tenantTables returns which of tables (of the current schema) have a
// tenant_id column.
func tenantTables(ctx context.Context, conn *pgx.Conn, tables []string) (map[string]bool, error) {
	rows, err := conn.Query(ctx, `SELECT c.relname FROM pg_class c
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = $2 AND NOT a.attisdropped
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relname = ANY($1)`, tables, scopeColumn)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out, nil
}

// Statement is a statement to check, under the name a failure reports.
//
// Every statement must name tenant_id in the condition of each read of a
// table under guard: that keeps a tenant's reads to its own rows, and is
// what routes a statement to one shard when the tables are distributed by
// tenant_id (docs/scaling.md). CrossTenant, when set, says why this one
// reads several tenants' rows by design (a reconciler's pass over every
// expired lease).
type Statement struct{ Name, SQL, CrossTenant string }

// PlanCheck is what CheckGenericPlans checks.
type PlanCheck struct {
	Tables     []string    // the tables whose reads are checked
	Statements []Statement // each explained on its own
	Settings   []string    // run before each, in its transaction (GroupPlans)
	// Vacuumed checks the plans made on tables vacuumed and analyzed while
	// empty (statistics of no rows at all) instead of on tables no ANALYZE
	// has seen (a new deployment's).
	Vacuumed bool
	// Skip leaves statements out, by name, each with why it reads more
	// than its rows by design (an operator's listing, a purge's pass over
	// old rows). A name that is not among Statements fails the check.
	Skip map[string]string
}

// CheckGenericPlans runs planProblems for each statement on a new
// schema of its own, migrated and never analyzed (the tables' state on a
// new deployment) unless c.Vacuumed, and fails tb with every problem found.
func CheckGenericPlans(tb testing.TB, c PlanCheck) {
	tb.Helper()
	ctx := context.Background()
	pool, _ := Schema(tb, &Opts{MaxConns: 1})
	if c.Vacuumed {
		for _, t := range c.Tables {
			if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+pgx.Identifier{t}.Sanitize()); err != nil {
				tb.Fatal(err)
			}
		}
	}
	pc, err := pool.Acquire(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	conn := pc.Hijack() // it keeps plan_cache_mode forced: not back to the pool
	defer conn.Close(ctx)
	keys, err := indexKeys(ctx, conn, c.Tables)
	if err != nil {
		tb.Fatal(err)
	}
	scoped, err := tenantTables(ctx, conn, c.Tables)
	if err != nil {
		tb.Fatal(err)
	}
	known := map[string]bool{}
	for _, s := range c.Statements {
		known[s.Name] = true
	}
	for name, why := range c.Skip {
		if !known[name] || why == "" {
			tb.Errorf("Skip %q (%q): no such statement, or no reason given", name, why)
		}
	}
	for _, s := range c.Statements {
		if c.Skip[s.Name] != "" {
			continue
		}
		problems, err := planProblems(ctx, conn, s.SQL, keys, scoped, c.Settings)
		if err != nil {
			tb.Fatalf("%s: %v", s.Name, err)
		}
		for _, p := range problems {
			if s.CrossTenant != "" && strings.HasPrefix(p, "reads ") && strings.Contains(p, "without a condition on "+scopeColumn) {
				continue
			}
			tb.Errorf("%s: %s", s.Name, p)
		}
	}
}
