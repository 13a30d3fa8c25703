package cli

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/webhook"
)

// serve's payment webhook flags and environment reach the providers: a
// provider named stripe takes the stripe preset unless told otherwise, and
// the header and metadata keys can be set per provider.
func TestPaymentFlagsPresets(t *testing.T) {
	t.Parallel()
	vars := map[string]string{
		"RETRYSAFE_PAYMENT_WEBHOOK_SECRETS":    "stripe=whsec_a,psp=whsec_b",
		"RETRYSAFE_PAYMENT_WEBHOOK_TENANTS":    "stripe=acme,psp=acme",
		"RETRYSAFE_PAYMENT_WEBHOOK_ORDER_KEYS": "stripe=pedido|order_id",
	}
	e := &Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return vars[k] }}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var p webhookFlags
	p.register(fs, e)
	if err := fs.Parse([]string{"--payment-webhook-headers", "psp=X-Psp-Signature"}); err != nil {
		t.Fatal(err)
	}
	ps, err := p.providers()
	if err != nil {
		t.Fatal(err)
	}
	s, g := ps["stripe"], ps["psp"]
	if s.Preset != webhook.PresetStripe || s.SignatureHeader != "Stripe-Signature" || strings.Join(s.OrderRefKeys, ",") != "pedido,order_id" ||
		g.Preset != webhook.PresetGeneric || g.SignatureHeader != "X-Psp-Signature" {
		t.Fatalf("stripe %+v, psp %+v", s, g)
	}
	p.presets = "psp=paypal"
	if _, err := p.providers(); err == nil || strings.Contains(err.Error(), "whsec") {
		t.Fatalf("unknown preset: %v", err)
	}
}
