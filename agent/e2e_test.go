package agent_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/agent/agenttest"
	"github.com/retrysafe/retrysafe/executor/executortest"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

// TestEndToEndRedelivery is the acceptance test: one inbound message
// delivered five times through the webhook (two in a row, three at once),
// and its inbox job run again and again as River would after crashes and
// rescues (three runs killed at different points, then four at once), then
// by a real River client, with the reply job re-run too. Exactly one charge
// and one reply, whatever the journal; with the journal on, exactly one
// real model call per step.
func TestEndToEndRedelivery(t *testing.T) {
	for _, tc := range []struct {
		mode agent.JournalMode
	}{{agent.JournalOn}, {agent.JournalOff}} {
		t.Run("journal_"+string(tc.mode), func(t *testing.T) {
			h := newHarness(t, tc.mode)
			const msgID = "wamid.HBgNNTUxMTk4NzY1NDMyMRUCABIYFjNFQjBDMEI2QkI2RjQ1NDE2QUM2AA=="
			body := agenttest.WebhookPayload(phoneID, agenttest.TextMessage{ID: msgID, From: waID,
				Body: "Oi, quero pagar a fatura. Meu CPF é 529.982.247-25"})

			// 1. The webhook: five deliveries of one message.
			for i := 0; i < 2; i++ {
				if rec := h.deliver(body); rec.Code != http.StatusOK {
					t.Fatalf("delivery %d: %d %s", i, rec.Code, rec.Body)
				}
			}
			var wg sync.WaitGroup
			codes := make([]int, 3)
			for i := range codes {
				wg.Add(1)
				go func() { defer wg.Done(); codes[i] = h.deliver(body).Code }()
			}
			wg.Wait()
			for i, c := range codes {
				if c != http.StatusOK {
					t.Fatalf("concurrent delivery %d: %d", i, c)
				}
			}
			if n := h.count(`SELECT count(*) FROM messages WHERE tenant_id = $1 AND message_id = $2`, tenant, msgID); n != 1 {
				t.Fatalf("message stored %d times", n)
			}
			if n := h.count(`SELECT count(*) FROM river_job WHERE kind = $1`, agent.KindInbox); n != 1 {
				t.Fatalf("%d inbox jobs queued, want 1", n)
			}

			// 2. Redeliveries of the inbox job after crashes.
			h.crash.Arm(agent.FailProviderAnswered+".pix.charge", 1) // the PSP charged; nothing recorded
			if _, crashed := h.runInbox(msgID); !crashed {
				t.Fatal("run 1 did not reach the provider")
			}
			if got := h.psp.Count(chargeURL); got != 1 {
				t.Fatalf("after run 1: %d charges", got)
			}
			h.elapse()
			h.crash.Arm(agent.FailActionCompleted, 1) // took over, asked the PSP by key, recorded
			if _, crashed := h.runInbox(msgID); !crashed {
				t.Fatal("run 2 did not complete the action")
			}
			h.elapse()
			h.crash.Arm(agent.FailModelAnswered, 2) // the final answer is in, the turn is not
			if _, crashed := h.runInbox(msgID); !crashed {
				t.Fatal("run 3 did not reach step 1")
			}
			h.elapse()
			errs := make([]error, 4)
			for i := range errs {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = h.runInboxUntilDone(msgID) }()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("concurrent run %d: %v", i, err)
				}
			}
			turn, err := agent.GetTurn(h.ctx, h.pool, tenant, msgID)
			if err != nil {
				t.Fatal(err)
			}
			if turn.Status != agent.TurnAnswered || turn.Steps != 2 || len(turn.Tools) != 1 || turn.Tools[0].Status != "completed" {
				t.Fatalf("turn = %+v", turn)
			}

			// 3. A real River client works the queued inbox job (one more
			// redelivery: it acknowledges) and the reply job.
			client, err := agent.NewClient(h.pool, h.agent, agent.RiverConfig{Schema: h.schema, Concurrency: 2,
				TestOnly: true, FetchPollInterval: 100 * time.Millisecond, Logger: testutil.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			if err := client.Start(h.ctx); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for h.count(`SELECT count(*) FROM river_job WHERE state <> 'completed'`) > 0 ||
				h.count(`SELECT count(*) FROM agent_turns WHERE reply_status = 'sent'`) != 1 {
				if time.Now().After(deadline) {
					t.Fatalf("River did not finish: jobs %d not completed", h.count(`SELECT count(*) FROM river_job WHERE state <> 'completed'`))
				}
				time.Sleep(50 * time.Millisecond)
			}
			stopCtx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
			if err := client.Stop(stopCtx); err != nil {
				t.Fatal(err)
			}
			cancel()

			// 4. The outbox relay redelivered, some at once; the inbox job
			// once more.
			for i := 0; i < 3; i++ {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = h.sendReplyUntilDone(msgID) }()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			if err, _ := h.runInbox(msgID); err != nil {
				t.Fatal(err)
			}

			// The counts.
			charges := h.psp.Count(chargeURL)
			replies := h.wa.Count(sendURL)
			real, replayed := h.modelCalls(msgID)
			t.Logf("journal %s: charges=%d replies=%d model calls: real=%d replayed=%d (fake model answered %d); PSP requests=%d, WhatsApp requests=%d",
				tc.mode, charges, replies, real, replayed, h.model.Calls(), h.psp.Requests(), h.wa.Requests())
			if charges != 1 {
				t.Errorf("%d charges, want 1", charges)
			}
			if replies != 1 {
				t.Errorf("%d replies sent, want 1", replies)
			}
			if int64(real) != h.model.Calls() {
				t.Errorf("ledger has %d real calls, the model answered %d", real, h.model.Calls())
			}
			switch tc.mode {
			case agent.JournalOn:
				if real != turn.Steps {
					t.Errorf("journal on: %d real model calls, want %d (one per step)", real, turn.Steps)
				}
				if replayed != 4 {
					t.Errorf("journal on: %d replayed ledger rows, want 4 (runs 2, 3, 4)", replayed)
				}
			case agent.JournalOff:
				if real <= turn.Steps {
					t.Errorf("journal off: %d real model calls, want more than %d", real, turn.Steps)
				}
				if replayed != 0 || h.count(`SELECT count(*) FROM model_journal`) != 0 {
					t.Errorf("journal off: replayed %d, journal rows %d; want none", replayed, h.count(`SELECT count(*) FROM model_journal`))
				}
			}
			// One intent per action, the charge in cents, the reply the
			// recorded text.
			chargeIntents, err := executortest.Intents(h.ctx, h.pool, tenant, "pix.charge")
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, c := range chargeIntents {
				if c.Ref == invoice {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d pix.charge intents", n)
			}
			rec := h.psp.Records(chargeURL)[0]
			if rec["amount_cents"] != float64(18000) || rec["pix_key"] != "52998224725" {
				t.Errorf("charge sent %v / %v", rec["amount_cents"], rec["pix_key"])
			}
			var stored string
			if err := h.pool.QueryRow(h.ctx, `SELECT body FROM messages WHERE tenant_id = $1 AND message_id = $2`, tenant, msgID+":reply").Scan(&stored); err != nil {
				t.Fatal(err)
			}
			if got := h.sentBodies(); len(got) != 1 || got[0] != stored {
				t.Errorf("sent %q, recorded reply %q", got, stored)
			}
			if turn, _ := agent.GetTurn(h.ctx, h.pool, tenant, msgID); turn.ReplyStatus != agent.ReplySent {
				t.Errorf("reply status %q", turn.ReplyStatus)
			}
		})
	}
}
