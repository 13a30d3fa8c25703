package stripe_test

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/stripe"
	"github.com/retrysafe/retrysafe/tools/stripe/stripetest"
)

const (
	apiKey = "sk_test_123"
	key    = "5f0c6a2d9b1e4c7a8d3f2e1b0a9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c"
	order  = "NF-2026-000123"
)

// payload freezes the tool's fields as the executor would hand them in.
func payload(t *testing.T) derive.Payload {
	t.Helper()
	reg, err := tools.NewRegistry(mustTool(t, stripe.Config{APIKey: apiKey, BaseURL: "http://127.0.0.1:1"}))
	if err != nil {
		t.Fatal(err)
	}
	d, err := reg.Deriver([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := d.Derive("acme", stripe.Name, map[string]any{
		"customer": "cus_NffrFeUfNV2Hib", "payment_method": "pm_card_visa", "amount": "R$ 180,00", "currency": "BRL",
		tools.RefField: order,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r.Payload
}

func mustTool(t *testing.T, cfg stripe.Config) *stripe.Tool {
	t.Helper()
	tool, err := stripe.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

// Against stripe-mock, Stripe's own stand-in, through stripe-go: the
// PaymentIntent is created and confirmed with the frozen key as
// Idempotency-Key, the order and the key in metadata, and every retry of
// the key sends the same key, once per call (stripe-go's own retries are
// off).
func TestAgainstStripeMock(t *testing.T) {
	t.Parallel()
	base := stripetest.Start(t)
	rec := &recorder{}
	tool := mustTool(t, stripe.Config{APIKey: apiKey, BaseURL: base, HTTPClient: &http.Client{Transport: rec}})
	p := payload(t)
	// stripe-mock does not keep state: unlike Stripe it answers each call
	// with a new id, so the id Lookup uses is the last one seen.
	var last stripe.Response
	for i := range 2 {
		resp, err := tool.Execute(ctx(t), key, p)
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		var r stripe.Response
		if err := json.Unmarshal(resp, &r); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(r.ID, "pi_") || r.PaymentIntent != r.ID || r.Amount != 18000 || r.Currency != "brl" || r.IdempotencyKey != key {
			t.Fatalf("call %d: response %+v", i+1, r)
		}
		last = r
	}
	reqs := rec.sent()
	if len(reqs) != 2 {
		t.Fatalf("%d requests for 2 calls: %+v", len(reqs), reqs)
	}
	for _, r := range reqs {
		f := r.form
		if r.method != http.MethodPost || r.path != "/v1/payment_intents" || r.idemKey != key ||
			f.Get("amount") != "18000" || f.Get("currency") != "brl" || f.Get("customer") != "cus_NffrFeUfNV2Hib" ||
			f.Get("payment_method") != "pm_card_visa" || f.Get("confirm") != "true" || f.Get("off_session") != "true" ||
			f.Get("metadata[order_ref]") != order || f.Get("metadata[retrysafe_key]") != key {
			t.Fatalf("request %+v", r)
		}
	}

	// Lookup retrieves the PaymentIntent this process saw for the key.
	// stripe-mock answers with its fixture, which has not charged
	// (requires_payment_method): not found, so the executor calls again
	// with the key and gets what Stripe saved.
	_, err := tool.Lookup(ctx(t), key)
	if !errors.Is(err, tools.ErrNotFound) {
		t.Fatalf("lookup by id: %v", err)
	}
	if s := rec.sent()[2]; s.method != http.MethodGet || s.path != "/v1/payment_intents/"+last.ID {
		t.Fatalf("lookup sent %+v", s)
	}
	// Another process, which never saw the id, searches the metadata:
	// stripe-mock's search result is a fixture of another key, which is
	// not taken for ours.
	rec2 := &recorder{}
	fresh := mustTool(t, stripe.Config{APIKey: apiKey, BaseURL: base, HTTPClient: &http.Client{Transport: rec2}})
	if _, err := fresh.Lookup(ctx(t), key); !errors.Is(err, tools.ErrNotFound) {
		t.Fatalf("lookup by search: %v", err)
	}
	if s := rec2.sent(); len(s) != 1 || s[0].path != "/v1/payment_intents/search" ||
		s[0].query.Get("query") != "metadata['retrysafe_key']:'"+key+"'" {
		t.Fatalf("search sent %+v", s)
	}

	// A key stripe-mock does not take: invalid_request_error, definitive.
	bad := mustTool(t, stripe.Config{APIKey: "not-a-key", BaseURL: base})
	_, err = bad.Execute(ctx(t), key, p)
	if te := tools.Classify(err); te.Class != tools.ClassDefinitive || !strings.HasPrefix(te.Code, "invalid_request_error") {
		t.Fatalf("bad API key: %+v", te)
	}
}

// answer is one recorded Stripe answer.
type answer struct {
	status int
	body   string
}

// replay serves recorded answers, shaped exactly as Stripe documents them
// (https://docs.stripe.com/api/errors, /api/payment_intents/object,
// /api/pagination/search), per method and path.
func replay(t *testing.T, answers map[string]answer) string {
	t.Helper()
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		a, ok := answers[r.Method+" "+r.URL.Path]
		mu.Unlock()
		if !ok {
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if a.status == 0 { // the connection drops before the answer
			conn, _, _ := w.(http.Hijacker).Hijack()
			_ = conn.Close()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_rec")
		w.WriteHeader(a.status)
		_, _ = w.Write([]byte(a.body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func stripeError(typ, code, message string, extra string) string {
	e := `{"error":{"type":"` + typ + `","message":"` + message + `","request_log_url":"https://dashboard.stripe.com/test/logs/req_rec?t=1715335200"`
	if code != "" {
		e += `,"code":"` + code + `","doc_url":"https://stripe.com/docs/error-codes/` + strings.ReplaceAll(code, "_", "-") + `"`
	}
	return e + extra + `}}`
}

// paymentIntent is a PaymentIntent as the API returns it (the fields the tool
// reads; Stripe sends more, which stripe-go ignores the same way).
func paymentIntent(id, status, metaKey string) string {
	return `{"id":"` + id + `","object":"payment_intent","amount":18000,"amount_received":18000,"currency":"brl",` +
		`"status":"` + status + `","latest_charge":"ch_3Qrec","livemode":false,"confirmation_method":"automatic",` +
		`"capture_method":"automatic","created":1715335200,"customer":"cus_NffrFeUfNV2Hib",` +
		`"metadata":{"order_ref":"` + order + `","retrysafe_key":"` + metaKey + `"}}`
}

func search(data ...string) string {
	return `{"object":"search_result","url":"/v1/payment_intents/search","has_more":false,"next_page":null,"data":[` +
		strings.Join(data, ",") + `]}`
}

// Stripe's error types, as recorded answers, classified for the executor.
func TestErrorClasses(t *testing.T) {
	t.Parallel()
	declined := stripeError("card_error", "card_declined", "Your card has insufficient funds.",
		`,"decline_code":"insufficient_funds","payment_intent":`+paymentIntent("pi_3Qdecl", "requires_payment_method", key))
	cases := []struct {
		name   string
		answer answer
		class  tools.Class
		code   string
	}{
		{"card declined", answer{402, declined}, tools.ClassDefinitive, "card_error:card_declined:insufficient_funds"},
		{"authentication required off session", answer{402, stripeError("card_error", "authentication_required",
			"Your card was declined. This transaction requires authentication.", "")}, tools.ClassDefinitive, "card_error:authentication_required"},
		{"missing parameter", answer{400, stripeError("invalid_request_error", "parameter_missing", "Missing required param: currency.",
			`,"param":"currency"`)}, tools.ClassDefinitive, "invalid_request_error:parameter_missing"},
		{"no such customer", answer{400, stripeError("invalid_request_error", "resource_missing", "No such customer: 'cus_x'",
			`,"param":"customer"`)}, tools.ClassDefinitive, "invalid_request_error:resource_missing"},
		{"bad API key", answer{401, stripeError("invalid_request_error", "", "Invalid API Key provided: sk_test_****1234", "")},
			tools.ClassDefinitive, "invalid_request_error"},
		{"rate limit", answer{429, stripeError("invalid_request_error", "rate_limit",
			"Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits.", "")},
			tools.ClassTransient, "invalid_request_error:rate_limit"},
		{"lock timeout", answer{429, stripeError("invalid_request_error", "lock_timeout",
			"This object cannot be accessed right now because another API request or Stripe process is currently accessing it.", "")},
			tools.ClassTransient, "invalid_request_error:lock_timeout"},
		{"key in flight (409)", answer{409, stripeError("idempotency_error", "",
			"There is currently another in-progress request using this Stripe-Idempotency-Key. Please try again later.", "")},
			tools.ClassUncertain, "idempotency_error"},
		{"key with other parameters", answer{400, stripeError("idempotency_error", "idempotency_key_in_use",
			"Keys for idempotent requests can only be used with the same parameters they were first used with.", "")},
			tools.ClassUncertain, "idempotency_error:idempotency_key_in_use"},
		{"api error", answer{500, stripeError("api_error", "", "An unknown error occurred", "")}, tools.ClassUncertain, "api_error"},
		{"connection dropped", answer{}, tools.ClassUncertain, ""},
	}
	for _, c := range cases {
		base := replay(t, map[string]answer{"POST /v1/payment_intents": c.answer})
		tool := mustTool(t, stripe.Config{APIKey: apiKey, BaseURL: base})
		_, err := tool.Execute(ctx(t), key, payload(t))
		te := tools.Classify(err)
		if te == nil || te.Class != c.class || (c.code != "" && te.Code != c.code) {
			t.Errorf("%s: %+v, want %s %s", c.name, te, c.class, c.code)
			continue
		}
		if strings.Contains(te.Error(), "insufficient funds") || strings.Contains(te.Error(), apiKey) {
			t.Errorf("%s: the stored error quotes Stripe's message: %v", c.name, te)
		}
	}
	// Nothing listening: the request never left, transient.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	_, err = mustTool(t, stripe.Config{APIKey: apiKey, BaseURL: "http://" + addr}).Execute(ctx(t), key, payload(t))
	if te := tools.Classify(err); te.Class != tools.ClassTransient {
		t.Fatalf("connection refused: %+v", te)
	}
}

// An uncertain outcome settled by Lookup: the create answered 500 (which
// Stripe saves under the key, so repeating it cannot tell); the search by
// the key's metadata finds the PaymentIntent that did charge, and skips
// one of another key that the search also returned.
func TestLookupSettlesUncertain(t *testing.T) {
	t.Parallel()
	base := replay(t, map[string]answer{
		"POST /v1/payment_intents":       {500, stripeError("api_error", "", "An unknown error occurred", "")},
		"GET /v1/payment_intents/search": {200, search(paymentIntent("pi_3Qother", "succeeded", "another-key"), paymentIntent("pi_3Qours", "succeeded", key))},
	})
	tool := mustTool(t, stripe.Config{APIKey: apiKey, BaseURL: base})
	_, err := tool.Execute(ctx(t), key, payload(t))
	if te := tools.Classify(err); te.Class != tools.ClassUncertain {
		t.Fatalf("500: %+v", te)
	}
	resp, err := tool.Lookup(ctx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	var r stripe.Response
	if err := json.Unmarshal(resp, &r); err != nil {
		t.Fatal(err)
	}
	if r.PaymentIntent != "pi_3Qours" || r.LatestCharge != "ch_3Qrec" || r.Status != "succeeded" || r.IdempotencyKey != key {
		t.Fatalf("lookup %+v", r)
	}

	// A decline's error names its PaymentIntent: Lookup retrieves it by
	// that id, finds it did not charge, and says so (not found).
	base = replay(t, map[string]answer{
		"POST /v1/payment_intents": {402, stripeError("card_error", "card_declined", "Your card was declined.",
			`,"decline_code":"generic_decline","payment_intent":`+paymentIntent("pi_3Qdecl", "requires_payment_method", key))},
		"GET /v1/payment_intents/pi_3Qdecl": {200, paymentIntent("pi_3Qdecl", "requires_payment_method", key)},
	})
	tool = mustTool(t, stripe.Config{APIKey: apiKey, BaseURL: base})
	if _, err := tool.Execute(ctx(t), key, payload(t)); tools.Classify(err).Class != tools.ClassDefinitive {
		t.Fatalf("decline: %v", err)
	}
	if _, err := tool.Lookup(ctx(t), key); !errors.Is(err, tools.ErrNotFound) {
		t.Fatalf("lookup of a declined intent: %v", err)
	}

	// Stripe down while asked: the lookup fails, and nothing is concluded.
	base = replay(t, map[string]answer{
		"GET /v1/payment_intents/search": {503, stripeError("api_error", "", "Service unavailable", "")},
	})
	_, err = mustTool(t, stripe.Config{APIKey: apiKey, BaseURL: base}).Lookup(ctx(t), key)
	if err == nil || errors.Is(err, tools.ErrNotFound) {
		t.Fatalf("lookup while Stripe is down: %v", err)
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]stripe.Config{
		"no key":           {},
		"bad URL":          {APIKey: apiKey, BaseURL: "api.stripe.com"},
		"negative retries": {APIKey: apiKey, MaxNetworkRetries: -1},
	} {
		if _, err := stripe.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), apiKey) {
			t.Errorf("%s: the error quotes the key", name)
		}
	}
	tool := mustTool(t, stripe.Config{APIKey: apiKey})
	var params struct {
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(tool.Parameters(), &params); err != nil {
		t.Fatal(err)
	}
	if _, shown := params.Properties[tools.RefField]; shown || len(params.Properties) != 4 || !tool.Idempotent() {
		t.Fatalf("parameters %s", tool.Parameters())
	}
}
