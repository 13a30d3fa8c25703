package webhook_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/riverschema"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/webhook"
)

// Mount the handler, and a provider that delivers one payment twice (a
// redelivery under a new event id) moves the order once and queues one
// receipt. The relay (webhook.AddWorker with a webhook.NewRelay, on the
// worker process's River client) sends it through the executor with the
// frozen key.
func ExampleHandler() {
	ctx := context.Background()
	pool, schema := examplePool() // in production: your pool, migrated (retrysafe migrate)

	// --- the wiring ---
	wa, _ := tools.NewWhatsAppTemplate(tools.HTTPConfig{BaseURL: "https://whatsapp.example.com", Token: "wa-token"})
	reg, _ := tools.NewRegistry(wa)
	deriver, _ := reg.Deriver([]byte("an HMAC secret of at least 32 bytes!"))
	intents, _ := intent.New(intent.Config{Deriver: deriver})
	queue, _ := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: schema}) // insert-only
	hook, err := webhook.New(webhook.Config{
		DB: pool, Queue: queue, Intents: intents,
		Providers: map[string]webhook.Provider{"sandbox": {Secret: "whsec_example", Tenant: "acme"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST "+webhook.Pattern, hook) // POST /webhooks/payments/{provider}
	// --- end of wiring ---

	for _, id := range []string{"evt_1", "evt_1_redelivered"} {
		body := fmt.Sprintf(`{"id":%q,"type":"payment_intent.succeeded","created":%d,"data":{"object":{
			"id":"pi_1","object":"payment_intent",
			"metadata":{"order_ref":"ord-42","customer_phone":"+5511987654321"}}}}`, id, time.Now().Unix())
		req := httptest.NewRequest(http.MethodPost, "/webhooks/payments/sandbox", strings.NewReader(body))
		req.Header.Set("Retrysafe-Signature", webhook.Sign("whsec_example", time.Now(), []byte(body)))
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	order, _ := webhook.GetOrder(ctx, pool, "acme", "ord-42")
	pending, _ := webhook.ListNotifications(ctx, pool, webhook.ListParams{Tenant: "acme", Status: webhook.NotifyPending})
	fmt.Println("order", order.Ref, order.Status, "- receipts queued:", len(pending))
	// Output:
	// 200 {"status":"processed"}
	// 200 {"status":"duplicate"}
	// order ord-42 paid - receipts queued: 1
}

// examplePool opens a pool on a fresh schema of the test database, with
// retrysafe's and River's tables.
func examplePool() (*pgxpool.Pool, string) {
	pool, schema := pgtest.Schema(testutil.ExampleTB{}, nil) // the package database is dropped at exit
	if _, err := riverschema.Migrate(context.Background(), pool, schema); err != nil {
		panic(err)
	}
	return pool, schema
}
