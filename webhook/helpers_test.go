package webhook_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/executor/executortest"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/outbox/outboxtest"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/riverschema"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/sandbox/cloudapi"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/toolstest"
	"github.com/retrysafe/retrysafe/webhook"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	tenant   = "acme"
	provider = "sandbox"
	secret   = "whsec_test_0123456789"
	hmacKey  = "0123456789abcdef0123456789abcdef-test"
	phone    = "+5511987654321"
	waToken  = "wa-token"
	pspToken = "psp-merchant-token"
)

// t0 is 10:00 on the provider's clock; events are created relative to it.
var t0 = time.Date(2024, 5, 10, 10, 0, 0, 0, time.UTC)

// stack is what every harness stands on: a fresh schema with River's
// tables, the intent store and the executor over a harness's tools (its
// Failpoints are crash's), an insert-only River client and the relay.
type stack struct {
	tb     testing.TB
	ctx    context.Context
	pool   *pgxpool.Pool
	schema string
	store  *intent.Store
	ex     *executor.Executor
	queue  *river.Client[pgx.Tx]
	relay  *webhook.Relay

	// crash holds the armed failpoints: crash.Arm(name, nth) makes the nth
	// next hit of name end the calling goroutine on the spot, as when the
	// process dies there (see testutil.Crashpoints).
	crash testutil.Crashpoints
}

// newStack builds a stack whose executor runs src, reg's tools (or a
// wrapper of them), with short leases and backoff and attempts tries.
func newStack(tb testing.TB, maxConns int32, reg *tools.Registry, src executor.ToolSource, attempts int) *stack {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	tb.Cleanup(cancel)
	pool, schema := pgtest.Schema(tb, &pgtest.Opts{MaxConns: maxConns})
	if _, err := riverschema.Migrate(ctx, pool, schema); err != nil {
		tb.Fatal(err)
	}
	d, err := reg.Deriver([]byte(hmacKey))
	if err != nil {
		tb.Fatal(err)
	}
	log := testutil.Logger(tb)
	s := &stack{tb: tb, ctx: ctx, pool: pool, schema: schema}
	if s.store, err = intent.New(intent.Config{Deriver: d, Logger: log}); err != nil {
		tb.Fatal(err)
	}
	if s.ex, err = executor.New(executor.Config{
		DB: pool, Intents: s.store, Tools: src, Failpoints: executor.FailpointFunc(s.crash.Hit), Logger: log,
		Lease: 3 * time.Second, Timeout: 2 * time.Second, LeaseMargin: 500 * time.Millisecond,
		BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond, MaxAttempts: attempts,
	}); err != nil {
		tb.Fatal(err)
	}
	if s.queue, err = river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: schema, Logger: quiet()}); err != nil {
		tb.Fatal(err)
	}
	if s.relay, err = webhook.NewRelay(webhook.RelayConfig{DB: pool, Executor: s.ex, Logger: log, Failpoint: s.crash.Hit}); err != nil {
		tb.Fatal(err)
	}
	return s
}

// harness is one handler, relay and WhatsApp stand-in on a fresh schema.
type harness struct {
	*stack
	t      testing.TB
	wa     *cloudapi.Server
	waURL  string
	mail   *toolstest.Provider
	reg    *tools.Registry
	hook   *webhook.Handler
	mux    *http.ServeMux
	name   string // the provider's name, in the path
	header string // its signature header

	mu  sync.Mutex
	now time.Time // the handler's clock
}

type harnessOpts struct {
	maxConns int32
	waURL    string // a WhatsApp stand-in other than the sandbox one
	pspURL   string // the PSP pix.charge calls
	provider webhook.Provider
	name     string // the provider's name; default provider
	notify   webhook.Notifier
	attempts int // executor MaxAttempts
}

func newHarness(t testing.TB, o *harnessOpts) *harness {
	t.Helper()
	if o == nil {
		o = &harnessOpts{}
	}
	h := &harness{t: t, now: t0}
	var err error
	if h.wa, err = cloudapi.New(cloudapi.Config{Token: waToken, Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.wa)
	t.Cleanup(srv.Close)
	h.waURL = cmp.Or(o.waURL, srv.URL)
	wa, err := tools.NewWhatsAppTemplate(tools.HTTPConfig{BaseURL: h.waURL, Token: waToken})
	if err != nil {
		t.Fatal(err)
	}
	h.mail = toolstest.NewProvider()
	t.Cleanup(h.mail.Close)
	email, err := tools.NewEmailSend(tools.HTTPConfig{BaseURL: h.mail.URL})
	if err != nil {
		t.Fatal(err)
	}
	pix, err := tools.NewPixCharge(tools.HTTPConfig{BaseURL: cmp.Or(o.pspURL, "http://127.0.0.1:1"), Token: pspToken})
	if err != nil {
		t.Fatal(err)
	}
	if h.reg, err = tools.NewRegistry(wa, email, pix); err != nil {
		t.Fatal(err)
	}
	h.stack = newStack(t, cmp.Or(o.maxConns, 4), h.reg, h.reg, cmp.Or(o.attempts, 5))
	p := o.provider
	p.Secret = cmp.Or(p.Secret, secret)
	if p.Tenant == "" && p.Accounts == nil {
		p.Tenant = tenant
	}
	h.name = cmp.Or(o.name, provider)
	h.hook, err = webhook.New(webhook.Config{
		DB: h.pool, Queue: h.queue, Intents: h.store, Providers: map[string]webhook.Provider{h.name: p},
		Notify: o.notify, Clock: h.clock, Logger: testutil.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.header = h.hook.Config().Providers[h.name].SignatureHeader
	h.mux = http.NewServeMux()
	h.mux.Handle("POST "+webhook.Pattern, h.hook)
	return h
}

// clock is the handler's clock: t0 unless set; the zero time means the
// real clock (for senders that sign with it, like the sandbox PSP).
func (h *harness) clock() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.now.IsZero() {
		return time.Now()
	}
	return h.now
}

func (h *harness) setClock(t time.Time) {
	h.mu.Lock()
	h.now = t
	h.mu.Unlock()
}

// reply is one delivery's answer.
type reply struct {
	status int
	body   string
}

func (r reply) verdict() string {
	var v struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal([]byte(r.body), &v)
	return v.Status
}

func (r reply) reason() string {
	var v struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal([]byte(r.body), &v)
	return v.Reason
}

// expectReason delivers body and checks it is answered 200 with verdict
// and reason.
func (h *harness) expectReason(body []byte, verdict, reason string) {
	h.t.Helper()
	r := h.post(body)
	if r.status != http.StatusOK || r.verdict() != verdict || r.reason() != reason {
		h.t.Fatalf("delivery answered %d %s, want 200 %s (%s)", r.status, r.body, verdict, reason)
	}
}

// post delivers body signed now (by the handler's clock) with the
// provider's secret.
func (h *harness) post(body []byte) reply {
	return h.postSigned(body, webhook.Sign(secret, h.clock(), body))
}

func (h *harness) postSigned(body []byte, sig string) reply {
	return h.postHeader(body, h.header, sig)
}

// postHeader delivers body with sig in the named header.
func (h *harness) postHeader(body []byte, header, sig string) reply {
	req := httptest.NewRequest(http.MethodPost, webhook.PathPrefix+h.name, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	if sig != "" {
		req.Header.Set(header, sig)
	}
	rec := httptest.NewRecorder()
	h.mux.ServeHTTP(rec, req)
	return reply{rec.Code, rec.Body.String()}
}

// expect delivers body and checks the answer.
func (h *harness) expect(body []byte, status int, verdict string) {
	h.t.Helper()
	r := h.post(body)
	if r.status != status || r.verdict() != verdict {
		h.t.Fatalf("delivery answered %d %s, want %d %s", r.status, r.body, status, verdict)
	}
}

func (h *harness) count(table string, where ...string) int {
	h.t.Helper()
	q := "SELECT count(*) FROM " + table
	if len(where) > 0 {
		q += " WHERE " + where[0]
	}
	var n int
	if err := h.pool.QueryRow(h.ctx, q).Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// counts is every table a delivery may write, in a fixed order.
func (h *harness) counts() string {
	return fmt.Sprintf("effects=%d orders=%d stale=%d notifications=%d intents=%d jobs=%d log=%d",
		h.count("processed_effects"), h.count("orders"), h.count("stale_events"), h.count("payment_notifications"),
		h.count("intents"), h.count("river_job"), h.count("payment_webhook_log"))
}

func (h *harness) order(ref string) *webhook.Order {
	h.t.Helper()
	o, err := webhook.GetOrder(h.ctx, h.pool, tenant, ref)
	if err != nil {
		h.t.Fatal(err)
	}
	return o
}

// jobs returns the queued notification jobs' args, oldest first.
func (s *stack) jobs() []webhook.NotifyArgs {
	s.tb.Helper()
	rows, err := s.pool.Query(s.ctx, `SELECT args FROM river_job WHERE kind = $1 ORDER BY id`, webhook.KindNotify)
	if err != nil {
		s.tb.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (webhook.NotifyArgs, error) {
		var raw []byte
		var a webhook.NotifyArgs
		if err := r.Scan(&raw); err != nil {
			return a, err
		}
		return a, json.Unmarshal(raw, &a)
	})
	if err != nil {
		s.tb.Fatal(err)
	}
	return out
}

// relayAll runs every queued notification job once, as River would,
// waiting out busy answers.
func (s *stack) relayAll() {
	s.tb.Helper()
	for _, a := range s.jobs() {
		if err := s.relayUntilDone(a); err != nil {
			s.tb.Fatalf("relay: %v", err)
		}
	}
}

// runRelay runs the job's work in its own goroutine; crashed reports that
// it died at an armed failpoint.
func (s *stack) runRelay(a webhook.NotifyArgs) (err error, crashed bool) {
	return testutil.RunCrashable(func() error { return s.relay.Send(s.ctx, a) })
}

func (s *stack) relayUntilDone(a webhook.NotifyArgs) error {
	return outboxtest.UntilDone(s.tb, "relay "+a.EffectKey, func() error { return s.relay.Send(s.ctx, a) })
}

// conversation opens the WhatsApp conversation waID of a customer whose
// open invoice is invoice (180,00 due): the default notifier's last resort
// for a receipt's recipient.
func (s *stack) conversation(waID, customer, invoice string) {
	s.tb.Helper()
	if err := agent.UpsertConversation(s.ctx, s.pool, agent.Conversation{Tenant: tenant, ID: waID, CustomerID: customer,
		InvoiceRef: invoice, AmountDueCents: 18000}); err != nil {
		s.tb.Fatal(err)
	}
}

// elapse stands for the time a crashed worker's lease takes to expire.
func (h *harness) elapse() {
	h.t.Helper()
	if _, err := executortest.ExpireLeases(h.ctx, h.pool); err != nil {
		h.t.Fatal(err)
	}
}

// messages are the stand-in's accepted messages.
func (h *harness) messages() []cloudapi.Message { return h.wa.Messages() }

// failProviderAnswered is hit after the provider answered, before the
// executor records the answer (on every stack's executor's Failpoints).
const failProviderAnswered = executor.FailProviderAnswered

// --- events, in the provider's shape ---

type obj = map[string]any

// event builds a signed-to-be event body.
func event(id, typ string, created time.Time, object obj, extra ...any) []byte {
	ev := obj{"id": id, "object": "event", "type": typ, "created": created.Unix(), "data": obj{"object": object}}
	for i := 0; i+1 < len(extra); i += 2 {
		ev[extra[i].(string)] = extra[i+1]
	}
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	return b
}

func meta(order string) obj { return obj{"order_ref": order, "customer_phone": phone} }

// paid is payment_intent.succeeded for payment pi of order.
func paid(id, pi, order string, created time.Time, extra ...any) []byte {
	return event(id, "payment_intent.succeeded", created, obj{"id": pi, "object": "payment_intent", "metadata": meta(order)}, extra...)
}

// refunded is charge.refunded for the charge of payment pi.
func refunded(id, pi, order string, created time.Time, extra ...any) []byte {
	return event(id, "charge.refunded", created, obj{"id": "ch_" + pi, "object": "charge", "payment_intent": pi, "metadata": meta(order)}, extra...)
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// relayClient is a River client that works QueueNotify with relay, built
// as a user's own client would be (the package has none of its own), with
// short retries for tests. maxAttempts 0 means River's default.
func relayClient(t testing.TB, pool *pgxpool.Pool, schema string, relay *webhook.Relay, maxAttempts int) *river.Client[pgx.Tx] {
	t.Helper()
	workers := river.NewWorkers()
	if err := webhook.AddWorker(workers, relay, 0); err != nil {
		t.Fatal(err)
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:            schema,
		Queues:            map[string]river.QueueConfig{webhook.QueueNotify: {MaxWorkers: 2}},
		Workers:           workers,
		RetryPolicy:       &webhook.RetryPolicy{Base: 10 * time.Millisecond, Max: 20 * time.Millisecond},
		MaxAttempts:       maxAttempts,
		FetchPollInterval: 100 * time.Millisecond,
		Logger:            quiet(),
		TestOnly:          true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return client
}
