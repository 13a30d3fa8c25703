package webhook_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/webhook"
)

// newStore is an intent store for the built-in tools (no database needed
// to build it).
func newStore(t testing.TB) *intent.Store {
	t.Helper()
	wa, _ := tools.NewWhatsAppTemplate(tools.HTTPConfig{BaseURL: "http://127.0.0.1:1"})
	reg, err := tools.NewRegistry(wa)
	if err != nil {
		t.Fatal(err)
	}
	d, err := reg.Deriver([]byte(hmacKey))
	if err != nil {
		t.Fatal(err)
	}
	s, err := intent.New(intent.Config{Deriver: d, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVerify(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"evt_1"}`)
	now := time.Unix(1_700_000_000, 0)
	sig := webhook.Sign("s3cret", now, body)
	if want := "t=1700000000,v1="; !strings.HasPrefix(sig, want) || len(sig) != len(want)+64 {
		t.Fatalf("Sign = %q", sig)
	}
	for _, c := range []struct {
		name   string
		header string
		body   []byte
		now    time.Time
		want   error
	}{
		{"good", sig, body, now, nil},
		{"spaces", strings.ReplaceAll(sig, ",", " , "), body, now, nil},
		{"edge of tolerance", sig, body, now.Add(5 * time.Minute), nil},
		{"past tolerance", sig, body, now.Add(5*time.Minute + time.Second), webhook.ErrSignatureExpired},
		{"ahead of tolerance", sig, body, now.Add(-5*time.Minute - time.Second), webhook.ErrSignatureExpired},
		{"tampered body", sig, []byte(`{"id":"evt_2"}`), now, webhook.ErrSignature},
		{"empty", "", body, now, webhook.ErrSignature},
		{"v0 only", strings.Replace(sig, "v1=", "v0=", 1), body, now, webhook.ErrSignature},
		{"short mac", sig[:len(sig)-2], body, now, webhook.ErrSignature},
		{"negative t", "t=-1," + sig[strings.Index(sig, "v1="):], body, now, webhook.ErrSignature},
		{"too many", sig + strings.Repeat(",v1="+strings.Repeat("ab", 32), 8), body, now, webhook.ErrSignature},
	} {
		err := webhook.Verify("s3cret", c.header, c.body, 5*time.Minute, c.now)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// EffectKey never depends on the event id and tells every part apart.
func TestEffectKey(t *testing.T) {
	t.Parallel()
	k := webhook.EffectKey("sandbox", webhook.OrderPaid, "ord-1", "pi_1")
	if len(k) != 64 || strings.ToLower(k) != k {
		t.Fatalf("key %q", k)
	}
	if k != webhook.EffectKey("sandbox", webhook.OrderPaid, "ord-1", "pi_1") {
		t.Fatal("not deterministic")
	}
	seen := map[string]string{k: "base"}
	for name, other := range map[string]string{
		"provider":   webhook.EffectKey("stripe", webhook.OrderPaid, "ord-1", "pi_1"),
		"transition": webhook.EffectKey("sandbox", webhook.OrderRefunded, "ord-1", "pi_1"),
		"order":      webhook.EffectKey("sandbox", webhook.OrderPaid, "ord-2", "pi_1"),
		"payment":    webhook.EffectKey("sandbox", webhook.OrderPaid, "ord-1", "pi_2"),
		"boundary":   webhook.EffectKey("sandbox", webhook.OrderPaid, "ord-1p", "i_1"),
	} {
		if prev, dup := seen[other]; dup {
			t.Fatalf("%s collides with %s", name, prev)
		}
		seen[other] = name
	}
}

// Every event about one payment names the same payment and order.
func TestReferences(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		body          string
		order, paymnt string
	}{
		{"payment intent", `{"id":"pi_1","object":"payment_intent","invoice":"in_1"}`, "in_1", "pi_1"},
		{"invoice", `{"id":"in_1","object":"invoice","payment_intent":"pi_1","charge":"ch_1"}`, "in_1", "pi_1"},
		{"expanded refs", `{"id":"in_1","object":"invoice","payment_intent":{"id":"pi_1"},"charge":null}`, "in_1", "pi_1"},
		{"charge", `{"id":"ch_1","object":"charge","payment_intent":"pi_1","metadata":{"order_ref":"ord-1"}}`, "ord-1", "pi_1"},
		{"charge without intent", `{"id":"ch_1","object":"charge","metadata":{"order_ref":" ord-1 "}}`, "ord-1", "ch_1"},
		{"dispute", `{"id":"dp_1","object":"dispute","charge":"ch_1","metadata":{"order_ref":"ord-1"}}`, "ord-1", "ch_1"},
		{"sandbox pix charge", `{"id":"pix_1","object":"pix_charge","idempotency_key":"k","description":"retrysafe INV-1"}`, "", "pix_1"},
		{"metadata not strings", `{"id":"pi_1","object":"payment_intent","metadata":{"order_ref":7,"x":null}}`, "", "pi_1"},
		{"order_id", `{"id":"pi_1","object":"payment_intent","metadata":{"order_id":"ord-2"}}`, "ord-2", "pi_1"},
		{"order_ref first", `{"id":"pi_1","object":"payment_intent","metadata":{"order_id":"ord-2","order_ref":"ord-1"}}`, "ord-1", "pi_1"},
		{"basil invoice", `{"id":"in_1","object":"invoice","parent":{"type":"subscription_details"}}`, "in_1", "in_1"},
		{"basil invoice, payments included", `{"id":"in_1","object":"invoice","payments":{"object":"list","data":[{"object":"invoice_payment","payment":{"type":"payment_intent","payment_intent":"pi_1"}}]}}`, "in_1", "pi_1"},
		{"invoice_payment", `{"id":"inpay_1","object":"invoice_payment","invoice":"in_1","payment":{"type":"charge","charge":"ch_1"}}`, "in_1", "ch_1"},
		{"dispute of a payment", `{"id":"dp_1","object":"dispute","charge":"ch_1","payment_intent":"pi_1","metadata":{}}`, "", "pi_1"},
	}
	for _, c := range cases {
		body := []byte(`{"id":"evt_1","type":"t","created":1700000000,"data":{"object":` + c.body + `}}`)
		ev, raw, err := webhook.ParseEvent(body)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := webhook.ParseObject(ev, raw); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := ev.Object.OrderRef(webhook.StripeOrderRefKeys()...); got != c.order {
			t.Errorf("%s: order %q, want %q", c.name, got, c.order)
		}
		if got := ev.Object.PaymentRef(); got != c.paymnt {
			t.Errorf("%s: payment %q, want %q", c.name, got, c.paymnt)
		}
	}
}

// What an object says of its payment beyond its reference.
func TestObjectPayment(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body     string
		names, partial bool
		charge         string
	}{
		{"payment intent", `{"id":"pi_1","object":"payment_intent","latest_charge":"ch_1"}`, true, false, "ch_1"},
		{"expanded latest charge", `{"id":"pi_1","object":"payment_intent","latest_charge":{"id":"ch_1","object":"charge"}}`, true, false, "ch_1"},
		{"basil invoice", `{"id":"in_1","object":"invoice"}`, false, false, ""},
		{"old invoice", `{"id":"in_1","object":"invoice","payment_intent":"pi_1","charge":"ch_1"}`, true, false, "ch_1"},
		{"partial refund", `{"id":"ch_1","object":"charge","amount":18000,"amount_refunded":5000}`, true, true, "ch_1"},
		{"full refund", `{"id":"ch_1","object":"charge","amount":18000,"amount_refunded":18000}`, true, false, "ch_1"},
		{"no amounts", `{"id":"ch_1","object":"charge"}`, true, false, "ch_1"},
		{"dispute", `{"id":"dp_1","object":"dispute","charge":"ch_1"}`, true, false, "ch_1"},
	}
	for _, c := range cases {
		ev, raw, err := webhook.ParseEvent([]byte(`{"id":"evt_1","type":"t","created":1700000000,"data":{"object":` + c.body + `}}`))
		if err == nil {
			err = webhook.ParseObject(ev, raw)
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if o := ev.Object; o.NamesPayment() != c.names || o.PartialRefund() != c.partial || o.ChargeRef() != c.charge {
			t.Errorf("%s: names %v partial %v charge %q", c.name, o.NamesPayment(), o.PartialRefund(), o.ChargeRef())
		}
	}
	// request: an object since 2017-05-25, a bare id before, or null.
	for body, want := range map[string]string{
		`"request":{"id":"req_1","idempotency_key":"k1"}`: "k1",
		`"request":{"id":"req_1","idempotency_key":null}`: "",
		`"request":"req_1"`: "",
		`"request":null`:    "",
	} {
		ev, _, err := webhook.ParseEvent([]byte(`{"id":"evt_1","type":"t","created":1700000000,` + body + `,"data":{"object":{}}}`))
		if err != nil || ev.RequestKey != want {
			t.Errorf("%s: %+v %v", body, ev, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	good := webhook.Provider{Secret: "s", Tenant: "t"}
	store := newStore(t)
	if _, err := webhook.New(webhook.Config{DB: (*pgxpool.Pool)(nil), Queue: (*river.Client[pgx.Tx])(nil), Intents: store,
		Providers: map[string]webhook.Provider{"p": good}}); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for name, p := range map[string]webhook.Provider{
		"no secret":          {Tenant: "t"},
		"no tenant":          {Secret: "s"},
		"bad transition":     {Secret: "s", Tenant: "t", Events: map[string]webhook.Transition{"x": "order.lost"}},
		"negative tolerance": {Secret: "s", Tenant: "t", Tolerance: -time.Second},
		"empty account":      {Secret: "s", Accounts: map[string]string{"": "t"}},
		"unknown preset":     {Secret: "s", Tenant: "t", Preset: "paypal"},
		"bad header name":    {Secret: "s", Tenant: "t", SignatureHeader: "Stripe Signature"},
		"empty metadata key": {Secret: "s", Tenant: "t", OrderRefKeys: []string{""}},
	} {
		_, err := webhook.New(webhook.Config{DB: (*pgxpool.Pool)(nil), Queue: (*river.Client[pgx.Tx])(nil), Intents: store,
			Providers: map[string]webhook.Provider{"p": p}})
		if !errors.Is(err, webhook.ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := webhook.New(webhook.Config{Providers: map[string]webhook.Provider{"p": good}}); !errors.Is(err, webhook.ErrConfig) {
		t.Errorf("no DB: %v", err)
	}
	// The default notifier needs one of its tools; NotifyNone needs none.
	pix, _ := tools.NewPixCharge(tools.HTTPConfig{BaseURL: "http://127.0.0.1:1"})
	reg, _ := tools.NewRegistry(pix)
	d, _ := reg.Deriver([]byte(hmacKey))
	pixOnly, _ := intent.New(intent.Config{Deriver: d})
	cfg := webhook.Config{DB: (*pgxpool.Pool)(nil), Queue: (*river.Client[pgx.Tx])(nil), Intents: pixOnly,
		Providers: map[string]webhook.Provider{"p": good}}
	if _, err := webhook.New(cfg); !errors.Is(err, webhook.ErrConfig) {
		t.Errorf("default notifier without its tools: %v", err)
	}
	cfg.Notify = webhook.NotifyNone
	if _, err := webhook.New(cfg); err != nil {
		t.Errorf("NotifyNone: %v", err)
	}
	for _, name := range []string{"", "Stripe", "a/b", strings.Repeat("a", 64)} {
		if _, err := webhook.ParseProviders(name+"=s", name+"=t"); err == nil {
			t.Errorf("provider name %q accepted", name)
		}
	}
}

func TestParseProviders(t *testing.T) {
	t.Parallel()
	ps, err := webhook.ParseProviders(" sandbox=whsec_1, stripe=whsec_2 ", "sandbox=acme,stripe=globex")
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps["sandbox"].Secret != "whsec_1" || ps["stripe"].Tenant != "globex" ||
		ps["sandbox"].Tolerance != webhook.DefaultTolerance || ps["stripe"].Events["charge.refunded"] != webhook.OrderRefunded {
		t.Fatalf("providers %+v", ps)
	}
	// A provider named stripe takes the stripe preset; others the generic.
	if s, g := ps["stripe"], ps["sandbox"]; s.Preset != webhook.PresetStripe || s.SignatureHeader != "Stripe-Signature" ||
		strings.Join(s.OrderRefKeys, ",") != "order_ref,order_id" || s.Events["invoice.paid"] != webhook.OrderPaid ||
		g.Preset != webhook.PresetGeneric || g.SignatureHeader != "Retrysafe-Signature" || strings.Join(g.OrderRefKeys, ",") != "order_ref" {
		t.Fatalf("presets: stripe %+v, sandbox %+v", s, g)
	}
	ps, err = webhook.ParseProviderLists(webhook.ProviderLists{
		Secrets: "stripe=whsec_1,relay=whsec_2", Tenants: "stripe=acme,relay=acme",
		Presets: "stripe=generic,relay=stripe", Headers: "relay=X-Relay-Signature", OrderKeys: "relay=pedido | order_id",
	})
	if err != nil {
		t.Fatal(err)
	}
	if s, r := ps["stripe"], ps["relay"]; s.Preset != webhook.PresetGeneric || r.Preset != webhook.PresetStripe ||
		r.SignatureHeader != "X-Relay-Signature" || strings.Join(r.OrderRefKeys, ",") != "pedido,order_id" {
		t.Fatalf("lists: stripe %+v, relay %+v", s, r)
	}
	for name, l := range map[string]webhook.ProviderLists{
		"preset of no provider": {Secrets: "a=s", Tenants: "a=t", Presets: "b=stripe"},
		"unknown preset":        {Secrets: "a=s", Tenants: "a=t", Presets: "a=paypal"},
		"bad header":            {Secrets: "a=s", Tenants: "a=t", Headers: "a=Bad Header"},
		"empty order key":       {Secrets: "a=s", Tenants: "a=t", OrderKeys: "a=order_ref||x"},
	} {
		if _, err := webhook.ParseProviderLists(l); !errors.Is(err, webhook.ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, c := range map[string][2]string{
		"empty":          {"", "sandbox=acme"},
		"no value":       {"sandbox", "sandbox=acme"},
		"twice":          {"sandbox=a,sandbox=b", "sandbox=acme"},
		"missing tenant": {"sandbox=a,stripe=b", "sandbox=acme"},
		"missing secret": {"sandbox=a", "sandbox=acme,stripe=x"},
	} {
		_, err := webhook.ParseProviders(c[0], c[1])
		if !errors.Is(err, webhook.ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "whsec") {
			t.Errorf("%s: the error quotes a secret: %v", name, err)
		}
	}
}
