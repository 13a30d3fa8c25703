package psp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/sandbox/psp"
)

func TestCreateChargeAndReplay(t *testing.T) {
	t.Parallel()
	srv, _, _ := newPSP(t, 4, psp.Config{})
	h := srv.Handler()

	first := postCharge(h, "m1", "inv-42", chargeBody)
	if first.status != http.StatusCreated || first.replayed {
		t.Fatalf("create: %d %s", first.status, first.body)
	}
	c := first.charge(t)
	if c.AmountCents != 1000 || c.PixKey != "+5511987654321" || c.PixKeyType != "phone" || c.Status != "paid" ||
		c.IdempotencyKey != "inv-42" || c.Created < time.Now().Add(-time.Hour).Unix() || !strings.HasPrefix(c.ID, "pix_") {
		t.Fatalf("charge: %+v", c)
	}
	if first.header.Get("Location") != "/v1/pix/charges/"+c.ID {
		t.Errorf("Location %q", first.header.Get("Location"))
	}

	// The same request, its JSON reordered: the stored answer, byte for byte.
	again := postCharge(h, "m1", "inv-42", `{"description":"Fatura 42","pix_key_type":"phone","pix_key":"+5511987654321","amount_cents":1000}`)
	if again.status != http.StatusCreated || !again.replayed || again.body != first.body {
		t.Fatalf("replay: %d replayed=%v %s", again.status, again.replayed, again.body)
	}

	// Reconciliation: look the charge up by its key; unknown keys are 404.
	byKey := request(h, http.MethodGet, "/v1/pix/charges?idempotency_key=inv-42", "m1", "", "")
	if byKey.status != http.StatusOK || byKey.charge(t).ID != c.ID {
		t.Fatalf("by key: %d %s", byKey.status, byKey.body)
	}
	if r := request(h, http.MethodGet, "/v1/pix/charges?idempotency_key=nope", "m1", "", ""); r.status != http.StatusNotFound {
		t.Fatalf("unknown key: %d %s", r.status, r.body)
	}
	if r := request(h, http.MethodGet, "/v1/pix/charges/"+c.ID, "m1", "", ""); r.status != http.StatusOK || r.charge(t).ID != c.ID {
		t.Fatalf("by id: %d %s", r.status, r.body)
	}
	if r := request(h, http.MethodGet, "/v1/pix/charges/"+c.ID, "m2", "", ""); r.status != http.StatusNotFound {
		t.Fatalf("another merchant's charge: %d", r.status)
	}

	second := postCharge(h, "m1", "inv-43", chargeBody).charge(t)
	list := charges(t, h, "m1")
	if len(list) != 2 || list[0].ID != second.ID || list[1].ID != c.ID {
		t.Fatalf("list not newest first: %+v", list)
	}
}

func TestMissingKeyIs400AndNoCharge(t *testing.T) {
	t.Parallel()
	srv, _, _ := newPSP(t, 2, psp.Config{})
	r := postCharge(srv.Handler(), "m1", "", chargeBody)
	if r.status != http.StatusBadRequest || r.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("%d %s %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	if n := len(charges(t, srv.Handler(), "m1")); n != 0 {
		t.Fatalf("%d charges without a key", n)
	}
}

func TestSameKeyOtherAmountIs422(t *testing.T) {
	t.Parallel()
	srv, _, _ := newPSP(t, 2, psp.Config{})
	h := srv.Handler()
	if r := postCharge(h, "m1", "inv-1", chargeBody); r.status != http.StatusCreated {
		t.Fatal(r)
	}
	r := postCharge(h, "m1", "inv-1", strings.Replace(chargeBody, "1000", "2000", 1))
	if r.status != http.StatusUnprocessableEntity || r.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if n := len(charges(t, h, "m1")); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	srv, _, _ := newPSP(t, 2, psp.Config{})
	h := srv.Handler()
	if r := postCharge(h, "", "k", chargeBody); r.status != http.StatusUnauthorized {
		t.Fatalf("POST without token: %d", r.status)
	}
	if r := request(h, http.MethodGet, "/v1/pix/charges", "", "", ""); r.status != http.StatusUnauthorized {
		t.Fatalf("GET without token: %d", r.status)
	}
	// Merchants do not share keys: the same key is two charges.
	a := postCharge(h, "merchant-a", "same", chargeBody)
	b := postCharge(h, "merchant-b", "same", strings.Replace(chargeBody, "1000", "5", 1))
	if a.status != http.StatusCreated || b.status != http.StatusCreated || b.replayed {
		t.Fatalf("a %d, b %d %s", a.status, b.status, b.body)
	}
	if len(charges(t, h, "merchant-a")) != 1 || len(charges(t, h, "merchant-b")) != 1 {
		t.Fatal("charges leaked between merchants")
	}
}

func TestValidationErrors(t *testing.T) {
	t.Parallel()
	srv, _, _ := newPSP(t, 2, psp.Config{})
	h := srv.Handler()
	for i, tc := range []struct {
		body   string
		status int
		code   string
	}{
		{`not json`, 400, "body_invalid"},
		{`{"amount_cents":"10"}`, 400, "parameter_invalid_type"},
		{`{"amount_cents":10.5,"pix_key":"a@b.co","pix_key_type":"email"}`, 400, "parameter_invalid_type"},
		{`{"amount_cents":10,"pix_key":"a@b.co","pix_key_type":"email","currency":"brl"}`, 400, "parameter_unknown"},
		{`{"pix_key":"a@b.co","pix_key_type":"email"}`, 400, "parameter_missing"},
		{`{"amount_cents":0,"pix_key":"a@b.co","pix_key_type":"email"}`, 422, "amount_too_small"},
		{`{"amount_cents":-5,"pix_key":"a@b.co","pix_key_type":"email"}`, 422, "amount_too_small"},
		{`{"amount_cents":100000001,"pix_key":"a@b.co","pix_key_type":"email"}`, 422, "amount_too_large"},
		{`{"amount_cents":10,"pix_key":"12345678900","pix_key_type":"cpf"}`, 422, "pix_key_invalid"},
		{`{"amount_cents":10,"pix_key":"a@b.co","pix_key_type":"iban"}`, 422, "pix_key_type_invalid"},
		{`{"amount_cents":10,"pix_key":"a@b.co","pix_key_type":"phone"}`, 422, "pix_key_invalid"},
		{`{"amount_cents":10,"pix_key":"12345","pix_key_type":""}`, 422, "pix_key_invalid"},
		{`{"amount_cents":10,"pix_key_type":"cpf"}`, 400, "parameter_missing"},
	} {
		key := "bad-" + string(rune('a'+i))
		r := postCharge(h, "m1", key, tc.body)
		var e struct {
			Error psp.APIError `json:"error"`
		}
		json.Unmarshal([]byte(r.body), &e)
		if r.status != tc.status || e.Error.Code != tc.code || e.Error.Message == "" {
			t.Errorf("%s: %d %s, want %d %s", tc.body, r.status, r.body, tc.status, tc.code)
		}
		// Like a PSP's first answer, the error is stored with the key.
		if again := postCharge(h, "m1", key, tc.body); !again.replayed || again.body != r.body {
			t.Errorf("%s: error not replayed: %+v", tc.body, again)
		}
	}
	if n := len(charges(t, h, "m1")); n != 0 {
		t.Fatalf("%d charges from invalid requests", n)
	}
}

func TestPixKeys(t *testing.T) {
	t.Parallel()
	body := func(kind, key string) []byte {
		return []byte(`{"amount_cents":1,"pix_key":"` + key + `","pix_key_type":"` + kind + `"}`)
	}
	for _, ok := range [][2]string{
		{"cpf", "52998224725"}, {"cnpj", "11222333000181"}, {"email", "joao.silva+pix@exemplo.com.br"},
		{"phone", "+5511987654321"}, {"phone", "+551133334444"}, {"evp", "123e4567-e89b-12d3-a456-426614174000"},
	} {
		if _, err := psp.ParseChargeRequest(body(ok[0], ok[1])); err != nil {
			t.Errorf("%s %s rejected: %v", ok[0], ok[1], err)
		}
		// Without a type, the type is inferred from the key's format.
		in, err := psp.ParseChargeRequest(body("", ok[1]))
		if err != nil || in.PixKeyType != ok[0] {
			t.Errorf("%s: inferred %q, %v", ok[1], in.PixKeyType, err)
		}
	}
	for _, bad := range [][2]string{
		{"cpf", "52998224724"}, {"cpf", "11111111111"}, {"cpf", "529.982.247-25"}, {"cnpj", "11222333000182"},
		{"email", "no-at-sign"}, {"phone", "11987654321"}, {"phone", "+14155550100"}, {"evp", "not-a-uuid"},
		{"cpf", "52998224725 "}, {"", "52998224724"}, {"", "+1415555"},
	} {
		if _, err := psp.ParseChargeRequest(body(bad[0], bad[1])); err == nil || err.Status != 422 {
			t.Errorf("%s %q accepted (%v)", bad[0], bad[1], err)
		}
	}
}

// Faults through a real HTTP server: the client's view of each failure,
// and what a retry with the same key (and no fault) gets.
func TestFaults(t *testing.T) {
	t.Parallel()
	srv, _, _ := newPSP(t, 4, psp.Config{})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	post := func(key, faultSpec string, timeout time.Duration) (int, string, error) {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/pix/charges", strings.NewReader(chargeBody))
		req.Header.Set("Authorization", "Bearer m1")
		req.Header.Set("Idempotency-Key", key)
		if faultSpec != "" {
			req.Header.Set("X-Sandbox-Fault", faultSpec)
		}
		resp, err := (&http.Client{Timeout: timeout}).Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	for _, tc := range []struct {
		fault     string
		timeout   time.Duration
		wantErr   bool
		status    int
		executed  bool // a charge exists after the faulty request
		retryCode int
	}{
		{fault: "fail-before", status: 500, executed: false, retryCode: 201},
		{fault: "drop-after", wantErr: true, executed: true, retryCode: 201},
		{fault: "fail-after", status: 500, executed: true, retryCode: 201},
		{fault: "slow=3s", timeout: 300 * time.Millisecond, wantErr: true, executed: true, retryCode: 201},
		{fault: "delay=100ms", status: 201, executed: true, retryCode: 201},
	} {
		key := "fault-" + tc.fault
		timeout := tc.timeout
		if timeout == 0 {
			timeout = 10 * time.Second
		}
		status, body, err := post(key, tc.fault, timeout)
		if tc.wantErr != (err != nil) || (!tc.wantErr && status != tc.status) {
			t.Errorf("%s: %d %s %v", tc.fault, status, body, err)
			continue
		}
		byKey := request(srv.Handler(), http.MethodGet, "/v1/pix/charges?idempotency_key="+key, "m1", "", "")
		if (byKey.status == http.StatusOK) != tc.executed {
			t.Errorf("%s: charge exists = %v, want %v", tc.fault, byKey.status == http.StatusOK, tc.executed)
		}
		status, body, err = post(key, "", 10*time.Second)
		if err != nil || status != tc.retryCode {
			t.Errorf("%s: retry %d %s %v", tc.fault, status, body, err)
		}
		if n := len(charges(t, srv.Handler(), "m1")); tc.executed && byKey.status == http.StatusOK {
			var c psp.Charge
			json.Unmarshal([]byte(body), &c)
			if c.ID != byKey.charge(t).ID {
				t.Errorf("%s: retry got charge %s, the faulty request created %s (%d charges)", tc.fault, c.ID, byKey.charge(t).ID, n)
			}
		}
	}
	if n := len(charges(t, srv.Handler(), "m1")); n != 5 {
		t.Fatalf("%d charges for 5 keys", n)
	}
}

func TestWebhookSignedAndRedelivered(t *testing.T) {
	t.Parallel()
	const secret = "whsec_test_0123456789"
	var (
		mu       sync.Mutex
		attempts []string // event ids, one per delivery attempt
		events   = make(chan psp.Event, 10)
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := psp.VerifySignature(secret, r.Header.Get(psp.SignatureHeader), body, 5*time.Minute, time.Now()); err != nil {
			t.Errorf("signature: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var ev psp.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Error(err)
		}
		mu.Lock()
		attempts = append(attempts, ev.ID)
		n := len(attempts)
		mu.Unlock()
		if n <= 2 { // the receiver is down for the first two attempts
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		events <- ev
	}))
	t.Cleanup(receiver.Close)

	srv, pool, _ := newPSP(t, 4, psp.Config{
		WebhookURL: receiver.URL, WebhookSecret: secret,
		WebhookBackoff: 50 * time.Millisecond, WebhookPoll: 20 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	c := postCharge(srv.Handler(), "m1", "hook-1", chargeBody).charge(t)
	select {
	case ev := <-events:
		if ev.Type != "payment_intent.succeeded" || ev.Data.Object.ID != c.ID || !strings.HasPrefix(ev.ID, "evt_") || ev.Created != c.Created {
			t.Fatalf("event: %+v", ev)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("webhook not delivered")
	}
	mu.Lock()
	if len(attempts) != 3 || attempts[0] != attempts[2] {
		t.Errorf("attempts %v: want the same event three times", attempts)
	}
	mu.Unlock()
	// The receiver has answered; the loop records that right after.
	var status string
	var n int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err := pool.QueryRow(ctx, `SELECT status, attempts FROM webhook_deliveries`).Scan(&status, &n); err != nil {
			t.Fatal(err)
		}
		if status != "pending" {
			break
		}
	}
	if status != "delivered" || n != 3 {
		t.Fatalf("delivery row: %s after %d attempts", status, n)
	}
	// A replayed charge sends no second event. A charge queues its event
	// in its own transaction (createCharge), so a second event, had the
	// replay made one, would be there when the replay has answered.
	if r := postCharge(srv.Handler(), "m1", "hook-1", chargeBody); !r.replayed {
		t.Fatal(r)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d deliveries after a replay", n)
	}
}

func TestWebhookGivesUp(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(down.Close)
	srv, pool, _ := newPSP(t, 2, psp.Config{
		WebhookURL: down.URL, WebhookSecret: "s", WebhookBackoff: time.Millisecond, WebhookMaxAttempts: 3,
	})
	postCharge(srv.Handler(), "m1", "k", chargeBody).charge(t)
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	var status string
	var attempts, lastStatus int
	for time.Now().Before(deadline) {
		if _, err := srv.DeliverDue(ctx); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, `SELECT status, attempts, coalesce(last_status, 0) FROM webhook_deliveries`).Scan(&status, &attempts, &lastStatus); err != nil {
			t.Fatal(err)
		}
		if status != "pending" {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if status != "failed" || attempts != 3 || lastStatus != 500 {
		t.Fatalf("after the receiver kept failing: %s, %d attempts, last %d", status, attempts, lastStatus)
	}
}

func TestSignature(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"id":"evt_1"}`)
	h := psp.Sign("secret", now, body)
	if !strings.HasPrefix(h, "t=1700000000,v1=") || len(h) != len("t=1700000000,v1=")+64 {
		t.Fatalf("header %q", h)
	}
	if err := psp.VerifySignature("secret", h, body, time.Minute, now.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"tampered body": psp.VerifySignature("secret", h, []byte(`{"id":"evt_2"}`), time.Minute, now),
		"wrong secret":  psp.VerifySignature("other", h, body, time.Minute, now),
		"garbage":       psp.VerifySignature("secret", "v1=zz", body, time.Minute, now),
	} {
		if !errors.Is(err, psp.ErrSignatureInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := psp.VerifySignature("secret", h, body, time.Minute, now.Add(time.Hour)); !errors.Is(err, psp.ErrSignatureStale) {
		t.Errorf("stale: %v", err)
	}
}

func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	_, pool, schema := newPSP(t, 4, psp.Config{})
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = psp.Migrate(context.Background(), pool, schema) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]psp.Config{
		"url without secret": {WebhookURL: "http://127.0.0.1:1/hook"},
		"bad url":            {WebhookURL: "ftp://x", WebhookSecret: "s"},
		"fault rate":         {FaultRate: 2},
	} {
		if err := cfg.WithDefaults().Validate(); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
