package executor_test

import (
	"context"
	"testing"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// The plans a connection caches for the executor's statements are made
// once, from the statistics of the moment: on a fresh deployment, tables
// no VACUUM or ANALYZE has visited yet. Each of those generic plans must
// read only the rows its statement names (index conditions on every key
// column of the index it uses), or it gets slower with every row the
// tables gain, for as long as the connection lives, or until an ANALYZE
// of the table replaces it (never, on a server with autovacuum off).
//
// Fenced statements used to say status = 'started'. That matches the
// predicate of actions_started_lease_idx, and their cached plans read that
// whole index, every started lease and every entry completions leave dead
// in it: in the benchmark at 32 callers, most of the server's time went
// there (perf: bitmap and index scans), and a run's rate fell as its
// tables grew. They now say lease_until IS NOT NULL (see ActionComplete).
//
// Tables vacuumed while empty are another state, where the planner sees
// no rows at all and picks among whole-index scans; TestPlansSurviveEmptyTables
// covers that state's sequential scans only.
func TestGenericPlansReadWhatTheyName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.Schema(t, &pgtest.Opts{MaxConns: 1})
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn := c.Hijack() // it keeps plan_cache_mode forced: not back to the pool
	defer conn.Close(ctx)
	statements := []struct{ name, sql string }{
		{"ActionClaim", executor.ActionClaim},
		{"ActionGetForIntent", executor.ActionGetForIntent},
		{"IntentActionClaimNewMany", executor.IntentActionClaimNewMany},
		{"ActionClaimMany", executor.ActionClaimMany},
		{"ActionGetForIntentMany", executor.ActionGetForIntentMany},
		{"IntentActionGetMany", executor.IntentActionGetMany},
		{"IntentActionGet", executor.IntentActionGet},
		{"IntentGetByKeyMany", executor.IntentGetByKeyMany},
		{"ActionGet", executor.ActionGet},
		{"ActionComplete", executor.ActionComplete},
		{"ActionCompleteAsync", executor.ActionCompleteAsync},
		{"ActionCompleteMany", executor.ActionCompleteMany},
		{"ActionCompleteManyAsync", executor.ActionCompleteManyAsync},
		{"ActionRelease", executor.ActionRelease},
		{"ActionHeartbeat", executor.ActionHeartbeat},
		{"ActionTakeover", executor.ActionTakeover},
		{"ActionRetake", executor.ActionRetake},
		{"ActionReconcileTake", executor.ActionReconcileTake},
		{"ActionResolve", executor.ActionResolve},
		{"intent.IntentFreeze", intent.IntentFreeze},
		{"intent.IntentFreezeMany", intent.IntentFreezeMany},
		{"intent.IntentGetMany", intent.IntentGetMany},
		{"intent.IntentGet", intent.IntentGet},
		{"intent.IntentGetByKey", intent.IntentGetByKey},
	}
	for _, s := range statements {
		problems, err := pgtest.GenericPlanProblems(ctx, conn, s.sql, []string{"intents", "actions"}, executor.GroupPlans)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", s.name, p)
		}
	}
}
