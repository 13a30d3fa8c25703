package labcli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/cli"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/sandbox/psp"
)

func TestSandboxHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"sandbox", "--help"}, {"help", "sandbox"}} {
		e, out, _ := testEnv(strings.NewReader(""), nil)
		if code := cli.Run(context.Background(), e, args); code != 0 || !strings.Contains(out.String(), "psp ") {
			t.Errorf("%v: exit %d, %s", args, code, out)
		}
	}
	e, out, _ := testEnv(strings.NewReader(""), map[string]string{"RETRYSAFE_PSP_WEBHOOK_SECRET": "do-not-print"})
	if code := cli.Run(context.Background(), e, []string{"sandbox", "psp", "--flavour", "v1", "--help"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"POST /v1/pix/charges", "Idempotency-Key", "kept 24h0m0s", "purge", "X-Sandbox-Fault", "Retrysafe-Signature", "--webhook-url", "retrysafe_psp"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("sandbox psp --help lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "do-not-print") {
		t.Error("--help printed the webhook secret")
	}
	// Without --flavour, the PSP speaks API Pix.
	e, out, _ = testEnv(strings.NewReader(""), nil)
	if code := cli.Run(context.Background(), e, []string{"sandbox", "psp", "--help"}); code != 0 ||
		!strings.Contains(out.String(), "PUT    /api/cob/{txid}") || strings.Contains(out.String(), "Idempotency-Key: <key>") {
		t.Errorf("sandbox psp --help (the default flavour): exit %d\n%s", code, out)
	}
	for _, args := range [][]string{
		{"sandbox"},
		{"sandbox", "nope"},
		{"sandbox", "psp", "--flavour", "v1", "--fault", "explode"},
		{"sandbox", "psp", "--flavour", "v1", "--webhook-url", "http://127.0.0.1:1/h"}, // no secret
		{"sandbox", "psp", "--flavour", "v1", "extra"},
		{"sandbox", "psp", "--fault", "explode"},
		{"sandbox", "psp", "extra"},
		{"sandbox", "psp", "--flavour", "v2"},
	} {
		e, _, errb := testEnv(strings.NewReader(""), nil)
		if code := cli.Run(context.Background(), e, args); code == 0 || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb)
		}
	}
}

// The real binary, started as a user would, driven over HTTP only.
func TestSandboxPSPBinary(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)

	t.Run("api", func(t *testing.T) {
		t.Parallel()
		const secret = "whsec_blackbox"
		hook := newSandboxHookReceiver(t, secret)
		p := startSandboxPSP(t, bin, "--webhook-url", hook.srv.URL, "--webhook-secret", secret, "--webhook-backoff", "50ms")
		c := &http.Client{Timeout: 10 * time.Second}

		if r := p.call(t, c, "GET", "/healthz", "", "", ""); r.status != 200 {
			t.Fatalf("healthz: %+v", r)
		}
		body := `{"amount_cents":18000,"pix_key":"52998224725","pix_key_type":"cpf","description":"Fatura 7"}`
		if r := p.call(t, c, "POST", "/v1/pix/charges", "shop", "", body); r.status != 400 || r.header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("missing key: %+v", r)
		}
		first := p.call(t, c, "POST", "/v1/pix/charges", "shop", "inv-7", body)
		if first.status != 201 || first.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("create: %+v", first)
		}
		charge := first.charge(t)
		if charge.AmountCents != 18000 || charge.Status != "paid" || charge.IdempotencyKey != "inv-7" {
			t.Fatalf("charge %+v", charge)
		}
		again := p.call(t, c, "POST", "/v1/pix/charges", "shop", "inv-7",
			`{ "description":"Fatura 7", "pix_key_type":"cpf", "pix_key":"52998224725", "amount_cents":18000 }`)
		if again.status != 201 || again.header.Get("Idempotent-Replayed") != "true" || again.body != first.body {
			t.Fatalf("replay: %+v", again)
		}
		if r := p.call(t, c, "POST", "/v1/pix/charges", "shop", "inv-7", strings.Replace(body, "18000", "18001", 1)); r.status != 422 {
			t.Fatalf("other amount: %+v", r)
		}

		// The response is lost but the charge exists; the retry gets it.
		if _, err := p.post(c, "shop", "inv-8", body, "drop-after"); err == nil {
			t.Fatal("drop-after answered")
		}
		found := p.call(t, c, "GET", "/v1/pix/charges?idempotency_key=inv-8", "shop", "", "")
		if found.status != 200 {
			t.Fatalf("lookup after the dropped answer: %+v", found)
		}
		retry := p.call(t, c, "POST", "/v1/pix/charges", "shop", "inv-8", body)
		if retry.status != 201 || retry.header.Get("Idempotent-Replayed") != "true" || retry.charge(t).ID != found.charge(t).ID {
			t.Fatalf("retry after drop: %+v", retry)
		}
		if r := p.call(t, c, "GET", "/v1/pix/charges?idempotency_key=never", "shop", "", ""); r.status != 404 {
			t.Fatalf("unknown key: %+v", r)
		}

		// 20 simultaneous requests with one key over real connections.
		var wg sync.WaitGroup
		statuses := make([]int, 20)
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := p.post(c, "shop", "inv-9", body, "")
				if err == nil {
					statuses[i] = resp.StatusCode
					resp.Body.Close()
				}
			}()
		}
		wg.Wait()
		for _, s := range statuses {
			if s != 201 && s != 409 {
				t.Fatalf("simultaneous statuses %v", statuses)
			}
		}

		list := p.call(t, c, "GET", "/v1/pix/charges", "shop", "", "")
		var l struct{ Data []psp.Charge }
		json.Unmarshal([]byte(list.body), &l)
		if len(l.Data) != 3 || l.Data[2].ID != charge.ID {
			t.Fatalf("list: %s", list.body)
		}

		// One signed event per charge; the receiver refuses the first
		// attempt of each, so each is redelivered.
		hook.waitEvents(t, 3)
		for id, n := range hook.attemptsPerEvent() {
			if n < 2 {
				t.Errorf("event %s delivered in %d attempt(s), want a redelivery", id, n)
			}
		}
		p.stopClean(t)
	})

	t.Run("process-fault", func(t *testing.T) {
		t.Parallel()
		p := startSandboxPSP(t, bin, "--fault", "fail-after")
		c := &http.Client{Timeout: 10 * time.Second}
		body := `{"amount_cents":500,"pix_key":"cliente@exemplo.com.br","pix_key_type":"email"}`
		if r := p.call(t, c, "POST", "/v1/pix/charges", "shop", "k1", body); r.status != 500 {
			t.Fatalf("fail-after: %+v", r)
		}
		if r := p.call(t, c, "GET", "/v1/pix/charges?idempotency_key=k1", "shop", "", ""); r.status != 200 {
			t.Fatalf("the charge behind the 500 does not exist: %+v", r)
		}
		resp, err := p.post(c, "shop", "k1", body, "none") // the header overrides the process fault
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 201 || resp.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry: %d replayed=%q", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"))
		}
		p.stopClean(t)
	})
}

// sandboxPSPProc is `retrysafe sandbox psp` on a schema of its own.
type sandboxPSPProc struct{ *testutil.Proc }

func startSandboxPSP(t *testing.T, bin string, args ...string) *sandboxPSPProc {
	t.Helper()
	schema := scratchSchema(t, "psp_bb_")
	p := testutil.StartProc(t, bin, []string{"DATABASE_URL=" + pgtest.URL(t)},
		append([]string{"sandbox", "psp", "--flavour", "v1", "--addr", "127.0.0.1:0", "--schema", schema, "--max-conns", "4"}, args...)...)
	if !strings.HasPrefix(p.ReadyLine, "retrysafe sandbox psp: listening on ") {
		t.Fatalf("ready line %q", p.ReadyLine)
	}
	return &sandboxPSPProc{p}
}

// stopClean sends SIGTERM and expects a clean exit.
func (p *sandboxPSPProc) stopClean(t *testing.T) {
	t.Helper()
	if code := p.Stop(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, p.Stderr)
	}
}

func (p *sandboxPSPProc) post(c *http.Client, token, key, body, faultSpec string) (*http.Response, error) {
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/v1/pix/charges", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if faultSpec != "" {
		req.Header.Set("X-Sandbox-Fault", faultSpec)
	}
	return c.Do(req)
}

type sandboxAnswer struct {
	status int
	header http.Header
	body   string
}

func (a sandboxAnswer) charge(t *testing.T) psp.Charge {
	t.Helper()
	var c psp.Charge
	if err := json.Unmarshal([]byte(a.body), &c); err != nil || c.ID == "" {
		t.Fatalf("not a charge: %d %s", a.status, a.body)
	}
	return c
}

func (p *sandboxPSPProc) call(t *testing.T, c *http.Client, method, path, token, key, body string) sandboxAnswer {
	t.Helper()
	var resp *http.Response
	var err error
	if method == http.MethodPost {
		resp, err = p.post(c, token, key, body, "")
	} else {
		req, _ := http.NewRequest(method, p.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err = c.Do(req)
	}
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", method, path, err, p.Stderr)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return sandboxAnswer{resp.StatusCode, resp.Header, string(b)}
}

// sandboxHookReceiver checks signatures, refuses every event's first
// attempt with 503 and accepts the next.
type sandboxHookReceiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	attempts map[string]int
	accepted map[string]bool
}

func newSandboxHookReceiver(t *testing.T, secret string) *sandboxHookReceiver {
	h := &sandboxHookReceiver{attempts: map[string]int{}, accepted: map[string]bool{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := psp.VerifySignature(secret, r.Header.Get("Retrysafe-Signature"), body, 5*time.Minute, time.Now()); err != nil {
			t.Errorf("webhook signature: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var ev psp.Event
		if err := json.Unmarshal(body, &ev); err != nil || ev.Type != "payment_intent.succeeded" || ev.Data.Object.ID == "" {
			t.Errorf("webhook event: %s (%v)", body, err)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.attempts[ev.ID]++
		if h.attempts[ev.ID] == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		h.accepted[ev.ID] = true
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *sandboxHookReceiver) waitEvents(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		got := len(h.accepted)
		h.mu.Unlock()
		if got >= n {
			if got > n {
				t.Fatalf("%d events accepted, want %d", got, n)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("webhook events not delivered: %v", h.attemptsPerEvent())
}

func (h *sandboxHookReceiver) attemptsPerEvent() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for k, v := range h.attempts {
		out[k] = v
	}
	return out
}
