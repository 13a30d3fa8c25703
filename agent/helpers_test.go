package agent_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	openai "github.com/sashabaranov/go-openai"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/agent/agenttest"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/executor/executortest"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/outbox/outboxtest"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/riverschema"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/toolstest"
	"github.com/retrysafe/retrysafe/whatsapp"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	tenant    = "acme"
	phoneID   = "109876543210"
	waID      = "5511987654321"
	invoice   = "INV-2024-0042"
	appSecret = "test-app-secret"
	verifyTok = "test-verify-token"
	hmacKey   = "0123456789abcdef0123456789abcdef-test"
	pspToken  = "psp-token"
	chargeURL = "/v1/pix/charges"
	sendURL   = "/v1/messages"
)

// harness is one agent with its fakes on a fresh schema.
type harness struct {
	t       *testing.T
	ctx     context.Context
	pool    *pgxpool.Pool
	schema  string
	psp, wa *toolstest.Provider
	model   *agenttest.Model
	reg     *tools.Registry
	ex      *executor.Executor
	agent   *agent.Agent
	queue   *river.Client[pgx.Tx]
	webhook http.Handler

	// crash holds the armed failpoints: crash.Arm(name, nth) makes the nth
	// next hit of name end the calling goroutine on the spot, as when the
	// process dies there (see testutil.Crashpoints).
	crash testutil.Crashpoints
}

func newHarness(t *testing.T, mode agent.JournalMode) *harness {
	return newHarnessWith(t, mode, endpoints{})
}

// endpoints replace the fake model and WhatsApp (with the sandbox ones).
type endpoints struct {
	modelBaseURL  string
	whatsappURL   string
	whatsappToken string
	// agentCfg adjusts the agent's configuration before New.
	agentCfg func(*agent.Config)
}

func newHarnessWith(t *testing.T, mode agent.JournalMode, ep endpoints) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	pool, schema := pgtest.Schema(t, &pgtest.Opts{MaxConns: 8})
	if _, err := riverschema.Migrate(ctx, pool, schema); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, ctx: ctx, pool: pool, schema: schema}
	h.psp = toolstest.NewProvider()
	h.psp.Token = pspToken
	t.Cleanup(h.psp.Close)
	h.wa = toolstest.NewProvider()
	t.Cleanup(h.wa.Close)
	h.model = agenttest.NewModel()
	t.Cleanup(h.model.Close)

	pix, err := tools.NewPixCharge(tools.HTTPConfig{BaseURL: h.psp.URL, Token: pspToken})
	if err != nil {
		t.Fatal(err)
	}
	if ep.whatsappURL == "" {
		ep.whatsappURL = h.wa.URL
	}
	if ep.modelBaseURL == "" {
		ep.modelBaseURL = h.model.BaseURL()
	}
	text, err := agent.NewWhatsAppText(tools.HTTPConfig{BaseURL: ep.whatsappURL, Token: ep.whatsappToken})
	if err != nil {
		t.Fatal(err)
	}
	if h.reg, err = tools.NewRegistry(pix, text); err != nil {
		t.Fatal(err)
	}
	d, err := h.reg.Deriver([]byte(hmacKey))
	if err != nil {
		t.Fatal(err)
	}
	log := testutil.Logger(t)
	store, err := intent.New(intent.Config{Deriver: d, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if h.ex, err = executor.New(executor.Config{DB: pool, Intents: store, Tools: h.reg, Failpoints: executor.FailpointFunc(h.crash.Hit), Logger: log}); err != nil {
		t.Fatal(err)
	}
	if h.queue, err = agent.NewInserter(pool, schema); err != nil {
		t.Fatal(err)
	}
	oc := openai.DefaultConfig("test-key")
	oc.BaseURL = ep.modelBaseURL
	acfg := agent.Config{
		DB: pool, Tools: h.reg, Intents: store, Executor: h.ex, Queue: h.queue,
		Model: openai.NewClientWithConfig(oc), ModelName: "gpt-test", Journal: mode,
		Failpoint: h.crash.Hit, Logger: log,
	}
	if ep.agentCfg != nil {
		ep.agentCfg(&acfg)
	}
	h.agent, err = agent.New(acfg)
	if err != nil {
		t.Fatal(err)
	}
	h.webhook, err = whatsapp.New(whatsapp.Config{DB: pool, Queue: h.queue, AppSecret: appSecret, VerifyToken: verifyTok,
		Tenants: map[string]string{phoneID: tenant}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.UpsertConversation(ctx, pool, agent.Conversation{Tenant: tenant, ID: waID, CustomerID: "cust-42", InvoiceRef: invoice, AmountDueCents: 18000}); err != nil {
		t.Fatal(err)
	}
	return h
}

// runInbox runs the inbox handler as a River worker would, in its own
// goroutine; crashed reports that it died at an armed failpoint.
func (h *harness) runInbox(msgID string) (err error, crashed bool) {
	return testutil.RunCrashable(func() error { return h.agent.HandleInbox(h.ctx, tenant, msgID) })
}

// runInboxUntilDone redelivers until the handler acknowledges, waiting out
// BusyErrors as River's snooze would.
func (h *harness) runInboxUntilDone(msgID string) error {
	return outboxtest.UntilDone(h.t, "inbox "+msgID, func() error { return h.agent.HandleInbox(h.ctx, tenant, msgID) })
}

// elapse stands for the time a crashed worker's holds take to expire: the
// message claim and any started action lease end now.
func (h *harness) elapse() {
	h.t.Helper()
	if _, err := h.pool.Exec(h.ctx, `UPDATE messages SET claim_until = now() WHERE claim_until > now()`); err != nil {
		h.t.Fatal(err)
	}
	if _, err := executortest.ExpireLeases(h.ctx, h.pool); err != nil {
		h.t.Fatal(err)
	}
}

// deliver posts a signed webhook body.
func (h *harness) deliver(body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, whatsapp.Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(whatsapp.SignatureHeader, agenttest.Sign(appSecret, body))
	rec := httptest.NewRecorder()
	h.webhook.ServeHTTP(rec, req)
	return rec
}

func (h *harness) count(sql string, args ...any) int {
	h.t.Helper()
	var n int
	if err := h.pool.QueryRow(h.ctx, sql, args...).Scan(&n); err != nil {
		h.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// modelCalls counts the ledger rows of a message: real calls and replays.
func (h *harness) modelCalls(msgID string) (real, replayed int) {
	h.t.Helper()
	c, err := agent.CountModelCalls(h.ctx, h.pool, tenant, msgID)
	if err != nil {
		h.t.Fatal(err)
	}
	return c.Made, c.Replayed
}

// sendReply runs the reply job of a recorded turn, as the outbox worker.
func (h *harness) sendReply(msgID string) error {
	turn, err := agent.GetTurn(h.ctx, h.pool, tenant, msgID)
	if err != nil {
		return err
	}
	return h.agent.HandleReply(h.ctx, agent.ReplyArgs{Tenant: tenant, MessageID: msgID, Key: turn.ReplyKey})
}

// sentBodies returns the text of every message the fake WhatsApp sent.
func (h *harness) sentBodies() []string {
	var out []string
	for _, r := range h.wa.Records(sendURL) {
		text, _ := r["text"].(map[string]any)
		body, _ := text["body"].(string)
		out = append(out, body)
	}
	return out
}

// sendReplyUntilDone re-runs the reply job while its action is in flight
// elsewhere, as River's snooze would (sooner).
func (h *harness) sendReplyUntilDone(msgID string) error {
	return outboxtest.UntilDone(h.t, "reply "+msgID, func() error { return h.sendReply(msgID) })
}
