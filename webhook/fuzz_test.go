package webhook_test

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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

// Whatever header arrives, Verify neither panics nor accepts a header that
// carries no valid signature of the body; what Sign and stripe-go produce
// is accepted.
func FuzzVerify(f *testing.F) {
	body := []byte(`{"id":"evt_1"}`)
	now := time.Unix(1_700_000_000, 0)
	good := webhook.Sign("s3cret", now, body)
	for _, s := range []string{good, "", "t=1700000000", "t=1700000000,v1=", "t=1700000000,v1=zz,v1=" + good[len("t=1700000000,v1="):],
		"t=1,t=2,v1=00", "v1=" + good[len("t=1700000000,v1="):] + ",t=1700000000", strings.Repeat("v1=00,", 20)} {
		f.Add(s, body)
	}
	f.Fuzz(func(t *testing.T, header string, b []byte) {
		if webhook.Verify("s3cret", header, b, 5*time.Minute, now) != nil {
			return
		}
		// Accepted: one v1 entry is the body's MAC under the header's t.
		var ts string
		var sigs []string
		for part := range strings.SplitSeq(header, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
			switch k {
			case "t":
				ts = v
			case "v1":
				sigs = append(sigs, strings.ToLower(v))
			}
		}
		unix, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			t.Fatalf("accepted %q without a timestamp", header)
		}
		want := webhook.Sign("s3cret", time.Unix(unix, 0), b)
		if _, mac, _ := strings.Cut(want, ",v1="); !slices.Contains(sigs, mac) {
			t.Fatalf("accepted %q for %q", header, b)
		}
	})
}
