package webhook_test

import (
	"context"
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
	ctx := context.Background()
	pool, _ := pgtest.Schema(t, &pgtest.Opts{MaxConns: 1})
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn := c.Hijack() // it keeps plan_cache_mode forced: not back to the pool
	defer conn.Close(ctx)
	tables := []string{"conversations", "orders", "processed_effects", "stale_events", "payment_notifications", "payment_webhook_log", "intents"}
	for _, s := range []struct{ name, sql string }{
		{"EffectInsert", webhook.EffectInsert},
		{"EffectMarkStale", webhook.EffectMarkStale},
		{"OrderTransition", webhook.OrderTransition},
		{"OrderGet", webhook.OrderGet},
		{"StaleEventInsert", webhook.StaleEventInsert},
		{"IntentRefByKey", webhook.IntentRefByKey},
		{"ConversationByInvoice", webhook.ConversationByInvoice},
		{"NotificationInsert", webhook.NotificationInsert},
		{"NotificationSettle", webhook.NotificationSettle},
		{"NotificationGet", webhook.NotificationGet},
		{"LogInsert", webhook.LogInsert},
	} {
		problems, err := pgtest.GenericPlanProblems(ctx, conn, s.sql, tables)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", s.name, p)
		}
	}
}
