package webhook_test

import (
	"net/http"
	"testing"

	"github.com/retrysafe/retrysafe/webhook"
)

// Purge keeps what is recent and effects whose notification is not sent;
// a redelivery after its effect was purged meets the ordering guard and
// changes nothing.
func TestPurge(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.expect(paid("evt_1", "pi_1", "ord-1", t0), http.StatusOK, "processed")
	h.expect(paid("evt_2", "pi_2", "ord-2", t0), http.StatusOK, "processed")
	h.relay.Send(h.ctx, h.jobs()[0]) //nolint:errcheck // checked below through the row
	if _, err := h.pool.Exec(h.ctx, `UPDATE processed_effects SET created_at = now() - interval '31 days'`); err != nil {
		t.Fatal(err)
	}
	if _, err := h.pool.Exec(h.ctx, `UPDATE payment_webhook_log SET received_at = now() - interval '31 days' WHERE event_id = 'evt_1'`); err != nil {
		t.Fatal(err)
	}
	res, err := webhook.Purge(h.ctx, h.pool, webhook.PurgeParams{Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Log != 1 || res.Effects != 1 {
		t.Fatalf("purged %+v, want 1 log row and 1 effect (the sent one)", res)
	}
	if got, want := h.counts(), "effects=1 orders=2 stale=0 notifications=1 intents=2 jobs=2 log=1"; got != want {
		t.Fatalf("left %s, want %s", got, want)
	}
	h.expect(paid("evt_1", "pi_1", "ord-1", t0), http.StatusOK, "stale")
	if o := h.order("ord-1"); o.Status != webhook.StatusPaid {
		t.Fatalf("order %+v", o)
	}
	if n := len(h.messages()); n != 1 {
		t.Fatalf("%d messages", n)
	}
}
