package agent_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/agent/agenttest"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/sandbox/cloudapi"
)

// newSandboxHarness is the harness with replies going to the sandbox
// WhatsApp Cloud API (which emits status webhooks as Meta documents them).
func newSandboxHarness(t *testing.T, mut func(*agent.Config)) (*harness, *cloudapi.Server) {
	t.Helper()
	ws, err := cloudapi.New(cloudapi.Config{Token: "wa-token", Logger: testutil.Logger(t)})
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
	failed, err := ws.Status(first[0].ID, cloudapi.StatusFailed, 131000, phoneID)
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
	for _, st := range []string{cloudapi.StatusRead, cloudapi.StatusSent, cloudapi.StatusDelivered, cloudapi.StatusFailed} {
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
	body, err := ws.Status(ws.Messages()[0].ID, cloudapi.StatusFailed, 131026, phoneID)
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
	// A status found by message id alone (no callback data), delivered
	// after all on another device: the delivery stands.
	h.deliver(agenttest.StatusPayload(phoneID, turn.ReplyWamid))
	turn, _ = agent.GetTurn(h.ctx, h.pool, tenant, "wamid.u1")
	if turn.ReplyDelivery != agent.DeliveryDelivered || turn.ReplyStatus != agent.ReplySent || turn.DeliveredAt == nil {
		t.Fatalf("delivered by message id: %+v", turn)
	}

	h.answer("wamid.u2", time.Time{})
	body, err = ws.Status(ws.Messages()[1].ID, cloudapi.StatusFailed, agent.CodePairRateLimit, phoneID)
	if err != nil {
		t.Fatal(err)
	}
	h.deliver(body)
	if n := h.count(`SELECT count(*) FROM river_job WHERE kind = $1 AND scheduled_at >= now() + interval '25 seconds'`, agent.KindResend); n != 1 {
		t.Fatalf("131056: %d resend jobs scheduled after the backoff, want 1", n)
	}
}

// TestBSUIDAndGroupReplies: a customer known only by business-scoped user
// id is answered by "recipient"; a group message is answered in the group
// (GroupsConversation: its own conversation, which has no invoice) or
// refused there without a model call (GroupsRefuse).
func TestBSUIDAndGroupReplies(t *testing.T) {
	t.Parallel()
	const bsuid = "BR.13491208655302741918"
	group := func(id string) []byte {
		return []byte(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{
			"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"` + phoneID + `"},
			"contacts":[{"profile":{"name":"Joao"},"wa_id":"` + waID + `"}],
			"messages":[{"from":"` + waID + `","group_id":"G123abc","id":"` + id + `","timestamp":"` + fmt.Sprint(time.Now().Unix()) + `",
			"text":{"body":"quero pagar"},"type":"text"}]}}]}]}`)
	}
	t.Run("bsuid", func(t *testing.T) {
		t.Parallel()
		h, ws := newSandboxHarness(t, nil)
		if err := agent.UpsertConversation(h.ctx, h.pool, agent.Conversation{Tenant: tenant, ID: bsuid, CustomerID: "cust-7", InvoiceRef: "INV-7", AmountDueCents: 18000}); err != nil {
			t.Fatal(err)
		}
		body := []byte(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{
			"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"` + phoneID + `"},
			"contacts":[{"profile":{"name":"Sheena","username":"@sheena"},"user_id":"` + bsuid + `"}],
			"messages":[{"from_user_id":"` + bsuid + `","id":"wamid.bs1","timestamp":"` + fmt.Sprint(time.Now().Unix()) + `",
			"text":{"body":"` + payTextPlain + `"},"type":"text"}]}}]}]}`)
		if rec := h.deliver(body); rec.Code != http.StatusOK {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
		if err := h.runInboxUntilDone("wamid.bs1"); err != nil {
			t.Fatal(err)
		}
		if err := h.sendReplyUntilDone("wamid.bs1"); err != nil {
			t.Fatal(err)
		}
		sent := ws.Messages()
		if len(sent) != 1 || sent[0].UserID != bsuid || sent[0].WaID != "" || h.psp.Count(chargeURL) != 1 {
			t.Fatalf("sent %+v, charges %d", sent, h.psp.Count(chargeURL))
		}
	})
	for _, pol := range []agent.GroupPolicy{agent.GroupsConversation, agent.GroupsRefuse} {
		t.Run("group_"+string(pol), func(t *testing.T) {
			t.Parallel()
			h, ws := newSandboxHarness(t, func(c *agent.Config) { c.Groups = pol })
			if rec := h.deliver(group("wamid.g1")); rec.Code != http.StatusOK {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			if err := h.runInboxUntilDone("wamid.g1"); err != nil {
				t.Fatal(err)
			}
			if err := h.sendReplyUntilDone("wamid.g1"); err != nil {
				t.Fatal(err)
			}
			turn, _ := agent.GetTurn(h.ctx, h.pool, tenant, "wamid.g1")
			sent := ws.Messages()
			if len(sent) != 1 || sent[0].GroupID != "G123abc" || sent[0].WaID != "" {
				t.Fatalf("sent %+v", sent)
			}
			want, text := agent.TurnNoInvoice, agent.DefaultTexts().NoInvoice
			if pol == agent.GroupsRefuse {
				want, text = agent.TurnGroup, agent.DefaultTexts().Group
			}
			if turn.Status != want || turn.ConversationID != "group:G123abc" || sent[0].Text != text {
				t.Fatalf("turn %+v, sent %q", turn, sent[0].Text)
			}
			if real, _ := h.modelCalls("wamid.g1"); real != 0 || h.psp.Count(chargeURL) != 0 {
				t.Fatalf("a group message called the model %d times, charged %d", real, h.psp.Count(chargeURL))
			}
		})
	}
}

// TestSendRefusedWithPairRateLimit: the Cloud API refuses the send with
// error 131056 (nothing sent); the reply job backs off for at least
// Delivery.PairRateBackoff, then sends, with the same key.
func TestSendRefusedWithPairRateLimit(t *testing.T) {
	t.Parallel()
	var (
		posts atomic.Int64
		keys  sync.Map
	)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"message":"not found","type":"OAuthException","code":100}}`))
			return
		}
		keys.Store(r.Header.Get("Idempotency-Key"), true)
		if posts.Add(1) == 1 {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"message":"(#131056) (Business Account, Consumer Account) pair rate limit hit","type":"OAuthException","code":131056,"error_data":{"messaging_product":"whatsapp","details":"Message failed to send because there were too many messages sent from this phone number to the same phone number in a short period of time."},"fbtrace_id":"Az8or2yhqkZfEZ-_4Qn_Bam"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"messaging_product":"whatsapp","contacts":[{"input":"+5511987654321","wa_id":"5511987654321"}],"messages":[{"id":"wamid.after-backoff"}]}`))
	}))
	defer api.Close()
	h := newHarnessWith(t, agent.JournalOn, endpoints{whatsappURL: api.URL, agentCfg: func(c *agent.Config) {
		c.Delivery = agent.DeliveryPolicy{RetryCodes: agent.DefaultDelivery().RetryCodes, PairRateBackoff: 45 * time.Second}
	}})
	h.deliverText("wamid.pr", payText)
	if err := h.runInboxUntilDone("wamid.pr"); err != nil {
		t.Fatal(err)
	}
	err := h.sendReply("wamid.pr")
	var busy *agent.BusyError
	if !errors.As(err, &busy) || busy.RetryAfter < 45*time.Second {
		t.Fatalf("after 131056: %v, want a BusyError of at least 45s", err)
	}
	h.elapse() // the backoff, as the snooze would wait it out
	if err := h.sendReplyUntilDone("wamid.pr"); err != nil {
		t.Fatal(err)
	}
	turn, _ := agent.GetTurn(h.ctx, h.pool, tenant, "wamid.pr")
	n := 0
	keys.Range(func(k, _ any) bool { n++; return k == turn.ReplyKey })
	if posts.Load() != 2 || n != 1 || turn.ReplyStatus != agent.ReplySent || turn.ReplyWamid != "wamid.after-backoff" {
		t.Fatalf("posts %d, keys %d, turn %+v", posts.Load(), n, turn)
	}
}
