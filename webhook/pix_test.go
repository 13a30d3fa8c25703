package webhook_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/executor/executortest"
	"github.com/retrysafe/retrysafe/internal/pixspec"
	"github.com/retrysafe/retrysafe/internal/testutil"
	sandboxpix "github.com/retrysafe/retrysafe/sandbox/apipix"
	"github.com/retrysafe/retrysafe/sandbox/cloudapi"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/apipix"
	"github.com/retrysafe/retrysafe/webhook"
)

const (
	pixProvider = "sandboxpix"
	pixSecret   = "pix-webhook-secret-0123456789"
	pixChave    = "7d9f0335-8dcc-4054-9bf9-0dbd61d36906"
)

// pixHarness is the billing story on API Pix: the sandbox PSP, the
// pix.cob and pix.refund tools run through the executor, the Pix callback
// handler behind an HTTP server the PSP calls, the relay and a WhatsApp
// stand-in for the receipts.
type pixHarness struct {
	*stack
	t      *testing.T
	psp    *sandboxpix.Server
	wa     *cloudapi.Server
	hook   *webhook.PixHandler
	spec   *pixspec.Spec
	faults *pixFaults
	naive  bool // a fresh key (txid) per attempt, as a tool drawing its own would
	hookMu sync.Mutex
	calls  []string // bodies the PSP posted
	answer []string // what the handler answered
}

func newPixHarness(t *testing.T) *pixHarness {
	t.Helper()
	spec, err := pixspec.Load()
	if err != nil {
		t.Fatal(err)
	}
	h := &pixHarness{t: t, spec: spec}

	// The receiver: the Pix route as serve mounts it, recording each call.
	mux := http.NewServeMux()
	hookSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if err := spec.ValidateCallback(b); err != nil {
			t.Errorf("the sandbox's callback is not API Pix: %v", err)
		}
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		h.hookMu.Lock()
		h.calls = append(h.calls, string(b))
		h.answer = append(h.answer, rec.Body.String())
		h.hookMu.Unlock()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(hookSrv.Close)

	if h.psp, err = sandboxpix.New(sandboxpix.Config{ClientID: "cid", ClientSecret: "csecret", Logger: quiet(),
		WebhookURL: hookSrv.URL + webhook.PixPathPrefix + pixProvider + "?hmac=" + webhook.PixURLToken(pixSecret, pixProvider) + "&ignorar="}); err != nil {
		t.Fatal(err)
	}
	pspSrv := httptest.NewServer(h.psp.Handler())
	t.Cleanup(pspSrv.Close)
	if h.wa, err = cloudapi.New(cloudapi.Config{Token: waToken, Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	waSrv := httptest.NewServer(h.wa)
	t.Cleanup(waSrv.Close)

	wa, err := tools.NewWhatsAppTemplate(tools.HTTPConfig{BaseURL: waSrv.URL, Token: waToken})
	if err != nil {
		t.Fatal(err)
	}
	// The tools' traffic is validated too.
	h.faults = &pixFaults{}
	tr := &pixspec.Transport{Spec: spec, Base: h.faults}
	t.Cleanup(func() {
		for _, f := range tr.Failures() {
			t.Errorf("tool traffic not API Pix: %v", f.Err)
		}
	})
	pcfg := apipix.Config{BaseURL: pspSrv.URL + "/api", ClientID: "cid", ClientSecret: "csecret", Chave: pixChave,
		Client: &http.Client{Transport: tr}}
	cob, err := apipix.NewCob(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	refund, err := apipix.NewRefund(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(wa, cob, refund)
	if err != nil {
		t.Fatal(err)
	}
	h.stack = newStack(t, 4, reg, &naiveTools{src: reg, on: func() bool { return h.naive }}, 5)
	if h.hook, err = webhook.NewPix(webhook.Config{DB: h.pool, Queue: h.queue, Intents: h.store, Logger: testutil.Logger(t)},
		map[string]webhook.PixProvider{pixProvider: {Tenant: tenant, Secret: pixSecret}}); err != nil {
		t.Fatal(err)
	}
	mux.Handle("POST "+webhook.PixPattern, h.hook)
	mux.Handle("POST "+webhook.PixCallbackPattern, h.hook)
	return h
}

// charge is one billing conversation's charge: the conversation whose
// open invoice is ref (so the receipt finds the customer), and pix.cob
// executed for it.
func (h *pixHarness) charge(ref string, n int) (key, txid string) {
	h.t.Helper()
	h.conversation("551198765432"+string(rune('0'+n)), "cust-"+ref, ref)
	out, err := h.ex.Execute(h.ctx, executor.Call{Tenant: tenant, Ref: ref, Action: apipix.CobName, Fields: map[string]any{
		"amount": "180,00", "payer_tax_id": testutil.CPF(52998224 + n), "payer_name": "Cliente " + ref, tools.RefField: ref,
	}}, nil)
	if err != nil || out.Status != executor.StatusCompleted {
		h.t.Fatalf("pix.cob: %+v, %v", out, err)
	}
	txid, err = apipix.TxID(out.Key)
	if err != nil {
		h.t.Fatal(err)
	}
	return out.Key, txid
}

func (h *pixHarness) count(q string, args ...any) int {
	h.t.Helper()
	var n int
	if err := h.pool.QueryRow(h.ctx, q, args...).Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

func (h *pixHarness) flush(wantCalls int) {
	h.t.Helper()
	if n := h.psp.Flush(h.ctx); n != wantCalls {
		h.t.Fatalf("the PSP delivered %d callbacks, want %d (answers %v)", n, wantCalls, h.answer)
	}
}

func (h *pixHarness) templates() []string {
	var out []string
	for _, m := range h.wa.Messages() {
		out = append(out, m.Template)
	}
	return out
}

// TestPixGroupedAndRedelivered is the must-show: one call with two Pix,
// then one of them redelivered: two effects, two receipts.
func TestPixGroupedAndRedelivered(t *testing.T) {
	t.Parallel()
	h := newPixHarness(t)
	_, txA := h.charge("NF-2026-000123", 1)
	_, txB := h.charge("NF-2026-000124", 2)
	pa, err := h.psp.Pay(txA, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.psp.Pay(txB, nil); err != nil {
		t.Fatal(err)
	}
	h.flush(1) // both Pix in one call
	var cb sandboxpix.Callback
	json.Unmarshal([]byte(h.calls[0]), &cb)
	if len(cb.Pix) != 2 {
		t.Fatalf("first call carried %d Pix, want 2", len(cb.Pix))
	}
	if err := h.psp.Redeliver(pa.EndToEndID); err != nil {
		t.Fatal(err)
	}
	h.flush(1)
	if !strings.Contains(h.answer[1], `"verdict":"duplicate"`) {
		t.Fatalf("redelivery answered %s, want duplicate", h.answer[1])
	}
	h.relayAll()
	h.relayAll() // a relay run twice sends nothing more
	effects := h.count(`SELECT count(*) FROM processed_effects WHERE tenant_id = $1 AND transition = 'order.paid'`, tenant)
	receipts := len(h.wa.Messages())
	t.Logf("calls=%d pix_in_first_call=%d effects=%d receipts=%d templates=%v", len(h.calls), len(cb.Pix), effects, receipts, h.templates())
	if effects != 2 || receipts != 2 {
		t.Fatalf("effects=%d receipts=%d, want 2 and 2", effects, receipts)
	}
	for _, ref := range []string{"NF-2026-000123", "NF-2026-000124"} {
		o, err := webhook.GetOrder(h.ctx, h.pool, tenant, ref)
		if err != nil || o.Status != webhook.StatusPaid {
			t.Fatalf("order %s: %+v, %v", ref, o, err)
		}
	}
}

func (h *pixHarness) refund(ref, e2e, amount string) (*executor.Outcome, error) {
	return h.ex.Execute(h.ctx, executor.Call{Tenant: tenant, Ref: ref, Action: apipix.RefundName,
		Fields: map[string]any{"e2eid": e2e, "amount": amount, tools.RefField: ref}}, nil)
}

func TestPixPartialThenFullRefund(t *testing.T) {
	t.Parallel()
	h := newPixHarness(t)
	_, tx := h.charge("NF-1", 1)
	p, err := h.psp.Pay(tx, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.flush(1)
	if out, err := h.refund("NF-1:refund:1", p.EndToEndID, "50,00"); err != nil || out.Status != executor.StatusCompleted {
		t.Fatalf("refund 1: %+v %v", out, err)
	}
	h.flush(1) // settled DEVOLVIDO and notified
	if o, _ := webhook.GetOrder(h.ctx, h.pool, tenant, "NF-1"); o.Status != webhook.StatusPartiallyRefunded {
		t.Fatalf("after a partial refund the order is %s, want partially_refunded (as a card's partial refund)", o.Status)
	}
	// More than what is left is refused before any PUT.
	puts := h.psp.Stats().RefundPuts
	if out, err := h.refund("NF-1:refund:2", p.EndToEndID, "130,01"); err != nil || out.Status != executor.StatusFailed {
		t.Fatalf("over-refund: %+v %v, want failed", out, err)
	}
	if h.psp.Stats().RefundPuts != puts {
		t.Fatal("the over-refund reached the PSP")
	}
	if out, err := h.refund("NF-1:refund:3", p.EndToEndID, "130,00"); err != nil || out.Status != executor.StatusCompleted {
		t.Fatalf("refund 3: %+v %v", out, err)
	}
	h.flush(1)
	h.psp.Redeliver(p.EndToEndID)
	h.flush(1)
	if o, _ := webhook.GetOrder(h.ctx, h.pool, tenant, "NF-1"); o.Status != webhook.StatusRefunded {
		t.Fatalf("after the rest was refunded the order is %s, want refunded", o.Status)
	}
	byTransition := map[string]int{}
	rows, _ := h.pool.Query(h.ctx, `SELECT transition, count(*) FROM processed_effects WHERE tenant_id = $1 GROUP BY 1`, tenant)
	for rows.Next() {
		var tr string
		var n int
		rows.Scan(&tr, &n)
		byTransition[tr] = n
	}
	rows.Close()
	if byTransition["order.paid"] != 1 || byTransition["order.partially_refunded"] != 1 || byTransition["order.refunded"] != 1 {
		t.Fatalf("effects %v, want one paid, one partial refund, one refund", byTransition)
	}
	h.relayAll()
	got := h.templates()
	t.Logf("templates sent: %v", got)
	if strings.Join(got, ",") != "pagamento_confirmado,reembolso_parcial,reembolso_confirmado" {
		t.Fatalf("templates %v", got)
	}
}

func (h *pixHarness) post(path string, body string, hdr ...string) (int, string) {
	h.t.Helper()
	mux := http.NewServeMux()
	mux.Handle("POST "+webhook.PixPattern, h.hook)
	mux.Handle("POST "+webhook.PixCallbackPattern, h.hook)
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func TestPixUnknownTxIDRecordedAnd200(t *testing.T) {
	t.Parallel()
	h := newPixHarness(t)
	body := `{"pix":[{"endToEndId":"E12345678202612011200abcdefghijk","txid":"abcdefabcdefabcdefabcdefabcdef123","valor":"10.00","horario":"2026-12-01T12:00:00.000Z"},
		{"endToEndId":"E12345678202612011200abcdefghijz","valor":"5.00","horario":"2026-12-01T12:00:01Z"}]}`
	if err := h.spec.ValidateCallback([]byte(body)); err != nil {
		t.Fatal(err)
	}
	code, ans := h.post(webhook.PixPathPrefix+pixProvider+"/pix", body, webhook.DefaultPixSecretHeader, pixSecret)
	if code != 200 || !strings.Contains(ans, webhook.ReasonUnknownTxID) || !strings.Contains(ans, webhook.ReasonNoTxID) {
		t.Fatalf("%d %s", code, ans)
	}
	if n := h.count(`SELECT count(*) FROM payment_webhook_log WHERE tenant_id = $1 AND verdict = 'ignored' AND reason IN ('unknown_txid', 'no_txid')`, tenant); n != 2 {
		t.Fatalf("%d log rows, want 2", n)
	}
	if n := h.count(`SELECT count(*) FROM processed_effects`); n != 0 {
		t.Fatalf("%d effects for Pix that are not ours", n)
	}
}

func TestPixAuthentication(t *testing.T) {
	t.Parallel()
	h := newPixHarness(t)
	body := `{"pix":[]}`
	path := webhook.PixPathPrefix + pixProvider
	for name, c := range map[string]struct {
		path string
		hdr  []string
		want int
	}{
		"nothing":         {path, nil, 401},
		"wrong header":    {path, []string{webhook.DefaultPixSecretHeader, pixSecret + "x"}, 401},
		"wrong token":     {path + "?hmac=" + webhook.PixURLToken("other-secret-0123456789", pixProvider), nil, 401},
		"raw secret":      {path + "?hmac=" + pixSecret, nil, 401},
		"header":          {path, []string{webhook.DefaultPixSecretHeader, pixSecret}, 200},
		"token":           {path + "?hmac=" + webhook.PixURLToken(pixSecret, pixProvider) + "&ignorar=/pix", nil, 200},
		"token with /pix": {path + "/pix?hmac=" + webhook.PixURLToken(pixSecret, pixProvider), nil, 200},
		"unknown":         {webhook.PixPathPrefix + "nobody", []string{webhook.DefaultPixSecretHeader, pixSecret}, 404},
	} {
		if code, ans := h.post(c.path, body, c.hdr...); code != c.want {
			t.Errorf("%s: %d %s, want %d", name, code, ans, c.want)
		}
	}
	if n := h.count(`SELECT count(*) FROM payment_webhook_log`); n != 0 {
		t.Fatalf("refused calls cost %d writes", n)
	}
	if code, _ := h.post(path, `{"nope":1}`, webhook.DefaultPixSecretHeader, pixSecret); code != 400 {
		t.Fatalf("not a callback: %d, want 400", code)
	}
}

// TestPixOrderingGuardUsesHorario delivers a refund settled before the
// payment's horario: the order keeps its state, the effect is stale.
func TestPixOrderingGuardUsesHorario(t *testing.T) {
	t.Parallel()
	h := newPixHarness(t)
	_, tx := h.charge("NF-9", 1)
	pay := func(devolucoes string) string {
		return `{"pix":[{"endToEndId":"E12345678202612011200abcdefghijk","txid":"` + tx + `","valor":"180.00","horario":"2026-12-01T12:00:00.000Z"` + devolucoes + `}]}`
	}
	code, ans := h.post(webhook.PixPathPrefix+pixProvider, pay(""), webhook.DefaultPixSecretHeader, pixSecret)
	if code != 200 || !strings.Contains(ans, `"processed"`) {
		t.Fatalf("%d %s", code, ans)
	}
	early := pay(`,"devolucoes":[{"id":"d1","rtrId":"D12345678202612011200abcdefghijk","valor":"180.00","status":"DEVOLVIDO","horario":{"solicitacao":"2026-12-01T11:59:00Z","liquidacao":"2026-12-01T11:59:30Z"}}]`)
	if err := h.spec.ValidateCallback([]byte(early)); err != nil {
		t.Fatal(err)
	}
	code, ans = h.post(webhook.PixPathPrefix+pixProvider, early, webhook.DefaultPixSecretHeader, pixSecret)
	if code != 200 || !strings.Contains(ans, `"refunds":["stale"]`) {
		t.Fatalf("a refund settled before the payment: %d %s, want stale", code, ans)
	}
	if o, _ := webhook.GetOrder(h.ctx, h.pool, tenant, "NF-9"); o.Status != webhook.StatusPaid {
		t.Fatalf("order %s, want paid", o.Status)
	}
}

func TestPixProvidersConfig(t *testing.T) {
	t.Parallel()
	ps, err := webhook.ParsePixProviders("efi="+pixSecret, "efi=acme")
	if err != nil || ps["efi"].Tenant != "acme" || ps["efi"].HMACParam != "hmac" {
		t.Fatalf("%+v %v", ps, err)
	}
	for _, c := range [][2]string{{"efi=short", "efi=acme"}, {"efi=" + pixSecret, "other=acme"}, {"", ""}} {
		if _, err := webhook.ParsePixProviders(c[0], c[1]); err == nil {
			t.Errorf("%q %q accepted", c[0], c[1])
		}
	}
}

// pixFaults asks the sandbox PSP for a fault (X-Sandbox-Fault) on the next
// request matching a method and a path suffix.
type pixFaults struct {
	mu  sync.Mutex
	arm [][3]string
}

func (f *pixFaults) Arm(method, suffix, spec string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.arm = append(f.arm, [3]string{method, suffix, spec})
}

func (f *pixFaults) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	for i, a := range f.arm {
		if r.Method == a[0] && strings.HasSuffix(r.URL.Path, a[1]) {
			r = r.Clone(r.Context())
			r.Header.Set("X-Sandbox-Fault", a[2])
			f.arm = append(f.arm[:i], f.arm[i+1:]...)
			break
		}
	}
	f.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// naiveTools, when on, hands each attempt a fresh random key: the
// --naive of the restart test, a tool that draws its own txid.
type naiveTools struct {
	src executor.ToolSource
	on  func() bool
}

func (n *naiveTools) Tool(name string) (tools.Tool, bool) {
	t, ok := n.src.Tool(name)
	if !ok || !n.on() {
		return t, ok
	}
	return &naiveTool{Tool: t}, true
}

type naiveTool struct{ tools.Tool }

func (t *naiveTool) Execute(ctx context.Context, _ string, p derive.Payload) (json.RawMessage, error) {
	var b [32]byte
	rand.Read(b[:])
	return t.Tool.Execute(ctx, hex.EncodeToString(b[:]), p)
}

func (h *pixHarness) elapse() {
	h.t.Helper()
	if _, err := executortest.ExpireLeases(h.ctx, h.pool); err != nil {
		h.t.Fatal(err)
	}
}

func (h *pixHarness) cobCall(ref string, n int) executor.Call {
	h.t.Helper()
	h.conversation("551198765432"+string(rune('0'+n)), "cust-"+ref, ref)
	return executor.Call{Tenant: tenant, Ref: ref, Action: apipix.CobName, Fields: map[string]any{
		"amount": "180,00", "payer_tax_id": testutil.CPF(52998224 + n), "payer_name": "Cliente " + ref, tools.RefField: ref,
	}}
}

// TestPixCrashesChargeOnceAndRefundOnce kills the charge and the refund
// at each point a worker can die or lose an answer, then lets the
// redelivery (another Execute of the same call) finish: one cob per txid,
// never overwritten, one key, one receipt, one refund. The naive variant
// (a fresh txid per attempt) charges twice: the test can fail.
func TestPixCrashesChargeOnceAndRefundOnce(t *testing.T) {
	t.Parallel()
	for _, naive := range []bool{false, true} {
		h := newPixHarness(t)
		h.naive = naive
		scenarios := []string{"crash-after-answer", "drop-after", "fail-after", "fail-before"}
		keys := map[string]string{}
		for i, sc := range scenarios {
			ref := "NF-" + sc
			call := h.cobCall(ref, i)
			// The PUT's path ends with the txid; any PUT to /cob/ will do.
			switch sc {
			case "crash-after-answer":
				h.crash.Arm(failProviderAnswered, 1)
			default:
				h.faults.Arm(http.MethodPut, "", sc)
			}
			_, crashed := testutil.RunCrashable(func() error { _, err := h.ex.Execute(h.ctx, call, nil); return err })
			if crashed {
				h.elapse() // the dead worker's lease runs out
			}
			out, err := h.ex.Execute(h.ctx, call, nil)
			if err != nil || out.Status != executor.StatusCompleted {
				t.Fatalf("naive=%v %s: %+v %v", naive, sc, out, err)
			}
			keys[ref] = out.Key
		}
		st := h.psp.Stats()
		t.Logf("naive=%v: cob_created=%d cob_puts=%d cob_overwritten=%d cob_reads=%d", naive, st.CobCreated, st.CobPuts, st.CobOverwritten, st.CobReads)
		if naive {
			if st.CobCreated <= len(scenarios) {
				t.Fatalf("naive: %d charges for %d intents: the naive run should have duplicated some", st.CobCreated, len(scenarios))
			}
			continue
		}
		if st.CobCreated != len(scenarios) || st.CobOverwritten != 0 {
			t.Fatalf("%d charges for %d intents, %d overwritten", st.CobCreated, len(scenarios), st.CobOverwritten)
		}
		// Every intent's txid is its key's: pay them all.
		var e2e string
		for _, k := range keys {
			p, err := h.psp.Pay(k[:apipix.IDLength], nil)
			if err != nil {
				t.Fatal(err)
			}
			e2e = p.EndToEndID
		}
		h.flush(1)
		// A refund killed after the PSP answered, then redelivered.
		rcall := executor.Call{Tenant: tenant, Ref: "refund-1", Action: apipix.RefundName,
			Fields: map[string]any{"e2eid": e2e, "amount": "10,00", tools.RefField: "refund-1"}}
		h.crash.Arm(failProviderAnswered, 1)
		if _, crashed := testutil.RunCrashable(func() error { _, err := h.ex.Execute(h.ctx, rcall, nil); return err }); !crashed {
			t.Fatal("the refund did not crash")
		}
		h.elapse()
		if out, err := h.ex.Execute(h.ctx, rcall, nil); err != nil || out.Status != executor.StatusCompleted {
			t.Fatalf("refund after the crash: %+v %v", out, err)
		}
		h.flush(1)
		h.relayAll()
		st = h.psp.Stats()
		paid := h.count(`SELECT count(*) FROM processed_effects WHERE transition = 'order.paid'`)
		partial := h.count(`SELECT count(*) FROM processed_effects WHERE transition = 'order.partially_refunded'`)
		t.Logf("refund_puts=%d refunds_created=%d paid_effects=%d partial_refund_effects=%d receipts=%d", st.RefundPuts, st.RefundsCreated, paid, partial, len(h.wa.Messages()))
		if st.RefundsCreated != 1 || st.RefundPuts != 1 || paid != len(scenarios) || partial != 1 || len(h.wa.Messages()) != len(scenarios)+1 {
			t.Fatalf("refunds %d (PUTs %d), paid effects %d, partial %d, messages %d", st.RefundsCreated, st.RefundPuts, paid, partial, len(h.wa.Messages()))
		}
		// One key per intent: the frozen row's, the txid's.
		frozen := map[string]string{}
		for _, action := range []string{apipix.CobName, apipix.RefundName} {
			is, err := executortest.Intents(h.ctx, h.pool, tenant, action)
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range is {
				frozen[in.Ref] = in.Key
			}
		}
		for ref, k := range keys {
			if frozen[ref] != k {
				t.Fatalf("%s: frozen key %q, executed %q", ref, frozen[ref], k)
			}
		}
	}
}
