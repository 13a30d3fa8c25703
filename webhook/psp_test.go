package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/sandbox/psp"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/webhook"
)

// The whole loop against the sandbox PSP, with its own signature and event
// shape: the executor charges an invoice through pix.charge, the PSP posts
// its signed payment_intent.succeeded (the first attempt is answered 503,
// so it redelivers), the webhook finds the order through the frozen
// intent's key, marks it paid once, and the relay sends one receipt to the
// customer's WhatsApp conversation.
func TestSandboxPSPEndToEnd(t *testing.T) {
	t.Parallel()
	var pspHandler atomic.Value
	pspFront := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pspHandler.Load().(http.Handler).ServeHTTP(w, r)
	}))
	t.Cleanup(pspFront.Close)
	h := newHarness(t, &harnessOpts{pspURL: pspFront.URL})
	h.setClock(time.Time{}) // the PSP signs with the real clock

	var attempts atomic.Int32
	var mu sync.Mutex
	var verdicts []string
	hookSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // a receiver that was down
			return
		}
		rec := httptest.NewRecorder()
		h.mux.ServeHTTP(rec, r)
		mu.Lock()
		verdicts = append(verdicts, reply{rec.Code, rec.Body.String()}.verdict())
		mu.Unlock()
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(hookSrv.Close)

	pspPool, pspSchema := pgtest.Schema(t, nil)
	if err := psp.Migrate(h.ctx, pspPool, pspSchema); err != nil {
		t.Fatal(err)
	}
	srv, err := psp.New(pspPool, psp.Config{
		WebhookURL: hookSrv.URL + webhook.PathPrefix + provider, WebhookSecret: secret,
		WebhookBackoff: 20 * time.Millisecond, WebhookPoll: 20 * time.Millisecond, Logger: quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	pspHandler.Store(srv.Handler())
	runCtx, stop := context.WithCancel(h.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { srv.Run(runCtx) })
	t.Cleanup(func() { stop(); wg.Wait() })

	h.conversation("5511912345678", "cust-1", "INV-2024-0042")
	charge := func(amount any) *executor.Outcome {
		out, err := h.ex.Execute(h.ctx, executor.Call{Tenant: tenant, Ref: "INV-2024-0042", Action: tools.PixChargeName,
			Fields: map[string]any{"customer_id": "cust-1", "amount": amount, "pix_key": "529.982.247-25"}}, nil)
		if err != nil || out.Status != executor.StatusCompleted {
			t.Fatalf("charge: %+v, %v", out, err)
		}
		return out
	}
	first := charge("180,00")
	waitFor(t, 20*time.Second, "the PSP's event to be processed", func() bool {
		o, err := webhook.GetOrder(h.ctx, h.pool, tenant, "INV-2024-0042")
		return err == nil && o.Status == webhook.StatusPaid
	})
	// The agent's redelivered message charges again: a replay, no new
	// charge, hence no new event.
	if again := charge(180); !again.Replayed || again.Key != first.Key {
		t.Fatalf("second charge %+v", again)
	}
	h.relayAll()
	msgs := h.messages()
	if len(msgs) != 1 || msgs[0].To != "+5511912345678" || msgs[0].Template != "pagamento_confirmado" {
		t.Fatalf("messages %+v", msgs)
	}
	mu.Lock()
	defer mu.Unlock()
	if attempts.Load() != 2 || len(verdicts) != 1 || verdicts[0] != "processed" {
		t.Fatalf("%d deliveries, verdicts %v", attempts.Load(), verdicts)
	}
	if got, want := h.counts(), "effects=1 orders=1 stale=0 notifications=1 intents=2 jobs=1 log=1"; got != want {
		t.Fatalf("stored %s, want %s", got, want)
	}
}
