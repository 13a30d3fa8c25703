package console

import (
	"testing"

	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// The console's statements that look rows up by key keep doing so in the
// plan a pooled connection caches on new tables. Left out, because they
// read more than their rows by design (an operator's page, not a hot
// path; each is bounded and named in queries.go for its owner to index;
// the ledger's reads are checked in internal/ledger): nowAgentSQL and nowWebhookSQL
// (a tenant's last day), turnsSQL (a tenant's agent turns, by a key inside
// their tools), modelsInWindowSQL, effectsSQL's lookup by payment
// reference, and modelCallsSQL (model_calls has no index on source_ref:
// the cached plan reads the tenant's calls; the agent should add one).
func TestGenericPlansReadWhatTheyName(t *testing.T) {
	t.Parallel()
	pgtest.CheckGenericPlans(t, pgtest.PlanCheck{
		Tables: []string{"console_operators", "console_sessions", "console_audit", "actions", "intents", "model_calls"},
		Statements: []pgtest.Statement{
			{Name: "operatorByToken", SQL: operatorByTokenSQL},
			{Name: "operatorExists", SQL: operatorExistsSQL},
			{Name: "sessionGet", SQL: sessionGetSQL},
			{Name: "sessionInsert", SQL: sessionInsertSQL},
			{Name: "sessionPurge", SQL: sessionPurgeSQL},
			{Name: "sessionDelete", SQL: sessionDeleteSQL},
			{Name: "auditByKey", SQL: auditByKeySQL},
			{Name: "auditLatestLookup", SQL: auditLatestLookupSQL},
		},
		// sessionPurge runs after plansOff; the others do not need it.
		Settings: []string{plansOff},
	})
	pgtest.CheckGenericPlans(t, pgtest.PlanCheck{
		Tables: []string{"console_operators", "console_sessions", "console_audit", "actions", "intents"},
		Statements: []pgtest.Statement{
			{Name: "operatorByToken", SQL: operatorByTokenSQL},
			{Name: "sessionGet", SQL: sessionGetSQL},
			{Name: "auditByKey", SQL: auditByKeySQL},
			{Name: "auditLatestLookup", SQL: auditLatestLookupSQL},
		},
	})
}
