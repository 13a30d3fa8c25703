package agent_test

import (
	"testing"

	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// Each statement's generic plan, made on tables no ANALYZE has seen (a new
// deployment, or any time on a server with autovacuum off), must look its
// rows up by key: that plan is what a pooled connection keeps. Before
// migration 007, a message looked up by (tenant, id) went through the
// conversation index, which led with tenant_id, and read every message of
// the tenant; the journal's read joined model_calls by tenant. Every
// statement the package declares is checked but the reads below, which
// scan by design and are no hot path.
func TestGenericPlansReadWhatTheyName(t *testing.T) {
	t.Parallel()
	census := "the restart test's census of a tenant's rows"
	pgtest.CheckGenericPlans(t, pgtest.PlanCheck{
		Tables:     []string{"messages", "conversations", "agent_turns", "model_calls", "model_journal", "inbound_ignored"},
		Statements: pgtest.SourceStatements(t, "*.go"),
		Skip: map[string]string{
			"turnList":               census,
			"turnListAnswered":       "the restart test's poll of a batch of its messages",
			"messageListInbound":     census,
			"messageListStored":      "tests' read of what an inbound webhook kept",
			"ignoredList":            "tests' read of what an inbound webhook ignored",
			"modelCallCountBySource": census,
			"modelCallCount":         "tests' and the lab's count of one message's calls: model_calls has no index on source_ref",
			"modelCallListBySource":  "the console's page of one message's calls: no index on source_ref, bounded by the measure index's window",
			"turnListByKey":          "the console's page: a key inside a tenant's turns' tools",
			"turnCountTools":         "the console's counts of a tenant's last day",
			"modelCallListModels":    "the console's chart: the models of several tenants' window",
			"modelCallUsage":         "tokens measure: one pass over the measure index's window, every tenant",
		},
	})
}
