package stripe_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/stripe"
	"github.com/retrysafe/retrysafe/tools/stripe/stripetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newExecutor runs tool under a real executor on a fresh schema.
func newExecutor(t *testing.T, tool *stripe.Tool) *executor.Executor {
	t.Helper()
	pool, _ := pgtest.Schema(t, nil)
	reg, err := tools.NewRegistry(tool)
	if err != nil {
		t.Fatal(err)
	}
	d, err := reg.Deriver([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	store, err := intent.New(intent.Config{Deriver: d, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(executor.Config{DB: pool, Intents: store, Tools: reg, Logger: log,
		Lease: 10 * time.Second, Timeout: 3 * time.Second, BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

func call(amount string) executor.Call {
	return executor.Call{Tenant: "acme", Ref: order, Action: stripe.Name, Fields: map[string]any{
		"customer": "cus_NffrFeUfNV2Hib", "payment_method": "pm_card_visa", "amount": amount, "currency": "brl"}}
}

// Through the executor, against stripe-mock: one PaymentIntent request for
// a call and its redelivery (the frozen key replays the stored outcome),
// with the frozen key as Idempotency-Key.
func TestExecutorAgainstStripeMock(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	tool := mustTool(t, stripe.Config{APIKey: apiKey, BaseURL: stripetest.Start(t), HTTPClient: &http.Client{Transport: rec}})
	ex := newExecutor(t, tool)
	out, err := ex.Execute(ctx(t), call("R$ 180,00"), nil)
	if err != nil || out.Status != executor.StatusCompleted {
		t.Fatalf("first: %+v %v", out, err)
	}
	var r stripe.Response
	if err := json.Unmarshal(out.Response, &r); err != nil || r.PaymentIntent == "" || r.IdempotencyKey != out.Key {
		t.Fatalf("stored response %s: %v", out.Response, err)
	}
	again, err := ex.Execute(ctx(t), call("180.00"), nil)
	var r2 stripe.Response
	if err == nil {
		err = json.Unmarshal(again.Response, &r2)
	}
	if err != nil || !again.Replayed || again.Key != out.Key || r2 != r {
		t.Fatalf("redelivery: %+v %s %v", again, again.Response, err)
	}
	if s := rec.sent(); len(s) != 1 || s[0].idemKey != out.Key || s[0].form.Get("metadata[order_ref]") != order {
		t.Fatalf("requests %+v", s)
	}
}

var keyQuery = regexp.MustCompile(`^metadata\['retrysafe_key'\]:'([0-9a-f]{64})'$`)

// An uncertain outcome through the executor: Stripe answers the create
// with a 500 (which it saves under the key, so repeating the request could
// not tell); the executor's next attempt asks by the key instead of
// charging again, finds the PaymentIntent, and records it. One create.
func TestExecutorSettlesUncertainByLookup(t *testing.T) {
	t.Parallel()
	var creates, searches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.Method + " " + r.URL.Path {
		case "POST /v1/payment_intents":
			creates.Add(1)
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(stripeError("api_error", "", "An unknown error occurred", "")))
		case "GET /v1/payment_intents/search":
			searches.Add(1)
			m := keyQuery.FindStringSubmatch(r.URL.Query().Get("query"))
			if m == nil {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(stripeError("invalid_request_error", "", "bad query", "")))
				return
			}
			_, _ = w.Write([]byte(search(paymentIntent("pi_3Qours", "succeeded", m[1]))))
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	ex := newExecutor(t, mustTool(t, stripe.Config{APIKey: apiKey, BaseURL: srv.URL}))
	out, err := ex.Execute(ctx(t), call("180,00"), nil)
	if err != nil || out.Status != executor.StatusCompleted || out.Attempt != 2 {
		t.Fatalf("outcome %+v %v", out, err)
	}
	var r stripe.Response
	if err := json.Unmarshal(out.Response, &r); err != nil || r.PaymentIntent != "pi_3Qours" || r.LatestCharge != "ch_3Qrec" {
		t.Fatalf("stored %s", out.Response)
	}
	if creates.Load() != 1 || searches.Load() != 1 {
		t.Fatalf("%d creates, %d searches", creates.Load(), searches.Load())
	}
}
