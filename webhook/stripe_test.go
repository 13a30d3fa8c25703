package webhook_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/executor/executortest"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/tools"
	stripetool "github.com/retrysafe/retrysafe/tools/stripe"
	"github.com/retrysafe/retrysafe/tools/stripe/stripetest"
	"github.com/retrysafe/retrysafe/webhook"
)

// Events as Stripe sends them: bodies built from Stripe's published
// fixtures (testdata/stripe, where each shape is documented), under the API
// version stripe-go pins, signed by stripe-go itself.

var (
	fixturesOnce sync.Once
	fixtures     map[string]obj
)

// fixture returns a fresh copy of one of Stripe's fixture objects with
// fields overridden (a nil value deletes the field).
func fixture(t testing.TB, resource string, override obj) obj {
	t.Helper()
	fixturesOnce.Do(func() {
		b, err := os.ReadFile("testdata/stripe/fixtures3-subset.json")
		if err != nil {
			panic(err)
		}
		var f struct {
			Resources map[string]obj `json:"resources"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			panic(err)
		}
		fixtures = f.Resources
	})
	src, ok := fixtures[resource]
	if !ok {
		t.Fatalf("no fixture %q", resource)
	}
	// A deep copy: the fixture is shared by parallel tests.
	b, _ := json.Marshal(src)
	var o obj
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	for k, v := range override {
		if v == nil {
			delete(o, k)
			continue
		}
		o[k] = v
	}
	return o
}

// stripeEvent wraps object in the fixture event's envelope, as Stripe
// delivers it: api_version, livemode, pending_webhooks, request.
func stripeEvent(t testing.TB, id, typ string, created time.Time, object obj, idemKey any) []byte {
	t.Helper()
	ev := fixture(t, "event", obj{
		"id": id, "type": typ, "created": created.Unix(), "api_version": stripe.APIVersion,
		"data":    obj{"object": object},
		"request": obj{"id": "req_" + id, "idempotency_key": idemKey},
	})
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	// What stripe-go reads of it must be what was meant: a body Stripe's
	// own library would not take is no test of Stripe's shapes.
	var se stripe.Event
	if err := json.Unmarshal(b, &se); err != nil || se.Type != stripe.EventType(typ) || se.APIVersion != stripe.APIVersion {
		t.Fatalf("stripe-go reads the event as %+v, %v", se, err)
	}
	return b
}

// stripeSign signs body as Stripe does, with stripe-go, at the handler's
// clock.
func (h *harness) stripeSign(body []byte, secret string) string {
	return stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{
		Payload: body, Secret: secret, Timestamp: h.clock(),
	}).Header
}

// stripeDeliver posts body signed by stripe-go under Stripe-Signature and
// checks that stripe-go itself accepts the signature.
func (h *harness) stripeDeliver(body []byte) reply {
	h.t.Helper()
	sig := h.stripeSign(body, secret)
	if _, err := stripewebhook.ConstructEventWithOptions(body, sig, secret, stripewebhook.ConstructEventOptions{
		Tolerance: 24 * 365 * 100 * time.Hour, // the handler's clock is the test's, not stripe-go's
	}); err != nil {
		h.t.Fatalf("stripe-go refuses its own signature: %v", err)
	}
	r := h.postHeader(body, "Stripe-Signature", sig)
	if r.status != http.StatusOK {
		h.t.Fatalf("answered %d %s: Stripe would redeliver", r.status, r.body)
	}
	return r
}

func newStripeHarness(t *testing.T) *harness {
	return newHarness(t, &harnessOpts{name: "stripe", provider: webhook.Provider{Preset: webhook.PresetStripe}})
}

const (
	orderID = "NF-2026-000123"
	piID    = "pi_3QabcB7WZ01zgkW0000001"
	chID    = "ch_3QabcB7WZ01zgkW0000001"
)

// succeededIntent is payment_intent.succeeded's object for orderID: 180,00
// BRL paid, the order in metadata.order_id (not order_ref), as a merchant
// that created the PaymentIntent with its own metadata sends it.
func succeededIntent(t testing.TB, md obj) obj {
	return fixture(t, "payment_intent", obj{
		"id": piID, "amount": 18000, "amount_received": 18000, "currency": "brl", "status": "succeeded",
		"latest_charge": chID, "last_payment_error": nil, "next_action": nil, "processing": nil, "canceled_at": nil,
		"client_secret": piID + "_secret_x", "metadata": md,
	})
}

// The four events of one payment's life, as Stripe sends them under the
// current API version: one effect each where one is due, the right order
// state, and 200 every time.
func TestStripePaymentLife(t *testing.T) {
	t.Parallel()
	h := newStripeHarness(t)
	at := t0

	// 1. payment_intent.succeeded, the order in metadata.order_id.
	r := h.stripeDeliver(stripeEvent(t, "evt_1", "payment_intent.succeeded", at,
		succeededIntent(t, obj{"order_id": orderID, "customer_phone": phone}), nil))
	if r.verdict() != "processed" || h.order(orderID).Status != webhook.StatusPaid {
		t.Fatalf("payment_intent.succeeded: %s, order %+v", r.body, h.order(orderID))
	}

	// 2. invoice.payment_succeeded for the same payment, 1 s later. Under
	// 2025-03-31.basil and later the invoice has no payment_intent, no
	// charge and no paid; payments is not included in the event. It is
	// the same payment: duplicate, not stale.
	inv := fixture(t, "invoice", obj{
		"id": "in_1QabcB7WZ01zgkW0000001", "status": "paid", "amount_due": 18000, "amount_paid": 18000,
		"amount_remaining": 0, "amount_overpaid": 0, "currency": "brl", "total": 18000, "subtotal": 18000,
		"last_finalization_error": nil, "metadata": obj{"order_id": orderID},
	})
	for _, gone := range []string{"payment_intent", "charge", "paid", "payments"} {
		if _, ok := inv[gone]; ok {
			t.Fatalf("the basil invoice fixture has %q", gone)
		}
	}
	at = at.Add(time.Second)
	r = h.stripeDeliver(stripeEvent(t, "evt_2", "invoice.payment_succeeded", at, inv, nil))
	if r.verdict() != "duplicate" {
		t.Fatalf("invoice.payment_succeeded after payment_intent.succeeded: %s, want duplicate", r.body)
	}
	// invoice.paid beside it, this time with its payments included (an
	// endpoint that expands them): the payment is named, the same one.
	withPayments := maps.Clone(inv)
	withPayments["payments"] = obj{"object": "list", "has_more": false, "url": "/v1/invoice_payments",
		"data": []obj{{"id": "inpay_1", "object": "invoice_payment", "invoice": inv["id"], "is_default": true, "status": "paid",
			"amount_paid": 18000, "amount_requested": 18000, "currency": "brl", "livemode": false,
			"payment": obj{"type": "payment_intent", "payment_intent": piID}}}}
	if r = h.stripeDeliver(stripeEvent(t, "evt_3", "invoice.paid", at, withPayments, nil)); r.verdict() != "duplicate" {
		t.Fatalf("invoice.paid with its payments: %s, want duplicate", r.body)
	}

	// 3. A partial refund, 5.000 of 18.000: charge.refunded with the
	// charge's own metadata ({}), found through the payment.
	at = at.Add(time.Hour)
	ch := fixture(t, "charge", obj{
		"id": chID, "payment_intent": piID, "amount": 18000, "amount_captured": 18000, "amount_refunded": 5000,
		"captured": true, "refunded": false, "currency": "brl", "metadata": obj{},
	})
	r = h.stripeDeliver(stripeEvent(t, "evt_4", "charge.refunded", at, ch, nil))
	if r.verdict() != "processed" || h.order(orderID).Status != webhook.StatusPartiallyRefunded {
		t.Fatalf("partial refund: %s, order %+v", r.body, h.order(orderID))
	}
	// Stripe redelivers it (same event); then charge.refunded again for the
	// same refund announced under another event id: duplicates.
	if r = h.stripeDeliver(stripeEvent(t, "evt_4", "charge.refunded", at, ch, nil)); r.verdict() != "duplicate" {
		t.Fatalf("redelivered partial refund: %s", r.body)
	}
	if r = h.stripeDeliver(stripeEvent(t, "evt_4b", "charge.refunded", at, ch, nil)); r.verdict() != "duplicate" {
		t.Fatalf("partial refund under another event id: %s", r.body)
	}

	// 4. charge.dispute.created: the dispute fixture as is, metadata {},
	// payment_intent null, naming only the charge.
	at = at.Add(time.Hour)
	dp := fixture(t, "dispute", obj{"charge": chID, "amount": 13000, "currency": "brl"})
	if md, _ := dp["metadata"].(obj); len(md) != 0 || dp["payment_intent"] != nil {
		t.Fatalf("dispute fixture: metadata %v, payment_intent %v", dp["metadata"], dp["payment_intent"])
	}
	r = h.stripeDeliver(stripeEvent(t, "evt_5", "charge.dispute.created", at, dp, nil))
	if r.verdict() != "processed" || h.order(orderID).Status != webhook.StatusDisputed {
		t.Fatalf("dispute: %s, order %+v", r.body, h.order(orderID))
	}

	// One effect per change; the payment's receipt goes out once, to the
	// phone in the PaymentIntent's metadata. The refund and the dispute
	// name no recipient (the charge's and dispute's metadata are {}, and
	// no conversation has the order): no message.
	if got, want := h.counts(), "effects=3 orders=1 stale=0 notifications=1 intents=1 jobs=1 log=7"; got != want {
		t.Fatalf("stored %s, want %s", got, want)
	}
	h.relayAll()
	if msgs := h.messages(); len(msgs) != 1 || msgs[0].Template != "pagamento_confirmado" {
		t.Fatalf("messages %+v", msgs)
	}
	log, err := webhook.ListDeliveries(h.ctx, h.pool, webhook.ListParams{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	var verdicts []string
	for _, d := range log {
		if d.HTTPStatus != http.StatusOK {
			t.Fatalf("log row %+v", d)
		}
		verdicts = append(verdicts, string(d.Verdict))
	}
	if got, want := strings.Join(verdicts, " "), "processed duplicate duplicate processed duplicate duplicate processed"; got != want {
		t.Fatalf("verdicts %q, want %q", got, want)
	}
}

// A full refund is refunded; a partial refund followed by the rest is
// partially refunded, then refunded; every partial refund of one charge
// is its own effect.
func TestStripeRefunds(t *testing.T) {
	t.Parallel()
	h := newStripeHarness(t)
	h.stripeDeliver(stripeEvent(t, "evt_1", "payment_intent.succeeded", t0, succeededIntent(t, obj{"order_ref": orderID}), nil))
	refund := func(id string, at time.Time, refunded int) reply {
		ch := fixture(t, "charge", obj{"id": chID, "payment_intent": piID, "amount": 18000, "amount_captured": 18000,
			"amount_refunded": refunded, "refunded": refunded == 18000, "captured": true, "currency": "brl"})
		return h.stripeDeliver(stripeEvent(t, id, "charge.refunded", at, ch, nil))
	}
	for i, c := range []struct {
		refunded int
		verdict  string
		status   webhook.Status
	}{
		{5000, "processed", webhook.StatusPartiallyRefunded},
		{8000, "processed", webhook.StatusPartiallyRefunded},
		{18000, "processed", webhook.StatusRefunded},
	} {
		r := refund("evt_r"+itoa(i), t0.Add(time.Duration(i+1)*time.Minute), c.refunded)
		if r.verdict() != c.verdict || h.order(orderID).Status != c.status {
			t.Fatalf("refund of %d: %s, order %s", c.refunded, r.body, h.order(orderID).Status)
		}
	}
	// The first partial refund, redelivered late, after the full one: the
	// same effect as before.
	if r := refund("evt_r0", t0.Add(time.Minute), 5000); r.verdict() != "duplicate" {
		t.Fatalf("late partial: %s", r.body)
	}
	// Another event announcing an older partial total than the order's
	// last: stale, never a step back from refunded.
	if r := refund("evt_rx", t0.Add(90*time.Second), 6000); r.verdict() != "stale" || h.order(orderID).Status != webhook.StatusRefunded {
		t.Fatalf("older partial: %s, order %s", r.body, h.order(orderID).Status)
	}
}

// The order of a charge retrysafe made is found without any metadata: by
// the frozen key Stripe echoes in request.idempotency_key, and by the
// PaymentIntent and charge the stored response of the action names.
func TestStripeOrderFromRetrysafeCharge(t *testing.T) {
	t.Parallel()
	h := newStripeHarness(t)
	fr, err := h.store.Freeze(h.ctx, h.pool, intent.FreezeParams{Tenant: tenant, Ref: "ord-key", Action: "pix.charge",
		Fields: map[string]any{"customer_id": "c1", "amount": "180,00", "pix_key": "cliente@example.com", "intent_ref": "ord-key"}})
	if err != nil {
		t.Fatal(err)
	}
	pi := succeededIntent(t, obj{})
	pi["id"], pi["latest_charge"] = "pi_key", "ch_key"
	r := h.stripeDeliver(stripeEvent(t, "evt_1", "payment_intent.succeeded", t0, pi, fr.Intent.Key))
	if r.verdict() != "processed" || h.order("ord-key").Status != webhook.StatusPaid {
		t.Fatalf("by request.idempotency_key: %s", r.body)
	}

	// A charge whose payment_intent.succeeded never arrived: its refund
	// finds the order through the action retrysafe recorded when it made
	// the charge (the stripe.payment tool's response names both).
	if err := executortest.InsertCompleted(h.ctx, h.pool, executortest.Completed{
		Tenant: tenant, Key: strings.Repeat("a", 64), Ref: "ord-act", Action: "stripe.payment",
		Response: json.RawMessage(`{"payment_intent":"pi_act","latest_charge":"ch_act","status":"succeeded"}`),
	}); err != nil {
		t.Fatal(err)
	}
	ch := fixture(t, "charge", obj{"id": "ch_act", "payment_intent": nil, "amount": 18000, "amount_refunded": 18000, "refunded": true})
	if r := h.stripeDeliver(stripeEvent(t, "evt_2", "charge.refunded", t0, ch, nil)); r.verdict() != "processed" ||
		h.order("ord-act").Status != webhook.StatusRefunded {
		t.Fatalf("by the action's charge: %s", r.body)
	}
	pi2 := succeededIntent(t, obj{})
	pi2["id"], pi2["latest_charge"] = "pi_act", nil
	if r := h.stripeDeliver(stripeEvent(t, "evt_3", "payment_intent.succeeded", t0.Add(time.Minute), pi2, "not-ours")); r.verdict() != "processed" ||
		h.order("ord-act").Status != webhook.StatusPaid {
		t.Fatalf("by the action's PaymentIntent: %s", r.body)
	}
	// Another tenant's records are not searched: a PaymentIntent nobody
	// recorded, with no metadata, is recorded and answered 200.
	pi3 := succeededIntent(t, obj{})
	pi3["id"], pi3["latest_charge"] = "pi_unknown", "ch_unknown"
	if r := h.stripeDeliver(stripeEvent(t, "evt_4", "payment_intent.succeeded", t0, pi3, nil)); r.verdict() != "rejected" || r.reason() != "no_order_ref" {
		t.Fatalf("an unknown PaymentIntent: %s", r.body)
	}
}

// Stripe-Signature as Stripe sends it; during a secret roll, one v1 per
// secret; outside the tolerance, or under another header, 401.
func TestStripeSignature(t *testing.T) {
	t.Parallel()
	h := newStripeHarness(t)
	body := stripeEvent(t, "evt_1", "payment_intent.succeeded", t0, succeededIntent(t, obj{"order_id": orderID}), nil)
	now := h.clock()
	// The rolled (old) secret's signature first, then the current one's, as
	// Stripe lists them.
	roll := "t=" + itoa(int(now.Unix())) +
		",v1=" + hex.EncodeToString(stripewebhook.ComputeSignature(now, body, "whsec_old")) +
		",v1=" + hex.EncodeToString(stripewebhook.ComputeSignature(now, body, secret))
	cases := []struct {
		name, header, sig string
		status            int
	}{
		{"generic header on the stripe preset", webhook.DefaultSignatureHeader, h.stripeSign(body, secret), http.StatusUnauthorized},
		{"other secret", "Stripe-Signature", h.stripeSign(body, "whsec_other"), http.StatusUnauthorized},
		{"6 minutes old", "Stripe-Signature", stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{
			Payload: body, Secret: secret, Timestamp: now.Add(-6 * time.Minute)}).Header, http.StatusUnauthorized},
		{"v0 scheme only", "Stripe-Signature", stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{
			Payload: body, Secret: secret, Timestamp: now, Scheme: "v0"}).Header, http.StatusUnauthorized},
		{"secret roll", "Stripe-Signature", roll, http.StatusOK},
		{"4 minutes old", "Stripe-Signature", stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{
			Payload: body, Secret: secret, Timestamp: now.Add(-4 * time.Minute)}).Header, http.StatusOK},
	}
	for _, c := range cases {
		if r := h.postHeader(body, c.header, c.sig); r.status != c.status {
			t.Errorf("%s: answered %d %s, want %d", c.name, r.status, r.body, c.status)
		}
	}
	// The header name is configurable.
	h2 := newHarness(t, &harnessOpts{name: "stripe", provider: webhook.Provider{Preset: webhook.PresetStripe, SignatureHeader: "X-Relay-Signature"}})
	if r := h2.postHeader(body, "X-Relay-Signature", h2.stripeSign(body, secret)); r.status != http.StatusOK || r.verdict() != "processed" {
		t.Fatalf("configured header: %d %s", r.status, r.body)
	}
}

// Shapes retrysafe does not act on are recorded and answered 200 with a
// reason, never a 4xx that Stripe would redeliver for days.
func TestStripeShapesNotUnderstood(t *testing.T) {
	t.Parallel()
	h := newStripeHarness(t)
	cases := []struct {
		name, typ     string
		object        obj
		verdict, code string
	}{
		// An invoice's PaymentIntent under basil: no invoice field, no
		// metadata, and nobody recorded it.
		{"invoice's payment intent", "payment_intent.succeeded", succeededIntent(t, obj{}), "rejected", "no_order_ref"},
		{"dispute of an unknown charge", "charge.dispute.created", fixture(t, "dispute", nil), "rejected", "no_order_ref"},
		{"metadata not strings", "charge.refunded", fixture(t, "charge", obj{"metadata": obj{"order_id": 12}}), "rejected", "no_order_ref"},
		{"amount as a string", "charge.refunded", fixture(t, "charge", obj{"amount": "18000"}), "rejected", "object"},
		{"unmapped type", "plan.created", fixture(t, "event", nil)["data"].(obj)["object"].(obj), "ignored", "unmapped_type"},
	}
	for i, c := range cases {
		r := h.stripeDeliver(stripeEvent(t, "evt_"+itoa(i), c.typ, t0, c.object, nil))
		if r.verdict() != c.verdict || r.reason() != c.code {
			t.Errorf("%s: %s, want %s (%s)", c.name, r.body, c.verdict, c.code)
		}
	}
	// Not even JSON, but signed: recorded, 200.
	body := []byte(`{"id":"evt_x","object":"event"`)
	r := h.postHeader(body, "Stripe-Signature", h.stripeSign(body, secret))
	if r.status != http.StatusOK || r.verdict() != "rejected" || r.reason() != "json" {
		t.Fatalf("not JSON: %d %s", r.status, r.body)
	}
	if got, want := h.counts(), "effects=0 orders=0 stale=0 notifications=0 intents=0 jobs=0 log="+itoa(len(cases)+1); got != want {
		t.Fatalf("stored %s, want %s", got, want)
	}
}

// A charge retrysafe made with the stripe.payment tool (through the
// executor, against stripe-mock): Stripe's events about it carry no
// metadata the merchant set, yet find the order: the success by the frozen
// key Stripe echoes in request.idempotency_key, a later partial refund by
// the PaymentIntent the action's stored response names.
func TestStripeChargeRetrysafeMade(t *testing.T) {
	t.Parallel()
	h := newStripeHarness(t)
	tool, err := stripetool.New(stripetool.Config{APIKey: "sk_test_123", BaseURL: stripetest.Start(t)})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(tool)
	if err != nil {
		t.Fatal(err)
	}
	d, err := reg.Deriver([]byte(hmacKey))
	if err != nil {
		t.Fatal(err)
	}
	store, err := intent.New(intent.Config{Deriver: d, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(executor.Config{DB: h.pool, Intents: store, Tools: reg, Logger: quiet(),
		Lease: 10 * time.Second, Timeout: 3 * time.Second, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	out, err := ex.Execute(h.ctx, executor.Call{Tenant: tenant, Ref: "NF-2026-000777", Action: stripetool.Name, Fields: map[string]any{
		"customer": "cus_NffrFeUfNV2Hib", "payment_method": "pm_card_visa", "amount": "180,00", "currency": "BRL"}}, nil)
	if err != nil || out.Status != executor.StatusCompleted {
		t.Fatalf("charge: %+v %v", out, err)
	}
	var charged stripetool.Response
	if err := json.Unmarshal(out.Response, &charged); err != nil || charged.PaymentIntent == "" {
		t.Fatalf("stored %s: %v", out.Response, err)
	}

	// payment_intent.succeeded caused by that request: metadata as Stripe
	// would send it back is left out on purpose (a merchant's own
	// metadata keys may differ); the frozen key in request finds the order.
	pi := succeededIntent(t, obj{})
	pi["id"], pi["latest_charge"] = charged.PaymentIntent, nil
	if r := h.stripeDeliver(stripeEvent(t, "evt_1", "payment_intent.succeeded", t0, pi, out.Key)); r.verdict() != "processed" ||
		h.order("NF-2026-000777").Status != webhook.StatusPaid {
		t.Fatalf("succeeded: %s", r.body)
	}
	// A partial refund made from the Dashboard (request: another key, or
	// none), of a charge the success event did not name.
	ch := fixture(t, "charge", obj{"id": "ch_3Qdash", "payment_intent": charged.PaymentIntent, "amount": 18000,
		"amount_refunded": 5000, "refunded": false, "metadata": obj{}})
	if r := h.stripeDeliver(stripeEvent(t, "evt_2", "charge.refunded", t0.Add(time.Hour), ch, "dashboard-key")); r.verdict() != "processed" ||
		h.order("NF-2026-000777").Status != webhook.StatusPartiallyRefunded {
		t.Fatalf("partial refund: %s", r.body)
	}

	// Another charge, whose success event never came: its dispute
	// (metadata {}) finds the order through the action's stored response.
	out2, err := ex.Execute(h.ctx, executor.Call{Tenant: tenant, Ref: "NF-2026-000888", Action: stripetool.Name, Fields: map[string]any{
		"customer": "cus_NffrFeUfNV2Hib", "payment_method": "pm_card_visa", "amount": "99,90", "currency": "brl"}}, nil)
	if err != nil || out2.Status != executor.StatusCompleted {
		t.Fatalf("second charge: %+v %v", out2, err)
	}
	var charged2 stripetool.Response
	if err := json.Unmarshal(out2.Response, &charged2); err != nil {
		t.Fatal(err)
	}
	dp := fixture(t, "dispute", obj{"charge": "ch_3Qother", "payment_intent": charged2.PaymentIntent})
	body := stripeEvent(t, "evt_3", "charge.dispute.created", t0.Add(2*time.Hour), dp, nil)
	res, err := h.hook.Deliver(h.ctx, "stripe", h.stripeSign(body, secret), body)
	if err != nil || res.Verdict != webhook.VerdictProcessed || res.OrderRef != "NF-2026-000888" || res.OrderVia != "action" ||
		h.order("NF-2026-000888").Status != webhook.StatusDisputed {
		t.Fatalf("dispute of a charge whose success never came: %+v %v", res, err)
	}
}

// charge.succeeded beside payment_intent.succeeded, in either order, is the
// same payment: one effect. invoice_payment.paid is not mapped (it would
// name the invoice's id, not the order): ignored.
func TestStripeChargeSucceeded(t *testing.T) {
	t.Parallel()
	h := newStripeHarness(t)
	ch := fixture(t, "charge", obj{"id": chID, "payment_intent": piID, "amount": 18000, "amount_captured": 18000,
		"captured": true, "currency": "brl", "metadata": obj{"order_id": orderID}})
	if r := h.stripeDeliver(stripeEvent(t, "evt_1", "charge.succeeded", t0, ch, nil)); r.verdict() != "processed" {
		t.Fatalf("charge.succeeded: %s", r.body)
	}
	if r := h.stripeDeliver(stripeEvent(t, "evt_2", "payment_intent.succeeded", t0,
		succeededIntent(t, obj{"order_id": orderID}), nil)); r.verdict() != "duplicate" {
		t.Fatalf("payment_intent.succeeded after charge.succeeded: %s", r.body)
	}
	// The charge's own metadata is {} (Stripe does not copy the
	// PaymentIntent's): found through the payment, and the same effect.
	ch["metadata"], ch["id"] = obj{}, "ch_other_event_same_payment"
	if r := h.stripeDeliver(stripeEvent(t, "evt_3", "charge.succeeded", t0, ch, nil)); r.verdict() != "duplicate" {
		t.Fatalf("charge.succeeded without metadata: %s", r.body)
	}
	ip := obj{"id": "inpay_1", "object": "invoice_payment", "invoice": "in_1", "status": "paid", "amount_paid": 18000,
		"payment": obj{"type": "payment_intent", "payment_intent": piID}}
	if r := h.stripeDeliver(stripeEvent(t, "evt_4", "invoice_payment.paid", t0, ip, nil)); r.verdict() != "ignored" {
		t.Fatalf("invoice_payment.paid: %s", r.body)
	}
	if got := h.count("processed_effects"); got != 1 {
		t.Fatalf("%d effects", got)
	}
}

// Oversized references never fail a delivery (an index entry has a size
// limit, and a 500 would be redelivered for days): the charge is not
// recorded, the order and payment are refused with a reason.
func TestStripeOversizedReferences(t *testing.T) {
	t.Parallel()
	h := newStripeHarness(t)
	// Incompressible, as a real id would be: a compressed entry could fit.
	var b strings.Builder
	for i := 0; b.Len() < 5000; i++ {
		sum := sha256.Sum256([]byte(itoa(i)))
		b.WriteString(hex.EncodeToString(sum[:]))
	}
	long := "ch_" + b.String()
	pi := succeededIntent(t, obj{"order_id": orderID})
	pi["latest_charge"] = long
	if r := h.stripeDeliver(stripeEvent(t, "evt_1", "payment_intent.succeeded", t0, pi, strings.Repeat("k", 5000))); r.verdict() != "processed" {
		t.Fatalf("long latest_charge: %s", r.body)
	}
	ch := fixture(t, "charge", obj{"id": long, "payment_intent": nil, "amount": 100, "amount_refunded": 100, "metadata": obj{"order_id": strings.Repeat("o", 5000)}})
	if r := h.stripeDeliver(stripeEvent(t, "evt_2", "charge.refunded", t0, ch, nil)); r.verdict() != "rejected" {
		t.Fatalf("long order: %s", r.body)
	}
	ch["metadata"] = obj{}
	if r := h.stripeDeliver(stripeEvent(t, "evt_3", "charge.refunded", t0, ch, nil)); r.verdict() != "rejected" || r.reason() != "no_order_ref" {
		t.Fatalf("long charge: %s", r.body)
	}
}
