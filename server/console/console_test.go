package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/server/console"
	"github.com/retrysafe/retrysafe/webhook"
)

// Without a session every page and every form answers 401 with the
// sign-in page, and changes nothing.
func TestSignInRequired(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.inReview("tenant-a", "NF-1", testutil.CPF(1))
	b := e.browser()
	for _, p := range []string{"/console/", "/console/queue", "/console/now", "/console/search?q=NF-1",
		"/console/intent?" + url.Values{"tenant": {"tenant-a"}, "key": {key}}.Encode()} {
		res, body := b.get(p)
		if res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "Operator sign-in") || strings.Contains(body, "NF-1<") {
			t.Errorf("GET %s: %d, want 401 and the sign-in page", p, res.StatusCode)
		}
	}
	res, _ := b.post("/console/settle", url.Values{"tenant": {"tenant-a"}, "key": {key}, "status": {"failed"}, "reason": {"x"}, "confirm": {"yes"}}, nil)
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST settle without a session: %d, want 401", res.StatusCode)
	}
	// A tenant's API token, or a wrong token, does not sign in.
	for _, tok := range []string{"tenant-a-api-token", "", e.tokenA + "x"} {
		if res, _ := b.post("/console/signin", url.Values{"token": {tok}}, nil); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("sign in with %q: %d, want 401", tok, res.StatusCode)
		}
	}
	if a := actionRow(t, e.pool, "tenant-a", key); a.Status != executor.RowReview {
		t.Fatalf("status %s after unauthenticated requests", a.Status)
	}
	// Signing out ends the session: the same cookie no longer opens a page.
	b.signIn(e.tokenA)
	if res, _ := b.post("/console/signout", b.form(), nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d", res.StatusCode)
	}
	if res, _ := b.get("/console/"); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after sign out: %d", res.StatusCode)
	}
}

// A POST forged from another site is refused whatever it carries; so is a
// same-site POST without the session's CSRF token.
func TestCrossSiteForgeryRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.inReview("tenant-a", "NF-2", testutil.CPF(2))
	b := e.browser()
	b.signIn(e.tokenA)
	settle := b.form("tenant", "tenant-a", "key", key, "status", "failed", "reason", "forged", "confirm", "yes")
	for name, hdr := range map[string]map[string]string{
		"Sec-Fetch-Site cross-site":      {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
		"Origin of another site":         {"Origin": "https://evil.example"},
		"Sec-Fetch-Site same-site (sub)": {"Sec-Fetch-Site": "same-site", "Origin": "http://other.localhost"},
	} {
		res, body := b.post("/console/settle", settle, hdr)
		if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "Cross-site request refused") {
			t.Errorf("%s: %d, want 403", name, res.StatusCode)
		}
	}
	// The cookie alone (a same-origin request without the form's token).
	noToken := b.form("tenant", "tenant-a", "key", key, "status", "failed", "reason", "forged", "confirm", "yes")
	noToken.Del("csrf")
	if res, _ := b.post("/console/settle", noToken, nil); res.StatusCode != http.StatusForbidden {
		t.Errorf("without the CSRF token: %d, want 403", res.StatusCode)
	}
	noToken.Set("csrf", "not-the-token")
	if res, _ := b.post("/console/settle", noToken, map[string]string{"Sec-Fetch-Site": "same-origin"}); res.StatusCode != http.StatusForbidden {
		t.Errorf("with a wrong CSRF token: %d, want 403", res.StatusCode)
	}
	// Sign-in is a state change too (login CSRF).
	if res, _ := e.browser().post("/console/signin", url.Values{"token": {e.tokenA}}, map[string]string{"Sec-Fetch-Site": "cross-site"}); res.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site sign-in: %d, want 403", res.StatusCode)
	}
	a := actionRow(t, e.pool, "tenant-a", key)
	if a.Status != executor.RowReview {
		t.Fatalf("a forged request settled the action: %s", a.Status)
	}
	var audits int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM console_audit WHERE kind <> 'lookup'`).Scan(&audits); err != nil || audits != 0 {
		t.Fatalf("%d settle or reveal records after forged requests (%v)", audits, err)
	}
	// The genuine form goes through.
	if res, body := b.post("/console/settle", settle, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": e.srv.URL}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("genuine settle: %d %s", res.StatusCode, body)
	}
}

// An operator scoped to tenant-a sees nothing of tenant-b: not its queue,
// not its intents by key, not in search, and cannot ask about or settle
// its actions.
func TestTenantScope(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	keyA := e.inReview("tenant-a", "NF-A", testutil.CPF(3))
	keyB := e.inReview("tenant-b", "NF-B", testutil.CPF(4))
	alice := e.browser()
	alice.signIn(e.tokenA)

	_, q := alice.get("/console/")
	if !strings.Contains(q, "NF-A") || strings.Contains(q, "NF-B") || strings.Contains(q, keyB) {
		t.Fatalf("alice's queue shows the wrong tenants")
	}
	for _, p := range []string{
		"/console/intent?" + url.Values{"tenant": {"tenant-b"}, "key": {keyB}}.Encode(),
		"/console/intent?" + url.Values{"tenant": {"tenant-a"}, "key": {keyB}}.Encode(),
	} {
		res, body := alice.get(p)
		if res.StatusCode != http.StatusNotFound || strings.Contains(body, "NF-B") {
			t.Errorf("GET %s: %d, want 404 and nothing of tenant-b", p, res.StatusCode)
		}
	}
	for _, p := range []string{"/console/queue?tenant=tenant-b", "/console/search?tenant=tenant-b&q=NF-B"} {
		if res, body := alice.get(p); res.StatusCode != http.StatusForbidden || strings.Contains(body, "NF-B") {
			t.Errorf("GET %s: %d, want 403", p, res.StatusCode)
		}
	}
	if res, _ := alice.get("/console/search?tenant=tenant-a&q=" + keyB); res.StatusCode != http.StatusOK {
		t.Errorf("search: %d", res.StatusCode)
	} else if _, body := alice.get("/console/search?tenant=tenant-a&q=NF-B"); !strings.Contains(body, "Nothing under tenant tenant-a matches") {
		t.Errorf("search for tenant-b's ref under tenant-a found something")
	}
	for _, p := range []string{"/console/lookup", "/console/settle", "/console/reveal"} {
		for _, tenant := range []string{"tenant-b", "tenant-a"} {
			res, body := alice.post(p, alice.form("tenant", tenant, "key", keyB, "status", "failed", "reason", "x", "confirm", "yes"), nil)
			if res.StatusCode != http.StatusNotFound || strings.Contains(body, "NF-B") {
				t.Errorf("POST %s as %s: %d, want 404", p, tenant, res.StatusCode)
			}
		}
	}
	if a := actionRow(t, e.pool, "tenant-b", keyB); a.Status != executor.RowReview {
		t.Fatalf("tenant-b's action: %s", a.Status)
	}
	// Bob sees his own, and not alice's.
	bob := e.browser()
	bob.signIn(e.tokenB)
	if _, q := bob.get("/console/"); !strings.Contains(q, "NF-B") || strings.Contains(q, "NF-A") || strings.Contains(q, keyA) {
		t.Fatalf("bob's queue shows the wrong tenants")
	}
}

// The whole path over HTTP: the queue shows the action, a lookup asks the
// provider and is recorded, settling asks for confirmation first, then
// records who and why in the action and its history; the payload is masked
// until revealed, the reveal is recorded, and no personal value reaches
// the logs.
func TestReviewLookupSettle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cpf := testutil.CPF(5)
	key := e.inReview("tenant-a", "NF-2026-000123", cpf)
	b := e.browser()
	b.signIn(e.tokenA)

	_, q := b.get("/console/")
	// Showing the queue asked the provider what it says now.
	for _, want := range []string{"NF-2026-000123", "pix.charge", `class="attempts">2<`, "uncertain", "HTTP 503", "not_found", "by alice", "Ask the provider now"} {
		if !strings.Contains(q, want) {
			t.Errorf("queue lacks %q", want)
		}
	}
	res, _ := b.post("/console/lookup", b.form("tenant", "tenant-a", "key", key, "back", "/console/"), nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/console/" {
		t.Fatalf("lookup: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	if _, q = b.get("/console/"); !strings.Contains(q, "not_found") || !strings.Contains(q, "by alice") {
		t.Fatalf("queue does not show the lookup's answer")
	}

	// Settling without confirm shows the confirmation page and changes nothing.
	form := b.form("tenant", "tenant-a", "key", key, "status", "failed", "reason", "PSP has no charge under the key")
	res, body := b.post("/console/settle", form, nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "Confirm: settle as failed") {
		t.Fatalf("settle without confirm: %d", res.StatusCode)
	}
	if a := actionRow(t, e.pool, "tenant-a", key); a.Status != executor.RowReview {
		t.Fatalf("settled before confirmation: %s", a.Status)
	}
	// Bad forms: no reason, completed without reference, failed with a response.
	for _, bad := range [][]string{
		{"status", "failed", "reason", " "},
		{"status", "completed", "reason", "x"},
		{"status", "failed", "reason", "x", "response", "{}"},
		{"status", "completed", "reason", "x", "response", "[1]"},
		{"status", "done", "reason", "x"},
	} {
		f := b.form(append([]string{"tenant", "tenant-a", "key", key, "confirm", "yes"}, bad...)...)
		if res, _ := b.post("/console/settle", f, nil); res.StatusCode != http.StatusBadRequest {
			t.Errorf("%v: %d, want 400", bad, res.StatusCode)
		}
	}
	form.Set("confirm", "yes")
	res, _ = b.post("/console/settle", form, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("settle: %d", res.StatusCode)
	}
	a := actionRow(t, e.pool, "tenant-a", key)
	if a.Status != executor.RowFailed || a.Failure == nil || a.Failure.Resolution == nil ||
		a.Failure.Resolution.By != "alice" || a.Failure.Resolution.Reason != "PSP has no charge under the key" {
		t.Fatalf("after settle: %+v %+v", a, a.Failure)
	}
	// Twice: refused, nothing changes.
	if res, _ := b.post("/console/settle", form, nil); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("second settle: %d, want 400", res.StatusCode)
	}
	// Callers now get the operator's answer.
	if out, err := e.ex.ExecuteKey(context.Background(), "tenant-a", key, nil); err != nil || out.Status != executor.StatusFailed || !out.Replayed {
		t.Fatalf("execute after settle: %+v %v", out, err)
	}

	_, story := b.get(res.Header.Get("Location"))
	for _, want := range []string{"Settled.", "settled by an operator as failed: PSP has no charge under the key", "settled in the console as failed", "provider lookup: not_found", "— alice", key, "wamid.test-NF-2026-000123"} {
		if !strings.Contains(story, want) {
			t.Errorf("intent page lacks %q", want)
		}
	}
	if strings.Contains(story, cpf) {
		t.Fatal("the intent page shows the CPF before it was revealed")
	}
	res, story = b.post("/console/reveal", b.form("tenant", "tenant-a", "key", key), nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(story, cpf) || !strings.Contains(story, "revealed") {
		t.Fatalf("reveal: %d", res.StatusCode)
	}
	var kinds []string
	rows, err := e.pool.Query(context.Background(), `SELECT kind, operator, detail FROM console_audit WHERE tenant_id = 'tenant-a' AND idem_key = $1 ORDER BY id`, key)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var kind, op string
		var detail json.RawMessage
		if err := rows.Scan(&kind, &op, &detail); err != nil {
			t.Fatal(err)
		}
		if op != "alice" || strings.Contains(string(detail), cpf) {
			t.Errorf("audit %s: operator %s, detail %s", kind, op, detail)
		}
		kinds = append(kinds, kind)
	}
	// The queue's own lookup at sign-in (then fresh: not asked again when
	// the queue is shown again), the button's, the settlement, the reveal.
	if strings.Join(kinds, ",") != "lookup,lookup,settle,reveal" {
		t.Fatalf("audit rows %v, want lookup, lookup, settle, reveal", kinds)
	}
	logs := e.logText()
	for _, secret := range []string{cpf, "NF-2026-000123", "PSP has no charge", e.tokenA} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds %q:\n%s", secret, logs)
		}
	}
	if !strings.Contains(logs, "console: action settled") || !strings.Contains(logs, "operator=alice") {
		t.Errorf("the log does not record the settlement:\n%s", logs)
	}
}

// Search finds by intent ref, key and provider reference; one hit opens it.
func TestSearch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.inReview("tenant-a", "NF-S", testutil.CPF(6))
	b := e.browser()
	b.signIn(e.tokenA)
	for _, q := range []string{"NF-S", key} {
		res, _ := b.get("/console/search?" + url.Values{"tenant": {"tenant-a"}, "q": {q}}.Encode())
		if res.StatusCode != http.StatusSeeOther || !strings.Contains(res.Header.Get("Location"), key) {
			t.Errorf("search %q: %d %s", q, res.StatusCode, res.Header.Get("Location"))
		}
	}
	// Settled as completed with a reference, it is found by that reference.
	f := b.form("tenant", "tenant-a", "key", key, "status", "completed", "reference", "E2E-REF-77", "reason", "found in the PSP dashboard", "confirm", "yes")
	if res, _ := b.post("/console/settle", f, nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("settle: %d", res.StatusCode)
	}
	res, _ := b.get("/console/search?tenant=tenant-a&q=E2E-REF-77")
	if res.StatusCode != http.StatusSeeOther || !strings.Contains(res.Header.Get("Location"), key) {
		t.Fatalf("search by reference: %d", res.StatusCode)
	}
	if a := actionRow(t, e.pool, "tenant-a", key); a.Status != executor.RowCompleted || string(a.Response) != `{"id": "E2E-REF-77"}` {
		t.Fatalf("completed: %s %s", a.Status, a.Response)
	}
}

// Now counts what the database records and charts the ledger's duplicate
// and avoided spend per day.
func TestNow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.inReview("tenant-a", "NF-N", testutil.CPF(7))
	ctx := context.Background()
	// One message answered twice (a duplicate), one replayed by the journal.
	for _, c := range []struct {
		tenant, source     string
		prompt, completion int64
		replayed           bool
	}{
		{"tenant-a", "wamid.1", 1000, 200, false}, {"tenant-a", "wamid.1", 1000, 200, false},
		{"tenant-a", "wamid.1", 1000, 200, true}, {"tenant-b", "wamid.2", 9000, 900, false},
		{"tenant-b", "wamid.2", 9000, 900, false},
	} {
		if err := agent.RecordModelCall(ctx, e.pool, c.tenant, c.source, agent.ModelCall{Model: "gpt-x",
			Prompt: c.prompt, Completion: c.completion, Replayed: c.replayed}); err != nil {
			t.Fatal(err)
		}
	}
	b := e.browser()
	b.signIn(e.tokenA)
	res, body := b.get("/console/now")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("now: %d %s", res.StatusCode, body)
	}
	for _, want := range []string{"<svg", "Duplicate model spend per day", "Model spend avoided per day", "gpt-x", "not recorded",
		// 1000 in at 0.015 + 200 out at 0.075 per thousand = 0.030: once duplicated, once avoided; tenant-b's are not alice's.
		"Duplicate: BRL 0.030", "avoided by the journal: BRL 0.030",
		"<tr><th>put in review (still in review)"} {
		if !strings.Contains(body, want) {
			t.Errorf("now page lacks %q", want)
		}
	}
	if !strings.Contains(body, "<td>1000 / 200</td><td>1</td><td>1000 / 200</td>") {
		t.Errorf("today's row lacks the duplicate and avoided tokens")
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	if _, err := console.New(console.Config{}); err == nil {
		t.Fatal("no DB: want an error")
	}
}

// When the provider did act (here: the charge is made under the key after
// the executor gave up), the lookup shows the provider's reference and
// status, and settling as completed stores it.
func TestLookupFindsCharge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.inReview("tenant-a", "NF-L", testutil.CPF(8))
	e.psp.SetFault(nil)
	req, _ := http.NewRequest(http.MethodPost, e.psp.URL+"/v1/pix/charges", strings.NewReader(`{"amount_cents":18000,"pix_key":"x"}`))
	req.Header.Set("Idempotency-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var charge map[string]any
	_ = json.NewDecoder(res.Body).Decode(&charge)
	res.Body.Close()
	id, _ := charge["id"].(string)
	if res.StatusCode != http.StatusCreated || id == "" {
		t.Fatalf("charge at the PSP: %d %v", res.StatusCode, charge)
	}
	b := e.browser()
	b.signIn(e.tokenA)
	intent := "/console/intent?" + url.Values{"tenant": {"tenant-a"}, "key": {key}}.Encode()
	if res, _ := b.post("/console/lookup", b.form("tenant", "tenant-a", "key", key, "back", intent), nil); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != intent {
		t.Fatalf("lookup: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	_, q := b.get("/console/")
	if !strings.Contains(q, "found") || !strings.Contains(q, id) || !strings.Contains(q, "paid") {
		t.Fatalf("the queue does not show the charge the lookup found")
	}
	_, story := b.get(intent)
	if !strings.Contains(story, "provider lookup: found ("+id+"), provider status paid") {
		t.Fatalf("the history lacks the lookup")
	}
	if !strings.Contains(story, `name="reference" value="`+id+`"`) {
		t.Fatalf("the settle form does not offer the reference the lookup found")
	}
	if res, _ := b.post("/console/settle", b.form("tenant", "tenant-a", "key", key, "status", "completed", "reference", id, "reason", "the lookup found it", "confirm", "yes"), nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("settle: %d", res.StatusCode)
	}
	if a := actionRow(t, e.pool, "tenant-a", key); a.Status != executor.RowCompleted || !strings.Contains(string(a.Response), id) {
		t.Fatalf("after settling: %s %s", a.Status, a.Response)
	}
	// A back link that leaves the console is not followed.
	key2 := e.inReview("tenant-a", "NF-L2", testutil.CPF(9))
	if res, _ := b.post("/console/lookup", b.form("tenant", "tenant-a", "key", key2, "back", "https://evil.example/"), nil); res.Header.Get("Location") != "/console/" {
		t.Fatalf("lookup redirected to %q", res.Header.Get("Location"))
	}
}

// A session ends when its time is up (on the database's clock), and at
// once when its operator is disabled.
func TestSessionsExpire(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	b := e.browser()
	b.signIn(e.tokenA)
	var ttl float64
	if err := e.pool.QueryRow(ctx, `SELECT extract(epoch FROM expires_at - created_at) FROM console_sessions WHERE operator = 'alice'`).Scan(&ttl); err != nil || ttl != 8*3600 {
		t.Fatalf("session lasts %vs (%v), want the default 8h", ttl, err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE console_sessions SET created_at = now() - interval '9 hours', expires_at = now() - interval '1 hour' WHERE operator = 'alice'`); err != nil {
		t.Fatal(err)
	}
	if res, body := b.get("/console/"); res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "Operator sign-in") {
		t.Fatalf("expired session: %d", res.StatusCode)
	}
	b.signIn(e.tokenA)
	if err := console.DisableOperator(ctx, e.pool, "alice"); err != nil {
		t.Fatal(err)
	}
	if res, _ := b.get("/console/"); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("disabled operator's session: %d", res.StatusCode)
	}
	if res, _ := b.post("/console/signin", url.Values{"token": {e.tokenA}}, nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("disabled operator signs in: %d", res.StatusCode)
	}
	// The cookie is what a browser must keep from other sites.
	res, _ := e.browser().post("/console/signin", url.Values{"token": {e.tokenB}}, nil)
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == console.CookieName {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/console/" || cookie.MaxAge != 8*3600 {
		t.Fatalf("session cookie %+v", cookie)
	}
}

// An intent's story gathers what every owner recorded about it: the
// amendment that replaced its payload, the payment webhook's effect and
// the receipt it owed (outbox), the agent turn whose tool call carried the
// key and its reply, and the model calls of the message that froze it,
// with their tokens. Personal values stay masked, old payloads included.
func TestStory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	oldCPF, newCPF := testutil.CPF(20), testutil.CPF(21)
	oldKey := e.inReview("tenant-a", "NF-STORY", oldCPF)
	b := e.browser()
	b.signIn(e.tokenA)
	if res, _ := b.post("/console/settle", b.form("tenant", "tenant-a", "key", oldKey, "status", "failed", "reason", "wrong Pix key", "confirm", "yes"), nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("settle: %d", res.StatusCode)
	}
	am, err := e.store.Amend(ctx, e.pool, intent.AmendParams{Tenant: "tenant-a", Ref: "NF-STORY", Action: "pix.charge",
		Fields: map[string]any{"customer_id": "C-42", "amount": "R$ 180,00", "pix_key": newCPF}, Reason: "customer gave another key", By: "ops-lead"})
	if err != nil {
		t.Fatal(err)
	}
	e.psp.SetFault(nil)
	out, err := e.ex.Execute(ctx, executor.Call{Tenant: "tenant-a", Ref: "NF-STORY", Action: "pix.charge", SourceRef: "wamid.test-NF-STORY",
		Fields: map[string]any{"customer_id": "C-42", "amount": "R$ 180,00", "pix_key": newCPF}}, nil)
	if err != nil || out.Status != executor.StatusCompleted || out.Key != am.Intent.Key {
		t.Fatalf("after the amendment: %+v %v", out, err)
	}
	chargeID := strings.Trim(string(mustJSONField(t, out.Response, "id")), `"`)
	// What the other packages record, as they record it.
	if err := agent.UpsertConversation(ctx, e.pool, agent.Conversation{Tenant: "tenant-a", ID: "5511999999999", CustomerID: "C-42"}); err != nil {
		t.Fatal(err)
	}
	if err := webhook.RecordEffect(ctx, e.pool, webhook.PlantedEffect{Tenant: "tenant-a", EffectKey: strings.Repeat("e", 64), Provider: "sandbox",
		Transition: "order.paid", OrderRef: "NF-STORY", PaymentRef: chargeID, EventID: "evt_1", EventType: "payment_intent.succeeded",
		EventAt: time.Now(), Outcome: "applied"}); err != nil {
		t.Fatal(err)
	}
	if err := webhook.RecordNotification(ctx, e.pool, webhook.PlantedNotification{Tenant: "tenant-a", EffectKey: strings.Repeat("e", 64),
		OrderRef: "NF-STORY", Action: "whatsapp.send_template", IntentRef: strings.Repeat("e", 64) + ":notify", IdemKey: "k-notify",
		Status: "sent", Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	if err := agent.RecordMessage(ctx, e.pool, agent.Inbound{Tenant: "tenant-a", MessageID: "wamid.test-NF-STORY", ConversationID: "5511999999999", Body: "pagar"}); err != nil {
		t.Fatal(err)
	}
	if err := agent.RecordTurn(ctx, e.pool, agent.Turn{Tenant: "tenant-a", MessageID: "wamid.test-NF-STORY", ConversationID: "5511999999999",
		Status: "answered", Steps: 2,
		Tools:    []agent.ToolOutcome{{Action: "pix.charge", Status: "completed", Key: out.Key, Replayed: true, Divergent: []string{"amount"}}},
		ReplyRef: "wamid.test-NF-STORY:reply", ReplyKey: "k-reply", ReplyStatus: "sent"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		source string
		agent.ModelCall
	}{
		{"wamid.test-NF-STORY", agent.ModelCall{Step: 0, Prompt: 812, Completion: 41}},
		{"wamid.test-NF-STORY", agent.ModelCall{Step: 1, Prompt: 901, Completion: 12}},
		{"wamid.test-NF-STORY", agent.ModelCall{Step: 0, Prompt: 812, Completion: 41, Replayed: true}},
		{"wamid.other", agent.ModelCall{Step: 0, Prompt: 5, Completion: 5}},
	} {
		c.Model = "gpt-4o-mini"
		if err := agent.RecordModelCall(ctx, e.pool, "tenant-a", c.source, c.ModelCall); err != nil {
			t.Fatal(err)
		}
	}
	_, story := b.get("/console/intent?" + url.Values{"tenant": {"tenant-a"}, "key": {out.Key}}.Encode())
	for _, want := range []string{
		chargeID, "completed",
		"amended (revision 0)", "customer gave another key", "— ops-lead",
		"sandbox payment_intent.succeeded → order.paid (applied)", "whatsapp.send_template: sent",
		"wamid.test-NF-STORY", "answered, 2 steps", "completed, replayed, 1 divergent fields",
		"<td>812 / 41</td>", "<td>901 / 12</td>", "replayed (not paid)", "<th>2525 / 94</th>",
	} {
		if !strings.Contains(story, want) {
			t.Errorf("the story lacks %q", want)
		}
	}
	if strings.Contains(story, oldCPF) || strings.Contains(story, newCPF) {
		t.Error("the story shows a CPF unmasked")
	}
	// The old key's story is the settled action, under the amended intent.
	_, old := b.get("/console/intent?" + url.Values{"tenant": {"tenant-a"}, "key": {oldKey}}.Encode())
	if !strings.Contains(old, "settled by an operator as failed: wrong Pix key") || !strings.Contains(old, "amended") {
		t.Error("the old key's story lacks its settlement or the amendment")
	}
}

func mustJSONField(t *testing.T, raw json.RawMessage, name string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m[name] == nil {
		t.Fatalf("no %q in %s", name, raw)
	}
	return m[name]
}
