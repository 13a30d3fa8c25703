package agent_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/agent/agenttest"
	"github.com/retrysafe/retrysafe/executor/executortest"
)

// receive stores one inbound message through the webhook.
func (h *harness) receive(msgID, text string) {
	h.t.Helper()
	if rec := h.deliver(agenttest.WebhookPayload(phoneID, agenttest.TextMessage{ID: msgID, From: waID, Body: text})); rec.Code != http.StatusOK {
		h.t.Fatalf("deliver %s: %d %s", msgID, rec.Code, rec.Body)
	}
}

// TestMalformedToolCallFreezesNothing: whatever is wrong with the model's
// tool call, no intent is frozen, nothing is charged, and the customer gets
// the fixed error reply.
func TestMalformedToolCallFreezesNothing(t *testing.T) {
	h := newHarness(t, agent.JournalOn)
	cases := []struct {
		behavior agenttest.Behavior
		code     string
		field    string
	}{
		{agenttest.UnknownTool, "unknown_tool", ""},
		{agenttest.BadJSON, "bad_arguments", ""},
		{agenttest.MissingField, "missing_field", "pix_key"},
		{agenttest.InvalidCPF, "invalid_field", "pix_key"},
		{agenttest.CallReplyTool, "unknown_tool", ""},
	}
	for i, tc := range cases {
		msgID := "wamid.bad" + string(rune('a'+i))
		h.model.SetBehavior(tc.behavior)
		h.receive(msgID, "quero pagar")
		if err := h.runInboxUntilDone(msgID); err != nil {
			t.Fatalf("%s: %v", tc.code, err)
		}
		turn, err := agent.GetTurn(h.ctx, h.pool, tenant, msgID)
		if err != nil {
			t.Fatal(err)
		}
		if turn.Status != agent.TurnToolError || turn.ErrorCode != tc.code || len(turn.Tools) != 0 {
			t.Errorf("behavior %d: turn %s/%s tools %v, want tool_error/%s", tc.behavior, turn.Status, turn.ErrorCode, turn.Tools, tc.code)
		}
		if err := h.sendReply(msgID); err != nil {
			t.Fatal(err)
		}
		if real, _ := h.modelCalls(msgID); real != 1 {
			t.Errorf("behavior %d: %d model calls, want 1 (no second step after a refused call)", tc.behavior, real)
		}
	}
	intents, err := executortest.Intents(h.ctx, h.pool, tenant, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range intents {
		if in.Action != agent.ReplyToolName {
			t.Errorf("intent %s frozen from a malformed call", in.Action)
		}
	}
	actions, err := executortest.Actions(h.ctx, h.pool, executortest.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range actions {
		if a.Action != agent.ReplyToolName {
			t.Errorf("action %s claimed from a malformed call", a.Action)
		}
	}
	if h.psp.Requests() != 0 {
		t.Errorf("the PSP got %d requests", h.psp.Requests())
	}
	sent := h.sentBodies()
	if len(sent) != len(cases) {
		t.Fatalf("%d replies sent, want %d", len(sent), len(cases))
	}
	for _, s := range sent {
		if s != agent.DefaultTexts().ToolError {
			t.Errorf("reply %q, want the fixed tool error text", s)
		}
	}
	// The reply tool was never offered to the model.
	for _, req := range h.model.Requests() {
		for _, tool := range req.Tools {
			if tool.Function.Name != "pix_charge" {
				t.Errorf("model offered %q", tool.Function.Name)
			}
		}
	}
}

// TestModelFailures: rate limits and server errors leave the message to
// River's retry (no turn, the claim given back at once); a refused request
// ends the turn with the fixed apology; neither charges.
func TestModelFailures(t *testing.T) {
	h := newHarness(t, agent.JournalOn)

	h.receive("wamid.retry", "quero pagar, CPF 529.982.247-25")
	h.model.FailNext(http.StatusTooManyRequests, http.StatusServiceUnavailable)
	for i, want := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		err, _ := h.runInbox("wamid.retry")
		var me *agent.ModelError
		if !errors.As(err, &me) || !me.Retryable || me.Status != want {
			t.Fatalf("attempt %d: err %v, want a retryable ModelError with status %d", i, err, want)
		}
		if _, err := agent.GetTurn(h.ctx, h.pool, tenant, "wamid.retry"); !errors.Is(err, agent.ErrNotFound) {
			t.Fatalf("attempt %d: a turn was recorded: %v", i, err)
		}
	}
	if err, _ := h.runInbox("wamid.retry"); err != nil { // claim released: no wait
		t.Fatalf("after the failures: %v", err)
	}
	if h.psp.Count(chargeURL) != 1 {
		t.Fatalf("%d charges", h.psp.Count(chargeURL))
	}

	h.receive("wamid.refused", "oi")
	h.model.FailNext(http.StatusBadRequest)
	if err, _ := h.runInbox("wamid.refused"); err != nil {
		t.Fatal(err)
	}
	turn, err := agent.GetTurn(h.ctx, h.pool, tenant, "wamid.refused")
	if err != nil || turn.Status != agent.TurnModelError || turn.ErrorCode != "http_400" {
		t.Fatalf("turn %+v, err %v", turn, err)
	}
	if real, _ := h.modelCalls("wamid.refused"); real != 0 {
		t.Errorf("a refused call was recorded as made: %d", real)
	}
}

// TestNoOpenInvoice: nothing due, no model call, the fixed reply.
func TestNoOpenInvoice(t *testing.T) {
	h := newHarness(t, agent.JournalOn)
	if err := agent.UpsertConversation(h.ctx, h.pool, agent.Conversation{Tenant: tenant, ID: waID, CustomerID: "cust-42"}); err != nil {
		t.Fatal(err)
	}
	h.receive("wamid.none", "quero pagar")
	if err, _ := h.runInbox("wamid.none"); err != nil {
		t.Fatal(err)
	}
	if err := h.sendReply("wamid.none"); err != nil {
		t.Fatal(err)
	}
	turn, _ := agent.GetTurn(h.ctx, h.pool, tenant, "wamid.none")
	if turn.Status != agent.TurnNoInvoice || h.model.Calls() != 0 || h.psp.Requests() != 0 {
		t.Fatalf("status %s, model calls %d, PSP requests %d", turn.Status, h.model.Calls(), h.psp.Requests())
	}
	if got := h.sentBodies(); len(got) != 1 || got[0] != agent.DefaultTexts().NoInvoice {
		t.Fatalf("sent %q", got)
	}
}

// TestStepLimit: a model that keeps calling the tool is cut off at
// MaxSteps; the charge still happened once.
func TestStepLimit(t *testing.T) {
	h := newHarness(t, agent.JournalOn)
	h.model.SetBehavior(agenttest.ChargeForever)
	h.receive("wamid.loop", "pagar, CPF 52998224725")
	if err, _ := h.runInbox("wamid.loop"); err != nil {
		t.Fatal(err)
	}
	turn, _ := agent.GetTurn(h.ctx, h.pool, tenant, "wamid.loop")
	max := h.agent.Config().MaxSteps
	if turn.Status != agent.TurnModelError || turn.ErrorCode != "step_limit" || turn.Steps != max || len(turn.Tools) != max-1 {
		t.Fatalf("turn %+v", turn)
	}
	if h.psp.Count(chargeURL) != 1 || h.psp.Requests() != 1 {
		t.Fatalf("charges %d, PSP requests %d", h.psp.Count(chargeURL), h.psp.Requests())
	}
	for _, oc := range turn.Tools[1:] {
		if !oc.Replayed {
			t.Errorf("repeated call not replayed: %+v", oc)
		}
	}
}

// TestGarbledRedeliveryActsOnFrozenIntent: a first run froze a good
// extraction and died; the redelivery's model (journal off) now forgets the
// Pix key. The frozen intent is found and charged once; the garbled
// extraction is dropped, not refused.
func TestGarbledRedeliveryActsOnFrozenIntent(t *testing.T) {
	h := newHarness(t, agent.JournalOff)
	h.receive("wamid.garble", "pagar, CPF 529.982.247-25")
	h.crash.Arm(agent.FailIntentFrozen, 1)
	if _, crashed := h.runInbox("wamid.garble"); !crashed {
		t.Fatal("did not freeze")
	}
	if h.psp.Requests() != 0 {
		t.Fatal("charged before the crash point")
	}
	h.elapse()
	h.model.SetBehavior(agenttest.MissingField)
	if err := h.runInboxUntilDone("wamid.garble"); err != nil {
		t.Fatal(err)
	}
	turn, _ := agent.GetTurn(h.ctx, h.pool, tenant, "wamid.garble")
	if turn.Status != agent.TurnAnswered || len(turn.Tools) != 1 || turn.Tools[0].Status != "completed" {
		t.Fatalf("turn %+v", turn)
	}
	if h.psp.Count(chargeURL) != 1 {
		t.Fatalf("%d charges", h.psp.Count(chargeURL))
	}
	if rec := h.psp.Records(chargeURL)[0]; rec["pix_key"] != "52998224725" {
		t.Fatalf("charged key %v", rec["pix_key"])
	}
}
