package ledger

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// The plans a connection caches for the ledger's statements are made
// once, from the statistics of the moment: on a fresh deployment, tables
// no VACUUM or ANALYZE has visited yet. Each of those generic plans must
// read only the rows its statement names (pgtest.CheckGenericPlans says
// what does not), or it gets slower with every row the tables gain, for
// as long as the connection lives or until an ANALYZE of the table
// replaces it (never, on a server with autovacuum off).
//
// Fenced statements used to say status = 'started'. That matches the
// predicate of actions_started_lease_idx, and their cached plans read that
// whole index, every started lease and every entry completions leave dead
// in it: in the benchmark at 32 callers, most of the server's time went
// there (perf: bitmap and index scans), and a run's rate fell as its
// tables grew. They now say lease_until IS NOT NULL (see actionComplete).
//
// Tables vacuumed while empty are another state, where the planner sees
// no rows at all and picks among whole-index scans;
// executor's TestPlansSurviveEmptyTables covers that state's sequential
// scans only.
func TestGenericPlansReadWhatTheyName(t *testing.T) {
	t.Parallel()
	pgtest.CheckGenericPlans(t, pgtest.PlanCheck{
		Tables:     []string{"intents", "actions"},
		Settings:   []string{groupPlans},
		Statements: executorStatements,
	})
	// Run without groupPlans: by the intent store, the payment webhooks
	// and the console's search, and the executor's fresh claims.
	pgtest.CheckGenericPlans(t, pgtest.PlanCheck{
		Tables:     []string{"intents", "actions"},
		Statements: append(slices.Clone(unplanned), freshClaims...),
	})
	pgtest.CheckGenericPlans(t, pgtest.PlanCheck{
		Tables:     []string{"intents", "actions"},
		Settings:   []string{completePlans},
		Statements: lonePlanned,
	})
	pgtest.CheckGenericPlans(t, pgtest.PlanCheck{
		Tables:     []string{"intents", "actions"},
		Settings:   []string{completeGroupPlans},
		Statements: completeGroupPlanned,
	})
}

// completeGroupPlanned are the completions groups' statements, which run
// behind completeGroupPlans instead of groupPlans: behind groupPlans, their
// generic plan on tables vacuumed empty (and on a new table of a few rows,
// as a new deployment's first completions find it) reads the whole primary
// key per group, and a connection keeps it.
var completeGroupPlanned = []pgtest.Statement{
	{Name: "actionCompleteMany", SQL: actionCompleteMany},
	{Name: "actionCompleteManyAsync", SQL: actionCompleteManyAsync},
}

// lonePlanned are the statements a lone call runs behind completePlans
// instead of groupPlans.
var lonePlanned = []pgtest.Statement{
	{Name: "actionCompleteAsync", SQL: actionCompleteAsync},
}

// freshClaims are the executor's statements that run without groupPlans
// before them (see actionClaimNewTail): their plans read no table, so the
// server's own settings cannot make them read more.
var freshClaims = []pgtest.Statement{
	{Name: "intentActionClaimNewMany", SQL: intentActionClaimNewMany},
	{Name: "intentActionClaimNew", SQL: intentActionClaimNew},
}

// The fresh claims run no query but their own, so nothing is planned for
// them without groupPlans: no trigger fires when they insert (a foreign
// key from actions to intents would be one, whose check the backend plans
// and caches; on tables vacuumed empty, planned under the server's
// settings, such a check was a sequential scan of the parent table, kept
// as the table grew). Adding a foreign key or a trigger to either table
// means putting groupPlans back before them.
func TestFreshClaimsFireNoTrigger(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t, nil)
	var fired []string
	rows, err := pool.Query(context.Background(), `SELECT tgrelid::regclass::text || ' ' || tgname FROM pg_trigger
		WHERE tgrelid IN ('intents'::regclass, 'actions'::regclass) AND tgtype & 4 <> 0`) // TRIGGER_TYPE_INSERT
	if err != nil {
		t.Fatal(err)
	}
	var tg string
	if _, err := pgx.ForEachRow(rows, []any{&tg}, func() error { fired = append(fired, tg); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(fired) > 0 {
		t.Fatalf("triggers fire on insert into the fresh claims' tables: %v", fired)
	}
}

// executorStatements are the statements the executor runs under
// groupPlans, and the intent store's freeze and reads.
var executorStatements = []pgtest.Statement{
	{Name: "actionClaim", SQL: actionClaim},
	{Name: "actionGetForIntent", SQL: actionGetForIntent},
	{Name: "actionClaimMany", SQL: actionClaimMany},
	{Name: "actionGetForIntentMany", SQL: actionGetForIntentMany},
	{Name: "intentActionGetMany", SQL: intentActionGetMany},
	{Name: "intentActionGet", SQL: intentActionGet},
	{Name: "intentGetByKeyMany", SQL: intentGetByKeyMany},
	{Name: "actionGet", SQL: actionGet},
	{Name: "actionComplete", SQL: actionComplete},
	{Name: "actionCompleteAsync", SQL: actionCompleteAsync},
	{Name: "actionRelease", SQL: actionRelease},
	{Name: "actionHeartbeat", SQL: actionHeartbeat},
	{Name: "actionTakeover", SQL: actionTakeover},
	{Name: "actionRetake", SQL: actionRetake},
	{Name: "actionReconcileTake", SQL: actionReconcileTake,
		CrossTenant: "the reconciler takes every tenant's expired leases, oldest first, in one pass"},
	{Name: "actionResolve", SQL: actionResolve},
	{Name: "intentFreeze", SQL: intentFreeze},
	{Name: "intentFreezeMany", SQL: intentFreezeMany},
	{Name: "intentGetMany", SQL: intentGetMany},
	{Name: "intentGet", SQL: intentGet},
	{Name: "intentGetByKey", SQL: intentGetByKey},
}

// unplanned are the reads that other packages' callers run on their own
// connections, without groupPlans. Left out, because they read more than
// their rows by design (an operator's page, not a hot path):
// actionListReview (a tenant's actions in review, all of them, through
// actions_review_idx), actionListByReference (a tenant's actions, by a
// reference no index holds), actionCountRecent (a tenant's last day) and
// actionReviewCount (every tenant's actions in review, for /metrics).
var unplanned = []pgtest.Statement{
	{Name: "intentGet", SQL: intentGet},
	{Name: "intentGetByKey", SQL: intentGetByKey},
	{Name: "actionGet", SQL: actionGet},
	{Name: "actionRefByPayment", SQL: actionRefByPayment},
	{Name: "intentActionListByRef", SQL: intentActionListByRef},
}

// On tables vacuumed while empty the planner believes they hold no rows,
// and any index scan looks as cheap as a lookup. The statements below
// still look their rows up by key there. The reconciler's take used to
// join its locked rows back on the key, planned there as a read of the
// whole primary key per pass; it now finds them by ctid.
//
// Left out (readMore), because in this state their plans do read more:
// the reads of an intent by (tenant, ref, action), which take the key index
// on tenant_id. The two indexes cost exactly the same here and the
// newer one's path is kept, so which lookups read more is decided by the
// order the indexes were made in: migration 014 makes the key index last,
// so that the lookups by key below keep reading one entry
// (migrations.TestIntentKeyIndexIsNewest); autovacuum's next ANALYZE
// replaces them. README.md says so.
//
// The completions group's join read the whole primary key here behind
// groupPlans (and on a new table of a few rows, never analyzed: a
// connection that cached it in a table's first seconds kept reading the
// whole key per group, the benchmark's slow empty side); behind
// completeGroupPlans it is a probe per element.
func TestGenericPlansOnVacuumedTables(t *testing.T) {
	t.Parallel()
	readMore := map[string]bool{
		"actionClaim": true, "actionClaimMany": true, "actionGetForIntent": true, "actionGetForIntentMany": true,
		"intentActionGet": true, "intentActionGetMany": true, "intentGet": true, "intentGetMany": true,
	}
	var checked []pgtest.Statement
	for _, s := range executorStatements {
		if !readMore[s.Name] {
			checked = append(checked, s)
		}
	}
	pgtest.CheckGenericPlans(t, pgtest.PlanCheck{
		Tables:     []string{"intents", "actions"},
		Settings:   []string{groupPlans},
		Vacuumed:   true,
		Statements: checked,
	})
	pgtest.CheckGenericPlans(t, pgtest.PlanCheck{
		Tables:     []string{"intents", "actions"},
		Vacuumed:   true,
		Statements: freshClaims,
	})
	pgtest.CheckGenericPlans(t, pgtest.PlanCheck{
		Tables:     []string{"intents", "actions"},
		Settings:   []string{completePlans},
		Vacuumed:   true,
		Statements: lonePlanned,
	})
	pgtest.CheckGenericPlans(t, pgtest.PlanCheck{
		Tables:     []string{"intents", "actions"},
		Settings:   []string{completeGroupPlans},
		Vacuumed:   true,
		Statements: completeGroupPlanned,
	})
}
