package sidecar_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

// Equivalent spellings of one charge reach the PSP once, under one key; the
// second caller gets the stored charge, marked replayed.
func TestExecuteCompletedThenReplayed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)

	r1 := h.execute(tokenA, "inv-1", chargeFields(`"180,00"`, cpfPunct))
	if r1.status != http.StatusOK {
		t.Fatalf("first: HTTP %d %s", r1.status, r1.body)
	}
	o1 := r1.exec(t)
	if o1.Status != "completed" || o1.Replayed || !o1.Created || len(o1.IdempotencyKey) != 64 {
		t.Fatalf("first: %+v", o1)
	}
	var charge struct {
		ID          string `json:"id"`
		AmountCents int64  `json:"amount_cents"`
		Key         string `json:"idempotency_key"`
	}
	if err := json.Unmarshal(o1.Response, &charge); err != nil || charge.AmountCents != 18000 || charge.Key != o1.IdempotencyKey {
		t.Fatalf("response %s (%v)", o1.Response, err)
	}

	for _, amount := range []string{`"180.00"`, `180`, `"R$ 180,00"`, `180.0`} {
		r := h.execute(tokenA, "inv-1", chargeFields(amount, cpfDigits))
		o := r.exec(t)
		if r.status != http.StatusOK || o.Status != "completed" || !o.Replayed || o.Created || o.IdempotencyKey != o1.IdempotencyKey {
			t.Fatalf("amount %s: HTTP %d %+v", amount, r.status, o)
		}
		if r.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("amount %s: no Idempotent-Replayed header", amount)
		}
		if len(o.DivergentFields) != 0 {
			t.Errorf("amount %s: divergent %v for an equivalent spelling", amount, o.DivergentFields)
		}
		if !sameJSON(o.Response, o1.Response) {
			t.Errorf("amount %s: response %s, want the stored %s", amount, o.Response, o1.Response)
		}
	}
	if n := h.psp.Count(chargePath); n != 1 {
		t.Fatalf("PSP holds %d charges, want 1", n)
	}
	if n := h.psp.Requests(); n != 1 {
		t.Fatalf("PSP received %d create requests, want 1 (replays must not reach it)", n)
	}
}

// Many concurrent callers over HTTP, more than the pool has connections:
// one charge, one key, every caller answered completed or in_flight.
func TestExecuteConcurrentCallersOneCharge(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &harnessOpts{maxConns: 2})
	spellings := []string{
		chargeFields(`"180,00"`, cpfPunct), chargeFields(`"180.00"`, cpfDigits),
		chargeFields(`180`, cpfPunct), chargeFields(`"R$ 180,00"`, cpfDigits),
	}
	const n = 60
	replies := make([]reply, n)
	testutil.Together(n, func(i int) {
		replies[i] = h.execute(tokenA, "inv-concurrent", spellings[i%len(spellings)])
	})

	keys := map[string]bool{}
	var completed, inFlight int
	for i, r := range replies {
		o := r.exec(t)
		keys[o.IdempotencyKey] = true
		switch {
		case r.status == http.StatusOK && o.Status == "completed":
			completed++
		case r.status == http.StatusConflict && o.Status == "in_flight":
			inFlight++
			if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
				t.Errorf("caller %d: Retry-After %q", i, r.header.Get("Retry-After"))
			}
		default:
			t.Errorf("caller %d: HTTP %d %s", i, r.status, r.body)
		}
	}
	if len(keys) != 1 {
		t.Errorf("%d distinct keys, want 1", len(keys))
	}
	if c := h.psp.Count(chargePath); c != 1 {
		t.Fatalf("PSP holds %d charges, want 1", c)
	}
	if h.count("intents") != 1 || h.count("actions") != 1 {
		t.Fatalf("intents %d, actions %d, want 1 and 1", h.count("intents"), h.count("actions"))
	}
	t.Logf("%d callers: %d completed, %d in_flight", n, completed, inFlight)
}

// A re-extraction with another amount gets the frozen charge and the names
// of the fields that differ; the divergent amount never reaches the PSP.
func TestExecuteDivergentExtraction(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	o1 := h.execute(tokenA, "inv-div", chargeFields(`"180,00"`, cpfPunct)).exec(t)
	r := h.execute(tokenA, "inv-div", chargeFields(`"1.800,00"`, cpfDigits))
	o2 := r.exec(t)
	if r.status != http.StatusOK || o2.Status != "completed" || !o2.Replayed || o2.IdempotencyKey != o1.IdempotencyKey {
		t.Fatalf("HTTP %d %+v", r.status, o2)
	}
	if !slices.Equal(o2.DivergentFields, []string{"amount"}) {
		t.Fatalf("divergent_fields %v, want [amount]", o2.DivergentFields)
	}
	if recs := h.psp.Records(chargePath); len(recs) != 1 || recs[0]["amount_cents"] != float64(18000) {
		t.Fatalf("PSP records %v, want one charge of 18000", recs)
	}
	// Unparseable re-extraction of a frozen intent: still the frozen charge.
	o3 := h.execute(tokenA, "inv-div", chargeFields(`"cento e oitenta"`, cpfDigits)).exec(t)
	if o3.Status != "completed" || o3.IdempotencyKey != o1.IdempotencyKey || !slices.Contains(o3.DivergentFields, "amount") {
		t.Fatalf("garbage re-extraction: %+v", o3)
	}
	if strings.Contains(h.logs.String(), "1.800") {
		t.Error("a divergent value reached the logs")
	}
}

// While the first call is at the provider, a second gets 409 + Retry-After;
// afterwards, the replay.
func TestExecuteInFlight(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.psp.SlowDelay = 600 * time.Millisecond
	h.psp.SetFault(func(r toolstest.Request) toolstest.Fault { return toolstest.Slow })

	first := make(chan reply, 1)
	go func() { first <- h.execute(tokenA, "inv-slow", chargeFields(`180`, cpfDigits)) }()
	// Wait until the claim is committed (the provider holds the request).
	deadline := time.Now().Add(5 * time.Second)
	for h.psp.Requests() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	r := h.execute(tokenA, "inv-slow", chargeFields(`"180,00"`, cpfPunct))
	o := r.exec(t)
	if r.status != http.StatusConflict || o.Status != "in_flight" || o.RetryAfterMillis <= 0 {
		t.Fatalf("second: HTTP %d %+v", r.status, o)
	}
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	f := <-first
	if f.status != http.StatusOK || f.exec(t).Status != "completed" {
		t.Fatalf("first: HTTP %d %s", f.status, f.body)
	}
	if o3 := h.execute(tokenA, "inv-slow", chargeFields(`180`, cpfDigits)).exec(t); !o3.Replayed || o3.Status != "completed" {
		t.Fatalf("third: %+v", o3)
	}
	if h.psp.Count(chargePath) != 1 {
		t.Fatalf("%d charges", h.psp.Count(chargePath))
	}
}

// A definitive refusal is an answer (200, status failed) and is stored; an
// uncertain outcome with no attempts left goes to review (202).
func TestExecuteFailedAndReview(t *testing.T) {
	t.Parallel()
	t.Run("failed", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, nil)
		h.psp.SetFault(func(toolstest.Request) toolstest.Fault { return toolstest.Reject })
		for i := range 2 {
			r := h.execute(tokenA, "inv-rejected", chargeFields(`180`, cpfDigits))
			o := r.exec(t)
			if r.status != http.StatusOK || o.Status != "failed" || o.Error == nil || o.Error.Status != 422 || o.Replayed != (i == 1) {
				t.Fatalf("call %d: HTTP %d %s", i, r.status, r.body)
			}
		}
		if n := h.psp.Requests(); n != 1 {
			t.Fatalf("PSP received %d requests, want 1 (the failure is stored)", n)
		}
	})
	t.Run("review", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, &harnessOpts{exec: func(c *executor.Config) { c.MaxAttempts = 1 }})
		// A 500 and no way to ask by key: nobody can tell.
		h.psp.SetFault(func(toolstest.Request) toolstest.Fault { return toolstest.FailBefore })
		h.psp.LookupDown.Store(true)
		r := h.execute(tokenA, "inv-review", chargeFields(`180`, cpfDigits))
		o := r.exec(t)
		if r.status != http.StatusAccepted || o.Status != "review" || o.Error == nil {
			t.Fatalf("HTTP %d %s", r.status, r.body)
		}
		if got := scrape(t, h, `retrysafe_actions_in_review{action="pix.charge",tenant="tenant-a"}`); got != "1" {
			t.Fatalf("actions_in_review = %q, want 1", got)
		}
	})
}

// A transient refusal (429) answers in_flight; the next call after the
// backoff takes the lease over and completes with the same key.
func TestExecuteTakeoverAfterTransient(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.psp.SetFault(func(r toolstest.Request) toolstest.Fault {
		if r.N == 1 {
			return toolstest.RateLimit
		}
		return toolstest.None
	})
	r := h.execute(tokenA, "inv-429", chargeFields(`180`, cpfDigits))
	o := r.exec(t)
	if r.status != http.StatusConflict || o.Status != "in_flight" || o.Error == nil || o.Error.Class != "transient" {
		t.Fatalf("first: HTTP %d %s", r.status, r.body)
	}
	var o2 = o
	deadline := time.Now().Add(5 * time.Second)
	for o2.Status == "in_flight" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		o2 = h.execute(tokenA, "inv-429", chargeFields(`180`, cpfDigits)).exec(t)
	}
	if o2.Status != "completed" || o2.Attempt != 2 || o2.IdempotencyKey != o.IdempotencyKey {
		t.Fatalf("after backoff: %+v", o2)
	}
	if got := scrape(t, h, `retrysafe_takeovers_total{action="pix.charge",outcome="completed",tenant="tenant-a"}`); got != "1" {
		t.Fatalf("takeovers_total = %q, want 1", got)
	}
	if h.psp.Count(chargePath) != 1 {
		t.Fatalf("%d charges", h.psp.Count(chargePath))
	}
}

func TestExecuteUnknownAction(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	r := h.do(http.MethodPost, "/v1/tools/pix.refund/execute", tokenA, `{"intent_ref":"x","fields":{}}`)
	if r.status != http.StatusNotFound || r.problem(t).Type != "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#unknown-action" {
		t.Fatalf("HTTP %d %s", r.status, r.body)
	}
	// Unauthenticated first: an unknown caller learns nothing of the tools.
	if r := h.do(http.MethodPost, "/v1/tools/pix.refund/execute", "", `{}`); r.status != http.StatusUnauthorized {
		t.Fatalf("no token: HTTP %d", r.status)
	}
}

// Bad bodies and bad fields: 400 (413 for size), nothing frozen, nothing
// claimed, nothing sent to the PSP, and no value echoed back.
func TestExecuteBadRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	big := `{"intent_ref":"inv-big","fields":{"customer_id":"` + strings.Repeat("x", 2<<20) + `"}}`
	for _, tc := range []struct {
		name, body string
		status     int
		ptype      string
		field      string
	}{
		{"not json", `{"intent_ref":`, 400, "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#bad-request", ""},
		{"empty body", ``, 400, "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#bad-request", ""},
		{"array", `[]`, 400, "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#bad-request", ""},
		{"two objects", `{"intent_ref":"a","fields":{}} {}`, 400, "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#bad-request", ""},
		{"unknown member", `{"intent_reference":"inv-1","fields":{}}`, 400, "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#bad-request", ""},
		{"missing intent_ref", `{"fields":` + chargeFields(`180`, cpfDigits) + `}`, 400, "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#bad-request", ""},
		{"padded intent_ref", `{"intent_ref":" inv-1","fields":` + chargeFields(`180`, cpfDigits) + `}`, 400, "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#bad-request", ""},
		{"missing fields", `{"intent_ref":"inv-1"}`, 400, "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#bad-request", ""},
		{"fields not object", `{"intent_ref":"inv-1","fields":"180"}`, 400, "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#bad-request", ""},
		{"amount words", `{"intent_ref":"inv-1","fields":` + chargeFields(`"cento e oitenta"`, cpfDigits) + `}`, 400, "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#invalid-fields", "amount"},
		{"sub-cent", `{"intent_ref":"inv-1","fields":` + chargeFields(`180.001`, cpfDigits) + `}`, 400, "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#invalid-fields", "amount"},
		{"float drift", `{"intent_ref":"inv-1","fields":` + chargeFields(`0.30000000000000004`, cpfDigits) + `}`, 400, "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#invalid-fields", "amount"},
		{"ambiguous", `{"intent_ref":"inv-1","fields":` + chargeFields(`"1.800"`, cpfDigits) + `}`, 400, "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#invalid-fields", "amount"},
		{"bad cpf", `{"intent_ref":"inv-1","fields":` + chargeFields(`180`, "529.982.247-24") + `}`, 400, "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#invalid-fields", "pix_key"},
		{"missing amount", `{"intent_ref":"inv-1","fields":{"customer_id":"c","pix_key":"52998224725","pix_key_type":"cpf"}}`, 400, "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#invalid-fields", "amount"},
		// Every broken field at once, so that the model fixes them in one turn.
		{"three broken fields", `{"intent_ref":"inv-1","fields":{"amount":"cento e oitenta","pix_key":"529.982.247-24","pix_key_type":"cpf"}}`, 400, "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#invalid-fields", "amount,customer_id,pix_key"},
		{"too large", big, 413, "https://github.com/retrysafe/retrysafe/blob/main/docs/problems.md#body-too-large", ""},
	} {
		r := h.do(http.MethodPost, "/v1/tools/pix.charge/execute", tokenA, tc.body)
		if r.status != tc.status {
			t.Errorf("%s: HTTP %d, want %d: %s", tc.name, r.status, tc.status, r.body)
			continue
		}
		p := r.problem(t)
		if p.Type != tc.ptype || p.Detail == "" {
			t.Errorf("%s: problem %+v, want type %s", tc.name, p, tc.ptype)
		}
		if tc.field != "" {
			var names []string
			for _, e := range p.Errors {
				names = append(names, e.Field)
			}
			if strings.Join(names, ",") != tc.field {
				t.Errorf("%s: errors %+v, want fields %s", tc.name, p.Errors, tc.field)
			}
		}
		for _, secret := range []string{cpfDigits, "529.982.247-24", "cento e oitenta", "0.30000000000000004"} {
			if strings.Contains(string(r.body), secret) {
				t.Errorf("%s: the answer echoes a field value: %s", tc.name, r.body)
			}
		}
	}
	if h.count("intents") != 0 || h.count("actions") != 0 || h.psp.Requests() != 0 {
		t.Fatalf("intents %d, actions %d, PSP requests %d after bad requests, want 0, 0, 0",
			h.count("intents"), h.count("actions"), h.psp.Requests())
	}
	if got := scrape(t, h, `retrysafe_executions_total{action="pix.charge",outcome="invalid",tenant="tenant-a"}`); got == "" || got == "0" {
		t.Errorf("executions_total{outcome=invalid} = %q", got)
	}
}

// sameJSON compares JSON values (jsonb does not keep member order).
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
