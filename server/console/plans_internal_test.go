package console

import (
	"testing"

	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// The console's statements that look rows up by key keep doing so in the
// plan a pooled connection caches on new tables. The reads of the
// ledger's, the webhook's and the agent's tables are their owners' and
// checked there (internal/ledger, webhook, agent).
func TestGenericPlansReadWhatTheyName(t *testing.T) {
	t.Parallel()
	pgtest.CheckGenericPlans(t, pgtest.PlanCheck{
		Tables: []string{"console_operators", "console_sessions", "console_audit", "actions", "intents"},
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
