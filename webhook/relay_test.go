package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/webhook"
)

// The relay dies after the provider accepted the message and before
// anything is marked (the executor has not recorded the answer, the outbox
// row is pending). The job runs again once the lease has expired: one
// message at the stand-in.
func TestRelayKilledAfterSendBeforeRecord(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.expect(paid("evt_1", "pi_1", "ord-1", t0), http.StatusOK, "processed")
	args := h.jobs()[0]

	h.crash.Arm(failProviderAnswered, 1)
	if _, crashed := h.runRelay(args); !crashed {
		t.Fatal("the relay did not reach the failpoint")
	}
	if n := len(h.messages()); n != 1 {
		t.Fatalf("%d messages after the crash, want 1", n)
	}
	a, err := executor.Get(h.ctx, h.pool, tenant, args.Key)
	if err != nil || a.Status != executor.RowStarted {
		t.Fatalf("action after the crash: %+v, %v", a, err)
	}
	// While the dead worker's lease is live, the job waits (River snoozes).
	var busy *webhook.BusyError
	if err, _ := h.runRelay(args); !errors.As(err, &busy) {
		t.Fatalf("run during the lease: %v, want busy", err)
	}
	h.elapse()
	if err := h.relayUntilDone(args); err != nil {
		t.Fatal(err)
	}
	n, err := webhook.GetNotification(h.ctx, h.pool, tenant, args.EffectKey)
	if err != nil || n.Status != webhook.NotifySent || n.SentAt == nil || n.Attempt != 2 {
		t.Fatalf("notification %+v, %v", n, err)
	}
	if msgs := h.messages(); len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
}

// The relay dies after the executor recorded the message as sent and
// before the outbox row is marked: the job runs again, replays the action
// row, marks the row, and sends nothing.
func TestRelayKilledAfterRecordBeforeMark(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.expect(paid("evt_1", "pi_1", "ord-1", t0), http.StatusOK, "processed")
	args := h.jobs()[0]

	h.crash.Arm(webhook.FailRelaySent, 1)
	if _, crashed := h.runRelay(args); !crashed {
		t.Fatal("the relay did not reach the failpoint")
	}
	if n, _ := webhook.GetNotification(h.ctx, h.pool, tenant, args.EffectKey); n.Status != webhook.NotifyPending {
		t.Fatalf("notification %s after the crash, want pending", n.Status)
	}
	if err := h.relayUntilDone(args); err != nil {
		t.Fatal(err)
	}
	// And once more, as a redelivered job would.
	if err := h.relayUntilDone(args); err != nil {
		t.Fatal(err)
	}
	if n, _ := webhook.GetNotification(h.ctx, h.pool, tenant, args.EffectKey); n.Status != webhook.NotifySent {
		t.Fatalf("notification %s, want sent", n.Status)
	}
	if msgs := h.messages(); len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
}

// A provider that keeps failing: the executor retries with the same key
// and backoff, then gives up to review; the outbox row says review and is
// listed for an operator. One that refuses for good: failed.
func TestRelayGivesUpVisibly(t *testing.T) {
	t.Parallel()
	var posts, lookups atomic.Int32
	status := atomic.Int32{}
	status.Store(http.StatusServiceUnavailable)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		} else {
			lookups.Add(1)
		}
		w.WriteHeader(int(status.Load()))
	}))
	t.Cleanup(down.Close)
	h := newHarness(t, &harnessOpts{waURL: down.URL, attempts: 3})
	h.expect(paid("evt_1", "pi_1", "ord-1", t0), http.StatusOK, "processed")
	h.relayAll()
	n, err := webhook.GetNotification(h.ctx, h.pool, tenant, h.jobs()[0].EffectKey)
	if err != nil || n.Status != webhook.NotifyReview || n.ErrorCode != "uncertain:http_503" || n.Attempt != 3 {
		t.Fatalf("notification %+v, %v", n, err)
	}
	// A 503 may hide a sent message: after it the provider is only asked
	// by key (and cannot answer), never sent to again.
	if posts.Load() != 1 || lookups.Load() < 2 {
		t.Fatalf("%d sends and %d lookups", posts.Load(), lookups.Load())
	}

	status.Store(http.StatusUnprocessableEntity)
	h.expect(refunded("evt_2", "pi_1", "ord-1", t0.Add(time.Minute)), http.StatusOK, "processed")
	h.relayAll()
	review, err := webhook.ListNotifications(h.ctx, h.pool, webhook.ListParams{Tenant: tenant, Status: webhook.NotifyReview})
	if err != nil || len(review) != 1 {
		t.Fatalf("review queue %+v, %v", review, err)
	}
	failed, err := webhook.ListNotifications(h.ctx, h.pool, webhook.ListParams{Tenant: tenant, Status: webhook.NotifyFailed})
	if err != nil || len(failed) != 1 || failed[0].ErrorCode != "definitive:http_422" {
		t.Fatalf("failed %+v, %v", failed, err)
	}
}

// A job whose intent does not exist cannot succeed: ErrNotFound (River
// cancels it) and the row, if any, is failed.
func TestRelayMissingIntent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	err := h.relay.Send(h.ctx, webhook.NotifyArgs{Tenant: tenant, EffectKey: "x", Key: "nope"})
	if !errors.Is(err, webhook.ErrNotFound) {
		t.Fatalf("err %v, want ErrNotFound", err)
	}
	if err := h.relay.Send(h.ctx, webhook.NotifyArgs{Tenant: tenant}); !errors.Is(err, webhook.ErrInvalid) {
		t.Fatalf("err %v, want ErrInvalid", err)
	}
}

// Through River: a job that keeps failing for a reason the executor does
// not classify (here no tool for the action) is retried by River, and
// when its attempts are spent the outbox row is failed (relay_exhausted),
// in the review queue.
func TestRelayExhaustedThroughRiver(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.expect(paid("evt_1", "pi_1", "ord-1", t0), http.StatusOK, "processed")
	empty, err := tools.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(executor.Config{DB: h.pool, Intents: h.store, Tools: empty, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	relay, err := webhook.NewRelay(webhook.RelayConfig{DB: h.pool, Executor: ex, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	client := relayClient(t, h.pool, h.schema, relay, 2)
	if err := client.Start(h.ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(ctx)
	}()
	waitFor(t, 30*time.Second, "the job to be discarded", func() bool {
		return h.count("river_job", "state = 'discarded'") == 1
	})
	failed, err := webhook.ListNotifications(h.ctx, h.pool, webhook.ListParams{Tenant: tenant, Status: webhook.NotifyFailed})
	if err != nil || len(failed) != 1 || failed[0].ErrorCode != "relay_exhausted" {
		t.Fatalf("failed %+v, %v", failed, err)
	}
	if len(h.messages()) != 0 {
		t.Fatal("a message went out")
	}
}
