package console

import (
	"testing"

	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// The console's statements that look rows up by key keep doing so in the
// plan a pooled connection caches on new tables. Left out, because they
// read more than their rows by design (an operator's page, not a hot
// path; each is bounded and named in queries.go for its owner to index):
// queueSQL (a tenant's actions in review, all of them, through
// actions_review_idx), searchReferenceSQL (a tenant's actions, by a
// reference no index holds) and nowActionsSQL (a tenant's last day). The
// reads of the webhook's and the agent's tables are their owners' and
// checked there.
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
			{Name: "searchKey", SQL: searchKeySQL},
			{Name: "actionByRef", SQL: actionByRefSQL},
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
			{Name: "searchKey", SQL: searchKeySQL},
			{Name: "actionByRef", SQL: actionByRefSQL},
		},
	})
}
