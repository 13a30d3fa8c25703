package agent_test

import (
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/agent/agenttest"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/sandbox/cloudapi"
	sandboxmodel "github.com/retrysafe/retrysafe/sandbox/model"
)

// TestWithSandboxServices runs the agent against the sandbox model (its own
// non-determinism: spellings, layouts, wording) and the sandbox WhatsApp
// API, journal off so that every redelivery asks the model again: one
// charge and one reply all the same.
func TestWithSandboxServices(t *testing.T) {
	ms, err := sandboxmodel.New(sandboxmodel.Config{Seed: 42, Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	modelSrv := httptest.NewServer(ms)
	defer modelSrv.Close()
	ws, err := cloudapi.New(cloudapi.Config{Token: "wa-token", Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	waSrv := httptest.NewServer(ws)
	defer waSrv.Close()

	h := newHarnessWith(t, agent.JournalOff, endpoints{modelBaseURL: modelSrv.URL + "/v1", whatsappURL: waSrv.URL, whatsappToken: "wa-token"})
	const msgID = "wamid.sandbox1"
	body := agenttest.WebhookPayload(phoneID, agenttest.TextMessage{ID: msgID, From: waID,
		Body: "Quero pagar a fatura NF-123 de R$ 180,00, minha chave Pix é o CPF 529.982.247-25"})
	h.deliver(body)

	h.crash.Arm(agent.FailProviderAnswered+".pix.charge", 1)
	if _, crashed := h.runInbox(msgID); !crashed {
		t.Fatalf("the sandbox model did not call pix_charge (model stats %+v)", ms.Stats())
	}
	h.elapse()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = h.runInboxUntilDone(msgID) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = h.sendReplyUntilDone(msgID) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	turn, err := agent.GetTurn(h.ctx, h.pool, tenant, msgID)
	if err != nil {
		t.Fatal(err)
	}
	sent := ws.Messages()
	real, _ := h.modelCalls(msgID)
	t.Logf("sandbox: charges=%d replies=%d model calls=%d turn=%s steps=%d reply=%q",
		h.psp.Count(chargeURL), len(sent), real, turn.Status, turn.Steps, firstText(sent))
	if turn.Status != agent.TurnAnswered || turn.ReplyStatus != agent.ReplySent {
		t.Fatalf("turn %+v", turn)
	}
	if h.psp.Count(chargeURL) != 1 || len(sent) != 1 || sent[0].Type != "text" || sent[0].Text == "" {
		t.Fatalf("charges %d, messages %+v", h.psp.Count(chargeURL), sent)
	}
	if real <= turn.Steps {
		t.Fatalf("journal off: %d model calls, want more than %d", real, turn.Steps)
	}
}

func firstText(ms []cloudapi.Message) string {
	if len(ms) == 0 {
		return ""
	}
	return ms[0].Text
}
