package sidecar_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/server/sidecar"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

func TestAuth(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	body := `{"intent_ref":"inv-1","fields":` + chargeFields(`180`, cpfDigits) + `}`
	for _, tc := range []struct{ name, header string }{
		{"missing", ""},
		{"unknown token", "Bearer not-a-token"},
		{"prefix of a token", "Bearer " + tokenA[:len(tokenA)-1]},
		{"token plus a byte", "Bearer " + tokenA + "x"},
		{"wrong scheme", "Basic " + tokenA},
		{"bare token", tokenA},
		{"empty bearer", "Bearer "},
	} {
		for _, path := range []string{"/v1/tools/pix.charge/execute", "/v1/intents/inv-1/pix.charge", "/v1/tools"} {
			method := http.MethodGet
			if strings.HasSuffix(path, "/execute") {
				method = http.MethodPost
			}
			req, _ := http.NewRequest(method, h.url+path, strings.NewReader(body))
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" ||
				resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s %s: HTTP %d, WWW-Authenticate %q", tc.name, path, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
		}
	}
	if h.count("intents") != 0 || h.psp.Requests() != 0 {
		t.Fatal("an unauthenticated request wrote or called something")
	}
	// The scheme is case-insensitive (RFC 6750 / RFC 9110).
	req, _ := http.NewRequest(http.MethodGet, h.url+"/v1/tools", nil)
	req.Header.Set("Authorization", "bearer "+tokenB)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("lower-case scheme: HTTP %d", resp.StatusCode)
	}
}

// Tenant B can neither read tenant A's intent nor act on it: the same
// intent_ref under B is B's own intent, with its own key and its own charge.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	a := h.execute(tokenA, "inv-shared", chargeFields(`180`, cpfDigits)).exec(t)

	if r := h.do(http.MethodGet, "/v1/intents/inv-shared/pix.charge", tokenB, ""); r.status != http.StatusNotFound {
		t.Fatalf("B reads A's intent: HTTP %d %s", r.status, r.body)
	} else if strings.Contains(string(r.body), a.IdempotencyKey) || strings.Contains(string(r.body), cpfDigits) {
		t.Fatal("the 404 leaks A's intent")
	}

	b := h.execute(tokenB, "inv-shared", chargeFields(`999`, cpfDigits)).exec(t)
	if !b.Created || b.Replayed || b.IdempotencyKey == a.IdempotencyKey || len(b.DivergentFields) != 0 {
		t.Fatalf("B's execute touched A's intent: %+v", b)
	}
	if h.psp.Count(chargePath) != 2 {
		t.Fatalf("%d charges, want A's and B's", h.psp.Count(chargePath))
	}
	va := getIntent(t, h, tokenA, "inv-shared")
	if va.Intent.IdempotencyKey != a.IdempotencyKey || va.Intent.Payload["amount"] != "18000" {
		t.Fatalf("A's intent changed: %+v", va.Intent)
	}
	vb := getIntent(t, h, tokenB, "inv-shared")
	if vb.Intent.IdempotencyKey != b.IdempotencyKey || vb.Intent.Payload["amount"] != "99900" {
		t.Fatalf("B sees %+v", vb.Intent)
	}
}

func getIntent(t *testing.T, h *harness, token, ref string) sidecar.IntentView {
	t.Helper()
	r := h.do(http.MethodGet, "/v1/intents/"+url.PathEscape(ref)+"/pix.charge", token, "")
	if r.status != http.StatusOK {
		t.Fatalf("GET intent %q: HTTP %d %s", ref, r.status, r.body)
	}
	var v sidecar.IntentView
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestGetIntent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ref := "fatura/2026-11 nº 7" // a slash and non-ASCII survive the path
	o := h.execute(tokenA, ref, chargeFields(`"180,00"`, cpfPunct)).exec(t)
	v := getIntent(t, h, tokenA, ref)
	if v.Intent.IntentRef != ref || v.Intent.IdempotencyKey != o.IdempotencyKey || v.Intent.SourceRef != "msg-1" || v.Intent.RulesVersion != 3 {
		t.Fatalf("intent %+v", v.Intent)
	}
	want := map[string]string{"amount": "18000", "customer_id": "cust-42", "pix_key": cpfDigits, "pix_key_type": "cpf", "intent_ref": ref}
	for k, w := range want {
		if v.Intent.Payload[k] != w {
			t.Errorf("payload[%s] = %q, want %q", k, v.Intent.Payload[k], w)
		}
	}
	if v.Status != "completed" || v.Action == nil || v.Action.Status != "completed" || v.Action.Attempt != 1 || len(v.Action.Response) == 0 {
		t.Fatalf("state %q, action %+v", v.Status, v.Action)
	}
	if v.Revisions == nil || len(v.Revisions) != 0 {
		t.Fatalf("revisions %v, want []", v.Revisions)
	}
	if r := h.do(http.MethodGet, "/v1/intents/nope/pix.charge", tokenA, ""); r.status != http.StatusNotFound || r.problem(t).Type != "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#not-found" {
		t.Fatalf("unknown ref: HTTP %d", r.status)
	}
	if r := h.do(http.MethodGet, "/v1/intents/"+url.PathEscape(ref)+"/email.send", tokenA, ""); r.status != http.StatusNotFound {
		t.Fatalf("other action: HTTP %d", r.status)
	}
}

// An amended intent shows its history, and a not-yet-claimed intent shows
// not_started.
func TestGetIntentRevisions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.psp.SetFault(func(toolstest.Request) toolstest.Fault { return toolstest.Reject })
	first := h.execute(tokenA, "inv-amend", chargeFields(`180`, cpfDigits)).exec(t)
	if first.Status != "failed" {
		t.Fatalf("%+v", first)
	}
	res, err := h.store.Amend(context.Background(), h.pool, intent.AmendParams{
		Tenant: "tenant-a", Ref: "inv-amend", Action: "pix.charge",
		Fields: map[string]any{"customer_id": "cust-42", "amount": "180", "pix_key": "111.444.777-35", "pix_key_type": "cpf"},
		Reason: "wrong pix key", By: "op@test",
	})
	if err != nil {
		t.Fatal(err)
	}
	v := getIntent(t, h, tokenA, "inv-amend")
	if v.Status != "not_started" || v.Action != nil || v.Intent.Revision != 1 || len(v.Revisions) != 1 {
		t.Fatalf("after amend: status %q action %+v revisions %+v", v.Status, v.Action, v.Revisions)
	}
	rv := v.Revisions[0]
	if rv.OldKey != first.IdempotencyKey || rv.NewKey != res.Intent.Key || rv.Reason != "wrong pix key" || rv.AmendedBy != "op@test" || rv.OldPayload["amount"] != "18000" {
		t.Fatalf("revision %+v", rv)
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	if r := h.do(http.MethodGet, "/healthz", "", ""); r.status != http.StatusOK {
		t.Fatalf("healthz: HTTP %d", r.status)
	}
	r := h.do(http.MethodGet, "/readyz", "", "")
	var hl sidecar.Health
	if err := json.Unmarshal(r.body, &hl); err != nil || r.status != http.StatusOK || hl.Status != "ok" || hl.Migrations.Current != hl.Migrations.Latest || hl.Migrations.Latest == 0 {
		t.Fatalf("readyz: HTTP %d %s", r.status, r.body)
	}
	// A schema that was never migrated is not ready.
	h2 := newHarness(t, &harnessOpts{schema: "never_migrated"})
	r = h2.do(http.MethodGet, "/readyz", "", "")
	if err := json.Unmarshal(r.body, &hl); err != nil || r.status != http.StatusServiceUnavailable || hl.Migrations.Current != 0 {
		t.Fatalf("readyz on an empty schema: HTTP %d %s", r.status, r.body)
	}
	// A closed pool: the database is unreachable.
	h.pool.Close()
	if r := h.do(http.MethodGet, "/readyz", "", ""); r.status != http.StatusServiceUnavailable {
		t.Fatalf("readyz with the pool closed: HTTP %d %s", r.status, r.body)
	}
	// ...and an execution says so, retryable, without a 500.
	r = h.execute(tokenA, "inv-down", chargeFields(`180`, cpfDigits))
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "1" || r.problem(t).Type != "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#unavailable" {
		t.Fatalf("execute with the pool closed: HTTP %d %s", r.status, r.body)
	}
	if h.psp.Requests() != 0 {
		t.Fatal("the PSP was called without a claim")
	}
}

// Metrics answer, count by tenant/action/outcome, and carry no field value.
func TestMetricsAndLogsHoldNoPersonalData(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.execute(tokenA, "inv-m", chargeFields(`"180,00"`, cpfPunct))
	h.execute(tokenA, "inv-m", chargeFields(`"180.00"`, cpfDigits))
	h.execute(tokenA, "inv-m", chargeFields(`"181,00"`, cpfDigits))
	h.execute(tokenA, "inv-bad", chargeFields(`"x"`, cpfDigits))

	for metric, want := range map[string]string{
		`retrysafe_executions_total{action="pix.charge",outcome="completed",tenant="tenant-a"}`: "3",
		`retrysafe_executions_total{action="pix.charge",outcome="invalid",tenant="tenant-a"}`:   "1",
		`retrysafe_replays_total{action="pix.charge",outcome="completed",tenant="tenant-a"}`:    "2",
		`retrysafe_divergences_total{action="pix.charge",tenant="tenant-a"}`:                    "1",
		`retrysafe_provider_call_duration_seconds_count{action="pix.charge",outcome="ok"}`:      "1",
		// No connection was lost; the series is there to alert on.
		`retrysafe_lost_writes_total{outcome="not_through",write="completion"}`: "0",
	} {
		if got := scrape(t, h, metric); got != want {
			t.Errorf("%s = %q, want %s", metric, got, want)
		}
	}
	body := h.do(http.MethodGet, "/metrics", "", "").body
	logs := h.logs.String()
	if !strings.Contains(logs, "tenant=tenant-a") || !strings.Contains(logs, "route=\"POST /v1/tools/{action}/execute\"") {
		t.Fatalf("request logs missing:\n%s", logs)
	}
	for _, secret := range []string{cpfDigits, cpfPunct, "cust-42", "inv-m", "181,00"} {
		if strings.Contains(string(body), secret) {
			t.Errorf("/metrics contains %q", secret)
		}
		if secret != "inv-m" && strings.Contains(logs, secret) {
			t.Errorf("logs contain %q:\n%s", secret, logs)
		}
	}
}

// scrape returns the value of one series of /metrics, "" when absent.
func scrape(t *testing.T, h *harness, series string) string {
	t.Helper()
	r := h.do(http.MethodGet, "/metrics", "", "")
	if r.status != http.StatusOK {
		t.Fatalf("/metrics: HTTP %d", r.status)
	}
	sc := bufio.NewScanner(strings.NewReader(string(r.body)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return v
		}
	}
	return ""
}

func TestToolsList(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	r := h.do(http.MethodGet, "/v1/tools", tokenA, "")
	var out struct{ Tools []sidecar.ToolJSON }
	if err := json.Unmarshal(r.body, &out); err != nil || r.status != http.StatusOK || len(out.Tools) != 1 {
		t.Fatalf("HTTP %d %s", r.status, r.body)
	}
	tl := out.Tools[0]
	if tl.Name != "pix.charge" || tl.FunctionName != "pix_charge" || !tl.Idempotent || strings.Contains(string(tl.Parameters), "intent_ref") {
		t.Fatalf("%+v %s", tl, tl.Parameters)
	}
}

// The reconciler settles an action whose lease expired (a worker died after
// its claim) by asking the PSP for the key, and counts it.
func TestReconcilerSettlesExpiredLease(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.psp.SetFault(func(r toolstest.Request) toolstest.Fault {
		if r.N == 1 {
			return toolstest.DropAfter // charged, answer lost
		}
		return toolstest.None
	})
	r := h.execute(tokenA, "inv-rec", chargeFields(`180`, cpfDigits))
	if o := r.exec(t); o.Status != "in_flight" {
		t.Fatalf("after a dropped answer: HTTP %d %+v", r.status, o)
	}
	rec := &sidecar.Reconciler{Executor: h.ex, Metrics: h.m, Logger: h.log}
	deadline := time.Now().Add(10 * time.Second)
	var got executor.ReconcileResult
	for got.Completed == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		res, err := rec.Once(context.Background())
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		got.TakenOver += res.TakenOver
		got.Completed += res.Completed
	}
	if got.TakenOver != 1 || got.Completed != 1 {
		t.Fatalf("reconciled %+v", got)
	}
	if h.psp.Count(chargePath) != 1 {
		t.Fatalf("%d charges", h.psp.Count(chargePath))
	}
	if o := h.execute(tokenA, "inv-rec", chargeFields(`180`, cpfDigits)).exec(t); o.Status != "completed" || !o.Replayed {
		t.Fatalf("after reconcile: %+v", o)
	}
	if v := scrape(t, h, `retrysafe_reconciler_actions_total{outcome="completed"}`); v != "1" {
		t.Fatalf("reconciler_actions_total{completed} = %q", v)
	}
}
