package webhook_test

import (
	"testing"

	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/webhook"
)

// Each statement's generic plan, made on tables no ANALYZE has seen (a new
// deployment, or any time on a server with autovacuum off), must look its
// rows up by key: that plan is what a pooled connection keeps. Before
// migration 007 and NotificationSettle's sent_at IS NULL, marking an
// effect stale went through the order index (it led with tenant_id),
// settling a notification through the open-notifications index, and
// finding a conversation by invoice had no index but the tenant's.
func TestGenericPlansReadWhatTheyName(t *testing.T) {
	t.Parallel()
	pgtest.CheckGenericPlans(t, pgtest.PlanCheck{
		Tables: []string{"conversations", "orders", "processed_effects", "stale_events", "payment_notifications", "payment_webhook_log", "intents", "actions"},
		Statements: []pgtest.Statement{
			{Name: "EffectInsert", SQL: webhook.EffectInsert},
			{Name: "EffectMarkStale", SQL: webhook.EffectMarkStale},
			{Name: "OrderTransition", SQL: webhook.OrderTransition},
			{Name: "OrderGet", SQL: webhook.OrderGet},
			{Name: "StaleEventInsert", SQL: webhook.StaleEventInsert},
			{Name: "ConversationByInvoice", SQL: webhook.ConversationByInvoice},
			{Name: "OrderByPayment", SQL: webhook.OrderByPayment},
			{Name: "PaidPaymentOfOrder", SQL: webhook.PaidPaymentOfOrder},
			{Name: "NotificationInsert", SQL: webhook.NotificationInsert},
			{Name: "NotificationSettle", SQL: webhook.NotificationSettle},
			{Name: "NotificationGet", SQL: webhook.NotificationGet},
			{Name: "LogInsert", SQL: webhook.LogInsert},
		},
	})
}
