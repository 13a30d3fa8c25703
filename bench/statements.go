package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
)

// Where the database's time goes, per statement, when the server has
// pg_stat_statements loaded (shared_preload_libraries; the bench does not
// change the server's settings). Each point runs on a database of its own,
// so its statements are the view's rows for that database, counted from
// the end of the point's preparation.

// stmtStat is one statement's totals over a point (warm-up included, as
// the per-operation counters are).
type stmtStat struct {
	Query   string  `json:"query"`
	Calls   int64   `json:"calls"`
	TotalMs float64 `json:"total_exec_ms"`
	// PlanMs is the time spent planning it: 0 unless the server also sets
	// pg_stat_statements.track_planning = on.
	PlanMs float64 `json:"total_plan_ms,omitempty"`
	Rows   int64   `json:"rows"`
}

// statements is what pg_stat_statements saw during a point.
type statements struct {
	Ops   int64      `json:"ops"` // operations issued, warm-up included
	Stmts []stmtStat `json:"statements"`
}

// execMsPerOp is the statements' execution time per operation: the
// server's work inside statements, without commits' WAL flushes, network
// or waiting for a connection.
func (s *statements) execMsPerOp() float64 {
	return s.msPerOp(func(st stmtStat) float64 { return st.TotalMs })
}

// planMsPerOp is the statements' planning time per operation (0 without
// pg_stat_statements.track_planning): a prepared statement whose plan is
// custom is planned again at every execution, which its execution time
// does not include.
func (s *statements) planMsPerOp() float64 {
	return s.msPerOp(func(st stmtStat) float64 { return st.PlanMs })
}

// msPerOp sums ms over the statements, per operation.
func (s *statements) msPerOp(ms func(stmtStat) float64) float64 {
	var t float64
	for _, st := range s.Stmts {
		t += ms(st)
	}
	return t / float64(max(s.Ops, 1))
}

// pgssAvailable reports whether the server has pg_stat_statements loaded,
// and creates the extension in the administrative database, from which the
// view reads every database's statistics.
func (s *server) pgssAvailable(ctx context.Context) (bool, error) {
	c, err := s.admin(ctx)
	if err != nil {
		return false, err
	}
	defer c.Close(ctx)
	var libs string
	if err := c.QueryRow(ctx, `SELECT current_setting('shared_preload_libraries')`).Scan(&libs); err != nil {
		return false, err
	}
	if !slices.ContainsFunc(strings.Split(libs, ","), func(l string) bool { return strings.TrimSpace(l) == "pg_stat_statements" }) {
		return false, nil
	}
	if _, err := c.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return false, fmt.Errorf("pg_stat_statements is loaded but: %w", err)
	}
	return true, nil
}

// statementTotals reads pg_stat_statements' totals for the database's
// statements, by query text.
func (d *database) statementTotals(ctx context.Context) (map[string]stmtStat, error) {
	c, err := d.srv.admin(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT query, sum(calls)::int8, sum(total_exec_time)::float8, sum(total_plan_time)::float8, sum(rows)::int8
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1) GROUP BY query`, d.name)
	if err != nil {
		return nil, err
	}
	out := map[string]stmtStat{}
	for rows.Next() {
		var s stmtStat
		if err := rows.Scan(&s.Query, &s.Calls, &s.TotalMs, &s.PlanMs, &s.Rows); err != nil {
			return nil, err
		}
		out[s.Query] = s
	}
	return out, rows.Err()
}

// statementsSince is what ran on the database since before (a
// statementTotals), over ops operations, the costliest first.
func statementsSince(before, now map[string]stmtStat, ops int64) *statements {
	out := &statements{Ops: ops}
	for q, s := range now {
		b := before[q]
		if s.Calls-b.Calls <= 0 {
			continue
		}
		out.Stmts = append(out.Stmts, stmtStat{Query: q, Calls: s.Calls - b.Calls, TotalMs: s.TotalMs - b.TotalMs,
			PlanMs: s.PlanMs - b.PlanMs, Rows: s.Rows - b.Rows})
	}
	slices.SortFunc(out.Stmts, func(a, b stmtStat) int {
		if c := cmp.Compare(b.TotalMs, a.TotalMs); c != 0 {
			return c
		}
		return strings.Compare(a.Query, b.Query)
	})
	return out
}

// statementsTable writes, for the rows that have them, the statements that
// took the most execution time, per operation.
func (rep *report) statementsTable(sb *strings.Builder) {
	rows := rep.rowsWhere(func(r *result) bool {
		return r.Statements != nil && (r.System == "retrysafe" || r.Workload == floorName) &&
			!strings.Contains(r.Workload, ",") && !strings.Contains(r.Workload, "purge")
	})
	if len(rows) == 0 {
		return
	}
	sb.WriteString("\nStatements (pg_stat_statements, warm-up included): execution time inside statements per operation, without commits' WAL flushes and the network, planning time per operation (with pg_stat_statements.track_planning = on, else 0), and the statements that took most of the execution time:\n\n")
	sb.WriteString("| system | workload | callers | exec ms/op | plan ms/op | p50 ms | statement | calls/op | ms/call | rows/call |\n")
	sb.WriteString("|---|---|---:|---:|---:|---:|---|---:|---:|---:|\n")
	for _, r := range rows {
		st := r.Statements
		head := fmt.Sprintf("| %s | %s | %d | %.3f | %.3f | %s |", r.System, r.Workload, r.Callers, st.execMsPerOp(), st.planMsPerOp(), ms(r.P50))
		for i, s := range st.Stmts {
			if i == 3 {
				break
			}
			if i > 0 {
				head = "| | | | | | |"
			}
			q := strings.Join(strings.Fields(s.Query), " ")
			if len(q) > 70 {
				q = q[:67] + "..."
			}
			fmt.Fprintf(sb, "%s `%s` | %.2f | %.3f | %.1f |\n", head, cell(q),
				float64(s.Calls)/float64(max(st.Ops, 1)), s.TotalMs/float64(max(s.Calls, 1)), float64(s.Rows)/float64(max(s.Calls, 1)))
		}
	}
}
