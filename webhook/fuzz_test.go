package webhook_test

import (
	"os"
	"testing"

	"github.com/retrysafe/retrysafe/webhook"
)

// Whatever an authenticated sender posts, parsing neither panics nor
// yields an event without its id, type and creation time, and an object's
// references are read without panicking.
func FuzzParseEvent(f *testing.F) {
	for _, s := range []string{
		`{"id":"evt_1","type":"payment_intent.succeeded","created":1700000000,"data":{"object":{"id":"pi_1","object":"payment_intent","metadata":{"order_ref":"o"}}}}`,
		`{"id":"evt_1","type":"invoice.paid","created":1700000000,"request":{"id":null,"idempotency_key":"k"},"data":{"object":{"id":"in_1","object":"invoice","payments":{"data":[{"payment":{"payment_intent":{"id":"pi_1"}}}]}}}}`,
		`{"id":"evt_1","type":"charge.refunded","created":1700000000,"request":"req_1","data":{"object":{"id":"ch_1","object":"charge","amount":18000,"amount_refunded":5000}}}`,
		`{"id":"evt_1","type":"invoice_payment.paid","created":1700000000,"data":{"object":{"id":"inpay_1","object":"invoice_payment","payment":null}}}`,
		`{"id":"evt_1","type":"t","created":1700000000,"data":{"object":{"payments":{"data":[{"payment":null}]}}}}`,
		`{"id":"evt_1"`, `[]`, `null`,
	} {
		f.Add([]byte(s))
	}
	if b, err := os.ReadFile("testdata/stripe/fixtures3-subset.json"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, raw, err := webhook.ParseEvent(body)
		if err != nil {
			return
		}
		if ev.ID == "" || ev.Type == "" || ev.Created.IsZero() {
			t.Fatalf("parsed without id, type or created: %+v", ev)
		}
		if webhook.ParseObject(ev, raw) != nil {
			return
		}
		o := ev.Object
		_, _, _, _ = o.PaymentRef(), o.ChargeRef(), o.NamesPayment(), o.PartialRefund()
		_ = o.OrderRef("order_ref", "order_id")
		if o.PartialRefund() && (*o.AmountRefunded <= 0 || *o.AmountRefunded >= *o.Amount) {
			t.Fatalf("partial refund of %d out of %d", *o.AmountRefunded, *o.Amount)
		}
	})
}
