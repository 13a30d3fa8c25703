package webhook_test

import (
	"testing"

	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// Each statement's generic plan, made on tables no ANALYZE has seen (a new
// deployment, or any time on a server with autovacuum off), must look its
// rows up by key: that plan is what a pooled connection keeps. Before
// migration 007 and notificationSettle's sent_at IS NULL, marking an
// effect stale went through the order index (it led with tenant_id), and
// settling a notification through the open-notifications index. Every
// statement the package declares is checked but the reads and purges
// below, which scan by design.
func TestGenericPlansReadWhatTheyName(t *testing.T) {
	t.Parallel()
	listing := "an operator's listing of a tenant's rows, bounded by its limit"
	purge := "the purge walks every tenant's old rows, oldest first, in batches"
	pgtest.CheckGenericPlans(t, pgtest.PlanCheck{
		Tables:     []string{"orders", "processed_effects", "stale_events", "payment_notifications", "payment_webhook_log", "intents", "actions"},
		Statements: pgtest.SourceStatements(t, "*.go"),
		Skip: map[string]string{
			"notificationList":   listing,
			"staleEventList":     listing,
			"logList":            listing,
			"logPurge":           purge,
			"effectPurge":        purge,
			"effectListByOrder":  "the console's page: the effects of a payment, by a reference no index leads with the tenant",
			"logCountDuplicates": "the console's counts of a tenant's last day",
			"logCountVerdicts":   "the lab's census of a tenant's deliveries",
			"effectCount":        "the lab's progress: a tenant's effects and pending receipts, counted",
			"effectListNotified": "tests' read of every effect a purge left",
		},
	})
}
