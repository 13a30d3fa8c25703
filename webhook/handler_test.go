package webhook_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/webhook"
)

// The same event delivered five times at once: one state change, one
// outbox row, one job, and (after the relay, through a real River client)
// one message; every delivery answered 200.
func TestSameEventFiveTimesInParallel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	body := paid("evt_1", "pi_1", "ord-1", t0)

	replies := make([]reply, 5)
	testutil.Together(len(replies), func(i int) { replies[i] = h.post(body) })
	verdicts := map[string]int{}
	for _, r := range replies {
		if r.status != http.StatusOK {
			t.Fatalf("a delivery answered %d %s", r.status, r.body)
		}
		verdicts[r.verdict()]++
	}
	if verdicts["processed"] != 1 || verdicts["duplicate"] != 4 {
		t.Fatalf("verdicts %v, want 1 processed and 4 duplicate", verdicts)
	}
	if got, want := h.counts(), "effects=1 orders=1 stale=0 notifications=1 intents=1 jobs=1 log=5"; got != want {
		t.Fatalf("stored %s, want %s", got, want)
	}
	if o := h.order("ord-1"); o.Status != webhook.StatusPaid || !o.LastEventAt.Equal(t0) {
		t.Fatalf("order %+v", o)
	}

	client := relayClient(t, h.pool, h.schema, h.relay, 0)
	if err := client.Start(h.ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := client.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	key := h.jobs()[0].EffectKey
	waitFor(t, 20*time.Second, "the notification to be sent", func() bool {
		n, err := webhook.GetNotification(h.ctx, h.pool, tenant, key)
		return err == nil && n.Status == webhook.NotifySent
	})
	// A sixth delivery after the message went out changes nothing.
	h.expect(body, http.StatusOK, "duplicate")
	msgs := h.messages()
	if len(msgs) != 1 || msgs[0].To != phone || msgs[0].Template != "pagamento_confirmado" {
		t.Fatalf("messages at the stand-in: %+v", msgs)
	}
	n, _ := webhook.GetNotification(h.ctx, h.pool, tenant, key)
	if msgs[0].IdempotencyKey != n.Key || n.IntentRef != key+webhook.NotifyRefSuffix {
		t.Fatalf("message key %q, notification %+v", msgs[0].IdempotencyKey, n)
	}
}

// Two distinct events announcing one payment: the second is a duplicate
// and the order is untouched.
func TestDistinctEventsSameEffect(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.expect(paid("evt_1", "pi_1", "ord-1", t0), http.StatusOK, "processed")
	before := h.order("ord-1")

	// The provider redelivers under a new event id, a minute later.
	h.expect(paid("evt_2", "pi_1", "ord-1", t0.Add(time.Minute)), http.StatusOK, "duplicate")
	// The invoice's event about the same payment (Stripe sends both).
	inv := webhook.EffectKey(provider, webhook.OrderPaid, "ord-1", "pi_1")
	h.expect(event("evt_3", "invoice.payment_succeeded", t0.Add(2*time.Minute), obj{
		"id": "in_1", "object": "invoice", "payment_intent": obj{"id": "pi_1", "object": "payment_intent"},
		"charge": "ch_1", "metadata": obj{"order_ref": "ord-1"},
	}), http.StatusOK, "duplicate")

	after := h.order("ord-1")
	if after.Status != webhook.StatusPaid || !after.UpdatedAt.Equal(before.UpdatedAt) || !after.LastEventAt.Equal(t0) {
		t.Fatalf("order changed: before %+v after %+v", before, after)
	}
	if got, want := h.counts(), "effects=1 orders=1 stale=0 notifications=1 intents=1 jobs=1 log=3"; got != want {
		t.Fatalf("stored %s, want %s", got, want)
	}
	// The effect keeps the first event's id for audit; the log has all three.
	var eventID, key string
	if err := h.pool.QueryRow(h.ctx, `SELECT event_id, effect_key FROM processed_effects`).Scan(&eventID, &key); err != nil {
		t.Fatal(err)
	}
	if eventID != "evt_1" || key != inv {
		t.Fatalf("effect %s from %s, want %s from evt_1", key, eventID, inv)
	}
	log, err := webhook.ListDeliveries(h.ctx, h.pool, webhook.ListParams{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range log {
		got = append(got, d.EventID+":"+string(d.Verdict))
		if d.EffectKey != key || d.HTTPStatus != http.StatusOK {
			t.Fatalf("log row %+v", d)
		}
	}
	if strings.Join(got, " ") != "evt_1:processed evt_2:duplicate evt_3:duplicate" {
		t.Fatalf("log %v", got)
	}
}

// The refund (created 10:02) arrives before the success it reverses
// (created 10:00): the order stays refunded and the success is recorded as
// stale. Its redelivery is then a duplicate.
func TestLateSuccessAfterRefund(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.expect(refunded("evt_r", "pi_1", "ord-1", t0.Add(2*time.Minute)), http.StatusOK, "processed")
	h.expect(paid("evt_p", "pi_1", "ord-1", t0), http.StatusOK, "stale")

	o := h.order("ord-1")
	if o.Status != webhook.StatusRefunded || !o.LastEventAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("order %+v, want refunded as of 10:02", o)
	}
	stale, err := webhook.ListStaleEvents(h.ctx, h.pool, webhook.ListParams{Tenant: tenant, OrderRef: "ord-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) != 1 || stale[0].EventID != "evt_p" || stale[0].Reason != webhook.ReasonOlder ||
		stale[0].OrderStatus != webhook.StatusRefunded || !stale[0].EventAt.Equal(t0) || stale[0].Transition != webhook.OrderPaid {
		t.Fatalf("stale events %+v", stale)
	}
	// Only the refund owes a notification.
	if got, want := h.counts(), "effects=2 orders=1 stale=1 notifications=1 intents=1 jobs=1 log=2"; got != want {
		t.Fatalf("stored %s, want %s", got, want)
	}
	h.expect(paid("evt_p", "pi_1", "ord-1", t0), http.StatusOK, "duplicate")
	h.relayAll()
	if msgs := h.messages(); len(msgs) != 1 || msgs[0].Template != "reembolso_confirmado" {
		t.Fatalf("messages %+v", msgs)
	}
}

// Paid, refunded, then paid again with another charge: three effects, the
// order paid, three notifications.
func TestPaidAgainAfterRefund(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.expect(paid("evt_1", "pi_1", "ord-1", t0), http.StatusOK, "processed")
	h.expect(refunded("evt_2", "pi_1", "ord-1", t0.Add(2*time.Minute)), http.StatusOK, "processed")
	h.expect(paid("evt_3", "pi_2", "ord-1", t0.Add(5*time.Minute)), http.StatusOK, "processed")
	if o := h.order("ord-1"); o.Status != webhook.StatusPaid || !o.LastEventAt.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("order %+v", o)
	}
	if got, want := h.counts(), "effects=3 orders=1 stale=0 notifications=3 intents=3 jobs=3 log=3"; got != want {
		t.Fatalf("stored %s, want %s", got, want)
	}
	h.relayAll()
	var got []string
	for _, m := range h.messages() {
		got = append(got, m.Template)
	}
	if strings.Join(got, ",") != "pagamento_confirmado,reembolso_confirmado,pagamento_confirmado" {
		t.Fatalf("messages %v", got)
	}
}

// A second payment of an order already paid is not applied twice: it is
// kept for review as stale (not_allowed), with no notification.
func TestSecondPaymentWhilePaid(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.expect(paid("evt_1", "pi_1", "ord-1", t0), http.StatusOK, "processed")
	h.expect(paid("evt_2", "pi_2", "ord-1", t0.Add(time.Minute)), http.StatusOK, "stale")
	stale, err := webhook.ListStaleEvents(h.ctx, h.pool, webhook.ListParams{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) != 1 || stale[0].Reason != webhook.ReasonNotAllowed || stale[0].EventID != "evt_2" {
		t.Fatalf("stale %+v", stale)
	}
	if h.count("payment_notifications") != 1 {
		t.Fatal("a refused payment queued a notification")
	}
}

// A provider sequence number outranks creation times (a clock skewed
// between the provider's machines); at an equal second the later stage
// wins whichever arrives first.
func TestOrderingGuard(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	// Sequence: the refund is event 2 of the object, the payment event 1,
	// though the payment's clock says later.
	h.expect(refunded("evt_r", "pi_1", "ord-seq", t0, "sequence", 2), http.StatusOK, "processed")
	h.expect(paid("evt_p", "pi_1", "ord-seq", t0.Add(time.Minute), "sequence", 1), http.StatusOK, "stale")
	if o := h.order("ord-seq"); o.Status != webhook.StatusRefunded || o.LastSequence == nil || *o.LastSequence != 2 {
		t.Fatalf("order %+v", o)
	}
	// Same second, refund first: the payment is stale.
	h.expect(refunded("evt_r2", "pi_2", "ord-tie", t0), http.StatusOK, "processed")
	h.expect(paid("evt_p2", "pi_2", "ord-tie", t0), http.StatusOK, "stale")
	// Same second, payment first: the refund applies.
	h.expect(paid("evt_p3", "pi_3", "ord-tie2", t0), http.StatusOK, "processed")
	h.expect(refunded("evt_r3", "pi_3", "ord-tie2", t0), http.StatusOK, "processed")
	for ref, want := range map[string]webhook.Status{"ord-tie": webhook.StatusRefunded, "ord-tie2": webhook.StatusRefunded} {
		if o := h.order(ref); o.Status != want {
			t.Fatalf("%s: %s, want %s", ref, o.Status, want)
		}
	}
	// A dispute after a refund, then the refund's late redelivery under a
	// new id: a duplicate, not a step back.
	h.expect(event("evt_d", "charge.dispute.created", t0.Add(3*time.Minute), obj{
		"id": "dp_1", "object": "dispute", "charge": "ch_pi_3", "payment_intent": "pi_3", "metadata": meta("ord-tie2"),
	}), http.StatusOK, "processed")
	h.expect(refunded("evt_r3b", "pi_3", "ord-tie2", t0), http.StatusOK, "duplicate")
	if o := h.order("ord-tie2"); o.Status != webhook.StatusDisputed {
		t.Fatalf("ord-tie2: %s, want disputed", o.Status)
	}
}

// Many distinct deliveries at once on a pool of two: each holds one
// connection, so they queue for the pool instead of deadlocking.
func TestManyDeliveriesSmallPool(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &harnessOpts{maxConns: 2})
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan string, n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			wg.Go(func() {
				// Every other event repeats its neighbour's payment: half
				// of them are duplicates of an effect in flight.
				body := paid("evt_"+itoa(i), "pi_"+itoa(i/2), "ord-"+itoa(i/2), t0)
				if r := h.post(body); r.status != http.StatusOK {
					errs <- r.body
				}
			})
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("deliveries did not finish: deadlock?")
	}
	close(errs)
	for e := range errs {
		t.Fatalf("a delivery failed: %s", e)
	}
	if got, want := h.counts(), "effects=100 orders=100 stale=0 notifications=100 intents=100 jobs=100 log=200"; got != want {
		t.Fatalf("stored %s, want %s", got, want)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
