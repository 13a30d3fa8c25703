package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/webhook"
)

// DefaultNotifier: metadata phone → WhatsApp, metadata e-mail → e-mail,
// else the conversation whose invoice is the order; disputes and orders
// with no recipient notify nobody; a recipient that breaks its rule is
// stored failed for review while the payment still applies.
func TestDefaultNotifier(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	at := t0
	deliver := func(id string, md obj, verdict string) string {
		at = at.Add(time.Minute)
		h.expect(event(id, "payment_intent.succeeded", at, obj{"id": "pi_" + id, "object": "payment_intent", "metadata": md}),
			http.StatusOK, verdict)
		return webhook.EffectKey(provider, webhook.OrderPaid, md["order_ref"].(string), "pi_"+id)
	}
	h.conversation("5511912345678", "cust-1", "INV-9")
	byPhone := deliver("e1", obj{"order_ref": "ord-1", "customer_phone": "+55 (11) 98765-4321"}, "processed")
	byMail := deliver("e2", obj{"order_ref": "ord-2", "customer_email": " Ana@Example.com "}, "processed")
	byConv := deliver("e3", obj{"order_ref": "INV-9"}, "processed")
	deliver("e4", obj{"order_ref": "ord-4"}, "processed") // nobody to tell
	bad := deliver("e5", obj{"order_ref": "ord-5", "customer_phone": "not a phone"}, "processed")
	h.expect(event("e6", "charge.dispute.created", at.Add(time.Minute), obj{"id": "dp_1", "object": "dispute",
		"payment_intent": "pi_e1", "metadata": obj{"order_ref": "ord-1", "customer_phone": phone}}), http.StatusOK, "processed")

	if got, want := h.counts(), "effects=6 orders=5 stale=0 notifications=4 intents=3 jobs=3 log=6"; got != want {
		t.Fatalf("stored %s, want %s", got, want)
	}
	n, err := webhook.GetNotification(h.ctx, h.pool, tenant, bad)
	if err != nil || n.Status != webhook.NotifyFailed || n.ErrorCode != "invalid_field:to" || n.Key != "" {
		t.Fatalf("unfreezable notification %+v, %v", n, err)
	}
	h.relayAll()
	msgs := h.messages()
	if len(msgs) != 2 || msgs[0].To != phone || msgs[1].To != "+5511912345678" {
		t.Fatalf("whatsapp messages %+v", msgs)
	}
	if got := h.mail.Records("/v1/emails"); len(got) != 1 || got[0]["to"] != "ana@example.com" {
		t.Fatalf("e-mails %+v", got)
	}
	for _, k := range []string{byPhone, byMail, byConv} {
		if n, err := webhook.GetNotification(h.ctx, h.pool, tenant, k); err != nil || n.Status != webhook.NotifySent {
			t.Fatalf("notification %+v, %v", n, err)
		}
	}
}

// A Notifier error rolls the whole delivery back (500): the provider
// redelivers and the retry starts from nothing.
func TestNotifierErrorRollsBack(t *testing.T) {
	t.Parallel()
	fail := true
	h := newHarness(t, &harnessOpts{notify: func(ctx context.Context, db webhook.DBTX, c *webhook.Change) (*webhook.Message, error) {
		if fail {
			return nil, errors.New("recipient service down")
		}
		return &webhook.Message{Action: "whatsapp.send_template", Fields: map[string]any{"to": phone, "template": "recibo"}}, nil
	}})
	body := paid("evt_1", "pi_1", "ord-1", t0)
	if r := h.post(body); r.status != http.StatusInternalServerError {
		t.Fatalf("answered %d %s, want 500", r.status, r.body)
	}
	if got := h.counts(); got != nothingStored {
		t.Fatalf("stored %s after a rollback", got)
	}
	fail = false
	h.expect(body, http.StatusOK, "processed")
	h.relayAll()
	if msgs := h.messages(); len(msgs) != 1 || msgs[0].Template != "recibo" {
		t.Fatalf("messages %+v", msgs)
	}
}
