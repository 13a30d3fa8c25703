package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/webhook"
)

const nothingStored = "effects=0 orders=0 stale=0 notifications=0 intents=0 jobs=0 log=0"

// Bad signatures and stale timestamps answer 401 and store nothing, not
// even a log row.
func TestSignatureRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	body := paid("evt_1", "pi_1", "ord-1", t0)
	now := h.clock()
	good := webhook.Sign(secret, now, body)
	cases := map[string]string{
		"missing header":      "",
		"wrong secret":        webhook.Sign("whsec_other", now, body),
		"other body":          webhook.Sign(secret, now, append([]byte(" "), body...)),
		"no timestamp":        good[strings.Index(good, ",")+1:],
		"no v1":               good[:strings.Index(good, ",")],
		"timestamp swapped":   strings.Replace(good, "t=", "t=1", 1),
		"not hex":             "t=" + itoa(int(now.Unix())) + ",v1=zz",
		"sha256= style":       "sha256=" + good[strings.Index(good, "v1=")+3:],
		"old (6 minutes)":     webhook.Sign(secret, now.Add(-6*time.Minute), body),
		"future (6 minutes)":  webhook.Sign(secret, now.Add(6*time.Minute), body),
		"two timestamps":      "t=1," + good,
		"signature of t only": "t=" + itoa(int(now.Unix())) + ",v1=" + strings.Repeat("0", 64),
	}
	for name, sig := range cases {
		if r := h.postSigned(body, sig); r.status != http.StatusUnauthorized {
			t.Errorf("%s: answered %d %s, want 401", name, r.status, r.body)
		}
	}
	if got := h.counts(); got != nothingStored {
		t.Fatalf("refused deliveries stored %s", got)
	}
	// Within the tolerance, either way, and with a rotated secret's second
	// entry, it is accepted.
	rotated := webhook.Sign("whsec_old", now, body) + "," + good[strings.Index(good, "v1="):]
	if r := h.postSigned(body, rotated); r.status != http.StatusOK || r.verdict() != "processed" {
		t.Fatalf("rotated: %d %s", r.status, r.body)
	}
	if r := h.postSigned(body, webhook.Sign(secret, now.Add(-4*time.Minute), body)); r.status != http.StatusOK || r.verdict() != "duplicate" {
		t.Fatalf("4 minutes old: %d %s", r.status, r.body)
	}
	if r := h.postSigned(body, webhook.Sign(secret, now.Add(4*time.Minute), body)); r.status != http.StatusOK {
		t.Fatalf("4 minutes ahead: %d %s", r.status, r.body)
	}
}

// Authentic bodies that are not an event this package understands answer
// 200 (a 4xx would make the provider redeliver them for days) with the
// reason, and change nothing; the attempt is logged (rejected, with its
// reason and no payload).
func TestMalformedRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cases := map[string]struct {
		body, code string
	}{
		"not json":         {`{"id":`, "json"},
		"array":            {`[{"id":"evt_1"}]`, "json"},
		"trailing data":    {`{"id":"evt_1"} {}`, "json"},
		"no id":            {`{"type":"payment_intent.succeeded","created":1715335200,"data":{"object":{}}}`, "id"},
		"numeric id":       {`{"id":7,"type":"payment_intent.succeeded","created":1715335200,"data":{"object":{}}}`, "json"},
		"no type":          {`{"id":"evt_1","created":1715335200,"data":{"object":{}}}`, "type"},
		"no created":       {`{"id":"evt_1","type":"payment_intent.succeeded","data":{"object":{}}}`, "created"},
		"created in ms":    {`{"id":"evt_1","type":"payment_intent.succeeded","created":1715335200000,"data":{"object":{}}}`, "created"},
		"no data":          {`{"id":"evt_1","type":"payment_intent.succeeded","created":1715335200}`, "data"},
		"object is string": {`{"id":"evt_1","type":"payment_intent.succeeded","created":1715335200,"data":{"object":"pi_1"}}`, "data"},
		"bad reference":    {`{"id":"evt_1","type":"payment_intent.succeeded","created":1715335200,"data":{"object":{"id":"pi_1","invoice":5}}}`, "object"},
		"no order": {string(event("evt_1", "payment_intent.succeeded", t0, obj{"id": "pi_1", "object": "payment_intent"})),
			"no_order_ref"},
		"unknown idempotency key": {string(event("evt_1", "payment_intent.succeeded", t0,
			obj{"id": "pix_1", "object": "pix_charge", "idempotency_key": "nope"})), "no_order_ref"},
		"no payment": {string(event("evt_1", "payment_intent.succeeded", t0, obj{"metadata": obj{"order_ref": "ord-1"}})),
			"no_payment_ref"},
	}
	for name, c := range cases {
		r := h.post([]byte(c.body))
		if r.status != http.StatusOK || r.verdict() != "rejected" || r.reason() != c.code {
			t.Errorf("%s: answered %d %s, want 200 rejected (%s)", name, r.status, r.body, c.code)
		}
	}
	want := strings.Replace(nothingStored, "log=0", "log="+itoa(len(cases)), 1)
	if got := h.counts(); got != want {
		t.Fatalf("stored %s, want %s", got, want)
	}
	log, err := webhook.ListDeliveries(h.ctx, h.pool, webhook.ListParams{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range log {
		if d.Verdict != webhook.VerdictRejected || d.HTTPStatus != http.StatusOK || d.EffectKey != "" || d.Reason == "" {
			t.Fatalf("log row %+v", d)
		}
	}
}

// Types outside the map are answered 200, logged as ignored, and change
// nothing, whatever the shape of their object.
func TestUnmappedTypeIgnored(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.expect(event("evt_1", "customer.created", t0, obj{"id": "cus_1", "object": "customer", "invoice": 5}), http.StatusOK, "ignored")
	if got, want := h.counts(), strings.Replace(nothingStored, "log=0", "log=1", 1); got != want {
		t.Fatalf("stored %s, want %s", got, want)
	}
}

func TestHTTPErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	body := paid("evt_1", "pi_1", "ord-1", t0)
	sig := webhook.Sign(secret, h.clock(), body)
	do := func(method, path string, body []byte) int {
		req := httptest.NewRequest(method, path, strings.NewReader(string(body)))
		req.Header.Set(webhook.DefaultSignatureHeader, sig)
		rec := httptest.NewRecorder()
		h.hook.ServeHTTP(rec, req) // not through the mux: the handler checks the method itself
		return rec.Code
	}
	if got := do(http.MethodPost, webhook.PathPrefix+"stripe", body); got != http.StatusNotFound {
		t.Errorf("unknown provider: %d", got)
	}
	if got := do(http.MethodGet, webhook.PathPrefix+provider, nil); got != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", got)
	}
	big := make([]byte, webhook.DefaultMaxBodyBytes+1)
	if got := do(http.MethodPost, webhook.PathPrefix+provider, big); got != http.StatusRequestEntityTooLarge {
		t.Errorf("too large: %d", got)
	}
	if got := h.counts(); got != nothingStored {
		t.Fatalf("stored %s", got)
	}
	// Mounted without a {provider} wildcard, the path still names it.
	if got := do(http.MethodPost, webhook.PathPrefix+provider, body); got != http.StatusOK {
		t.Errorf("plain mount: %d", got)
	}
}

// A database failure answers 500, so that the provider redelivers.
func TestDatabaseDownIs500(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t, nil)
	queue, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: schema, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	hook, err := webhook.New(webhook.Config{DB: pool, Queue: queue, Intents: newStore(t), Logger: quiet(),
		Providers: map[string]webhook.Provider{provider: {Secret: secret, Tenant: tenant}}})
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	body := paid("evt_1", "pi_1", "ord-1", time.Now())
	req := httptest.NewRequest(http.MethodPost, webhook.PathPrefix+provider, strings.NewReader(string(body)))
	req.Header.Set(webhook.DefaultSignatureHeader, webhook.Sign(secret, time.Now(), body))
	rec := httptest.NewRecorder()
	hook.ServeHTTP(rec, req)
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("answered %d %s, want 500", rec.Code, rec.Body)
	}
	// Deliver reports the storage error itself.
	if _, err := hook.Deliver(context.Background(), provider, webhook.Sign(secret, time.Now(), body), body); err == nil {
		t.Fatal("no error on a closed pool")
	}
}

// With connected accounts, the tenant comes from the event's account; an
// account no tenant owns is answered 200 rejected and logged under no
// tenant ("").
func TestTenantFromAccount(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &harnessOpts{provider: webhook.Provider{Accounts: map[string]string{"acct_1": tenant}}})
	h.expect(paid("evt_1", "pi_1", "ord-1", t0, "account", "acct_1"), http.StatusOK, "processed")
	h.expectReason(paid("evt_2", "pi_2", "ord-2", t0, "account", "acct_2"), "rejected", "unknown_tenant")
	h.expectReason(paid("evt_3", "pi_3", "ord-3", t0), "rejected", "unknown_tenant")
	// An event no transition maps is ignored even when no tenant owns it.
	h.expect(event("evt_4", "customer.created", t0, obj{"id": "cus_1"}, "account", "acct_2"), http.StatusOK, "ignored")
	if got, want := h.counts(), "effects=1 orders=1 stale=0 notifications=1 intents=1 jobs=1 log=3"; got != want {
		t.Fatalf("stored %s, want %s", got, want)
	}
}
