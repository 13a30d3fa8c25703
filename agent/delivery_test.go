package agent_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/agent/agenttest"
	sandboxwa "github.com/retrysafe/retrysafe/sandbox/whatsapp"
)

// newSandboxHarness is the harness with replies going to the sandbox
// WhatsApp Cloud API (which emits status webhooks as Meta documents them).
func newSandboxHarness(t *testing.T, mut func(*agent.Config)) (*harness, *sandboxwa.Server) {
	t.Helper()
	ws, err := sandboxwa.New(sandboxwa.Config{Token: "wa-token", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ws)
	t.Cleanup(srv.Close)
	return newHarnessWith(t, agent.JournalOn, endpoints{whatsappURL: srv.URL, whatsappToken: "wa-token", agentCfg: mut}), ws
}

// answer delivers one customer message written at `at`, runs its turn and
// sends the reply.
func (h *harness) answer(msgID string, at time.Time) *agent.Turn {
	h.t.Helper()
	body := agenttest.WebhookPayload(phoneID, agenttest.TextMessage{ID: msgID, From: waID, Body: "Quero pagar, meu CPF é 529.982.247-25", At: at})
	if rec := h.deliver(body); rec.Code != http.StatusOK {
		h.t.Fatalf("delivery: %d %s", rec.Code, rec.Body)
	}
	if err := h.runInboxUntilDone(msgID); err != nil {
		h.t.Fatal(err)
	}
	if err := h.sendReplyUntilDone(msgID); err != nil {
		h.t.Fatal(err)
	}
	turn, err := agent.GetTurn(h.ctx, h.pool, tenant, msgID)
	if err != nil {
		h.t.Fatal(err)
	}
	return turn
}

// TestReplyOutsideTheWindowIsTheTemplate: the customer wrote 25 hours
// before the agent's clock says it is; free text would be refused
// (131047), so the reply goes out as the tenant's approved template, with
// the reply's text as its body parameter. Inside the window it is text.
func TestReplyOutsideTheWindowIsTheTemplate(t *testing.T) {
	t.Parallel()
	wrote := time.Now().Truncate(time.Second)
	now := wrote
	h, ws := newSandboxHarness(t, func(c *agent.Config) {
		c.Clock = func() time.Time { return now }
		c.Templates = map[string]agent.ReplyTemplate{"*": {Name: "retomar_conversa", Language: "pt_BR", BodyParam: true}}
	})
	now = wrote.Add(25 * time.Hour)
	turn := h.answer("wamid.late", wrote)
	sent := ws.Messages()
	if len(sent) != 1 || sent[0].Type != "template" || sent[0].Template != "retomar_conversa" || sent[0].Language != "pt_BR" {
		t.Fatalf("sent %+v, want one template message", sent)
	}
	if turn.ReplyKind != agent.ReplyKindTemplate || turn.ReplyStatus != agent.ReplySent {
		t.Fatalf("turn %+v", turn)
	}
	if len(sent[0].Components) == 0 || sent[0].CallbackData != turn.ReplyKey {
		t.Fatalf("template without the reply as body parameter, or without the key as callback data: %+v", sent[0])
	}

	now = time.Now().Add(time.Hour) // the next customer message is fresh
	turn = h.answer("wamid.fresh", time.Now().Truncate(time.Second))
	if sent := ws.Messages(); len(sent) != 2 || sent[1].Type != "text" || turn.ReplyKind != agent.ReplyKindText {
		t.Fatalf("inside the window: sent %+v, turn %+v", sent, turn)
	}
}

// TestFailedReplyResentOnceWithTheSameKey: a failed status (131000) for a
// reply queues one resend, which goes out with the reply's own key as
// Idempotency-Key and biz_opaque_callback_data; the failed status again
// changes nothing; the resend's statuses, out of order, merge (read implies
// delivered); a failure after a delivery does not undo it.
func TestFailedReplyResentOnceWithTheSameKey(t *testing.T) {
	t.Parallel()
	h, ws := newSandboxHarness(t, nil)
	turn := h.answer("wamid.f1", time.Time{})
	first := ws.Messages()
	if len(first) != 1 || first[0].CallbackData != turn.ReplyKey || first[0].IdempotencyKey != turn.ReplyKey {
		t.Fatalf("first send %+v, reply key %s", first, turn.ReplyKey)
	}
	if turn.ReplyWamid != first[0].ID {
		t.Fatalf("turn's wamid %q, sent %q", turn.ReplyWamid, first[0].ID)
	}
	failed, err := ws.Status(first[0].ID, sandboxwa.StatusFailed, 131000, phoneID)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the failure, then its redelivery
		if rec := h.deliver(failed); rec.Code != http.StatusOK {
			t.Fatalf("status delivery: %d", rec.Code)
		}
	}
	if n := h.count(`SELECT count(*) FROM river_job WHERE kind = $1`, agent.KindResend); n != 1 {
		t.Fatalf("%d resend jobs, want 1", n)
	}
	for range 3 { // the resend job, run again as after crashes
		if err := h.agent.HandleResend(h.ctx, agent.ResendArgs{Tenant: tenant, MessageID: "wamid.f1"}); err != nil {
			t.Fatal(err)
		}
	}
	sent := ws.Messages()
	if len(sent) != 2 {
		t.Fatalf("%d messages sent, want the reply and its one resend", len(sent))
	}
	if sent[1].IdempotencyKey != turn.ReplyKey || sent[1].CallbackData != turn.ReplyKey || sent[1].Text != sent[0].Text {
		t.Fatalf("resend %+v, want the reply's key %s and text", sent[1], turn.ReplyKey)
	}
	turn, _ = agent.GetTurn(h.ctx, h.pool, tenant, "wamid.f1")
	if turn.ReplyWamid != sent[1].ID || turn.ReplyResends != 1 || turn.ReplyStatus != agent.ReplySent || turn.ReplyDelivery != "" {
		t.Fatalf("after the resend: %+v", turn)
	}
	if rec := h.deliver(failed); rec.Code != http.StatusOK { // the first attempt's failure, late
		t.Fatal(rec.Code)
	}
	for _, st := range []string{sandboxwa.StatusRead, sandboxwa.StatusSent, sandboxwa.StatusDelivered, sandboxwa.StatusFailed} {
		body, err := ws.Status(sent[1].ID, st, 131000, phoneID)
		if err != nil {
			t.Fatal(err)
		}
		if rec := h.deliver(body); rec.Code != http.StatusOK {
			t.Fatal(rec.Code)
		}
	}
	turn, _ = agent.GetTurn(h.ctx, h.pool, tenant, "wamid.f1")
	if turn.ReplyDelivery != agent.DeliveryRead || turn.DeliveredAt == nil || turn.ReadAt == nil || turn.ReplyResends != 1 || turn.ReplyStatus != agent.ReplySent {
		t.Fatalf("merged: %+v", turn)
	}
	if n := h.count(`SELECT count(*) FROM river_job WHERE kind = $1`, agent.KindResend); n != 1 || len(ws.Messages()) != 2 {
		t.Fatalf("%d resend jobs, %d messages", n, len(ws.Messages()))
	}
}

// TestFailedReplyByErrorCode: an undeliverable reply (131026) goes to
// review and is not resent; a pair rate limit (131056) is resent only
// after the backoff.
func TestFailedReplyByErrorCode(t *testing.T) {
	t.Parallel()
	h, ws := newSandboxHarness(t, nil)
	h.answer("wamid.u1", time.Time{})
	body, err := ws.Status(ws.Messages()[0].ID, sandboxwa.StatusFailed, 131026, phoneID)
	if err != nil {
		t.Fatal(err)
	}
	h.deliver(body)
	turn, _ := agent.GetTurn(h.ctx, h.pool, tenant, "wamid.u1")
	if turn.ReplyStatus != agent.ReplyReview || turn.ReplyDelivery != agent.DeliveryFailed || turn.ReplyError != 131026 {
		t.Fatalf("undeliverable: %+v", turn)
	}
	if n := h.count(`SELECT count(*) FROM river_job WHERE kind = $1`, agent.KindResend); n != 0 {
		t.Fatalf("%d resend jobs for an undeliverable reply", n)
	}

	h.answer("wamid.u2", time.Time{})
	body, err = ws.Status(ws.Messages()[1].ID, sandboxwa.StatusFailed, agent.CodePairRateLimit, phoneID)
	if err != nil {
		t.Fatal(err)
	}
	h.deliver(body)
	if n := h.count(`SELECT count(*) FROM river_job WHERE kind = $1 AND scheduled_at >= now() + interval '25 seconds'`, agent.KindResend); n != 1 {
		t.Fatalf("131056: %d resend jobs scheduled after the backoff, want 1", n)
	}
}
