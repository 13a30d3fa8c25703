package agent_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/agent/agenttest"
	"github.com/retrysafe/retrysafe/internal/testutil"
	sandboxmodel "github.com/retrysafe/retrysafe/sandbox/model"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

// TestRetryAfterTransport: go-openai against an API that answers 429 with
// Retry-After: 3 once; the transport waits 3 s (an injected sleeper
// records it) and the call succeeds. A wait longer than MaxWait is not
// slept: the error reaches the caller.
func TestRetryAfterTransport(t *testing.T) {
	t.Parallel()
	var (
		calls atomic.Int64
		ra    atomic.Value
	)
	ra.Store("3")
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", ra.Load().(string))
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
	}))
	defer api.Close()
	var (
		mu    sync.Mutex
		slept []time.Duration
		sleep = func(_ context.Context, d time.Duration) error {
			mu.Lock()
			slept = append(slept, d)
			mu.Unlock()
			return nil
		}
		client = func(maxWait time.Duration) *openai.Client {
			oc := openai.DefaultConfig("k")
			oc.BaseURL = api.URL + "/v1"
			oc.HTTPClient = &http.Client{Transport: &agent.RetryAfterTransport{Sleep: sleep, MaxWait: maxWait}}
			return openai.NewClientWithConfig(oc)
		}
	)
	req := openai.ChatCompletionRequest{Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "oi"}}}
	if _, err := client(0).CreateChatCompletion(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if len(slept) != 1 || slept[0] < 3*time.Second || calls.Load() != 2 {
		t.Fatalf("slept %v over %d calls; want one wait of at least 3s", slept, calls.Load())
	}
	calls.Store(0)
	_, err := client(2*time.Second).CreateChatCompletion(t.Context(), req)
	if err == nil || len(slept) != 1 {
		t.Fatalf("a 3s wait over MaxWait 2s: err %v, slept %v", err, slept)
	}
	for h, want := range map[string]time.Duration{"Retry-After=7": 7 * time.Second, "retry-after-ms=1500": 1500 * time.Millisecond, "Retry-After=x": -1} {
		k, v, _ := strings.Cut(h, "=")
		got, ok := agent.RetryAfter(http.Header{http.CanonicalHeaderKey(k): {v}}, time.Now())
		if (want < 0 && ok) || (want >= 0 && got != want) {
			t.Errorf("%s: %v %v", h, got, ok)
		}
	}
	at := time.Now().Add(5 * time.Second).UTC().Truncate(time.Second)
	if got, ok := agent.RetryAfter(http.Header{"Retry-After": {at.Format(http.TimeFormat)}}, at.Add(-5*time.Second)); !ok || got != 5*time.Second {
		t.Errorf("HTTP date: %v %v", got, ok)
	}
}

// faultHeader adds the sandbox model's fault header to every request.
type faultHeader struct {
	fault string
	base  http.RoundTripper
}

func (f faultHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(sandboxmodel.FaultHeader, f.fault)
	return f.base.RoundTrip(r)
}

// sandboxModel starts the sandbox model and returns a go-openai client
// for it through RetryAfterTransport, with fault forced on every request.
func sandboxModel(t *testing.T, cfg sandboxmodel.Config, fault string) (*sandboxmodel.Server, *openai.Client) {
	t.Helper()
	cfg.Logger = testutil.Logger(t)
	ms, err := sandboxmodel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ms)
	t.Cleanup(srv.Close)
	oc := openai.DefaultConfig("k")
	oc.BaseURL = srv.URL + "/v1"
	var rt http.RoundTripper = http.DefaultTransport
	if fault != "" {
		rt = faultHeader{fault, rt}
	}
	oc.HTTPClient = &http.Client{Transport: &agent.RetryAfterTransport{Base: rt}}
	return ms, openai.NewClientWithConfig(oc)
}

func (h *harness) deliverText(msgID, text string) {
	h.t.Helper()
	if rec := h.deliver(agenttest.WebhookPayload(phoneID, agenttest.TextMessage{ID: msgID, From: waID, Body: text})); rec.Code != http.StatusOK {
		h.t.Fatalf("delivery: %d", rec.Code)
	}
}

const (
	payText      = "Quero pagar a fatura NF-123 de R$ 180,00, minha chave Pix é o CPF 529.982.247-25"
	payTextPlain = payText // JSON-safe as it stands
)

// TestModel429RetryAfterHonoured: the sandbox model answers the first call
// 429 with Retry-After: 3; the turn completes, and not before 3 s of real
// time have passed.
func TestModel429RetryAfterHonoured(t *testing.T) {
	t.Parallel()
	ms, client := sandboxModel(t, sandboxmodel.Config{Seed: 7, RetryAfter: 3 * time.Second}, "")
	h := newHarnessWith(t, agent.JournalOn, endpoints{agentCfg: func(c *agent.Config) { c.Model = client }})
	h.deliverText("wamid.ra", payText)
	ms.RateLimitNext(1)
	start := time.Now()
	if err := h.runInboxUntilDone("wamid.ra"); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	st := ms.Stats()
	t.Logf("turn done %s after the 429 (model: %d failed, %d answered)", elapsed.Round(time.Millisecond), st.Failed, st.Calls)
	if elapsed < 3*time.Second || st.Failed != 1 || st.Calls < 1 {
		t.Fatalf("elapsed %s, model stats %+v; want at least 3s and one 429", elapsed, st)
	}
	if turn, err := agent.GetTurn(h.ctx, h.pool, tenant, "wamid.ra"); err != nil || turn.Status != agent.TurnAnswered {
		t.Fatalf("turn %+v, %v", turn, err)
	}
}

// TestRefusalJournaledAndAnswered: message.refusal is kept in the model
// journal and answered by the policy: fixed text, the refusal itself, or
// nothing sent (review).
func TestRefusalJournaledAndAnswered(t *testing.T) {
	t.Parallel()
	for _, pol := range []agent.RefusalPolicy{agent.RefusalFixed, agent.RefusalRelay, agent.RefusalReview} {
		t.Run(string(pol), func(t *testing.T) {
			t.Parallel()
			_, client := sandboxModel(t, sandboxmodel.Config{Seed: 3}, "refusal")
			h := newHarnessWith(t, agent.JournalOn, endpoints{agentCfg: func(c *agent.Config) { c.Model, c.Refusal = client, pol }})
			h.deliverText("wamid.ref", payText)
			if err := h.runInboxUntilDone("wamid.ref"); err != nil {
				t.Fatal(err)
			}
			turn, err := agent.GetTurn(h.ctx, h.pool, tenant, "wamid.ref")
			if err != nil {
				t.Fatal(err)
			}
			if turn.Status != agent.TurnRefused || turn.ErrorCode != "refusal" {
				t.Fatalf("turn %+v", turn)
			}
			var refusal string
			if err := h.pool.QueryRow(h.ctx, `SELECT coalesce(answer->'message'->>'refusal', '') FROM model_calls WHERE source_ref = 'wamid.ref' AND NOT replayed`).Scan(&refusal); err != nil || refusal == "" {
				t.Fatalf("journaled refusal %q, %v", refusal, err)
			}
			var reply string
			if err := h.pool.QueryRow(h.ctx, `SELECT body FROM messages WHERE message_id = 'wamid.ref:reply'`).Scan(&reply); err != nil {
				t.Fatal(err)
			}
			switch pol {
			case agent.RefusalRelay:
				if reply != refusal {
					t.Errorf("relayed %q, refusal %q", reply, refusal)
				}
			default:
				if reply != agent.DefaultTexts().Refusal {
					t.Errorf("reply %q", reply)
				}
			}
			jobs := h.count(`SELECT count(*) FROM river_job WHERE kind = $1`, agent.KindReply)
			if (pol == agent.RefusalReview) != (jobs == 0) || (pol == agent.RefusalReview && turn.ReplyStatus != agent.ReplyReview) {
				t.Errorf("policy %s: %d reply jobs, reply status %s", pol, jobs, turn.ReplyStatus)
			}
			if n := h.psp.Count(chargeURL); n != 0 {
				t.Errorf("%d charges after a refusal", n)
			}
		})
	}
}

// TestFinishReasons: an answer cut off (length) or filtered
// (content_filter) is not acted on; parallel tool calls (the same charge
// twice in one message) charge once.
func TestFinishReasons(t *testing.T) {
	t.Parallel()
	for fault, code := range map[string]string{"length": "length", "content-filter": "content_filter"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			_, client := sandboxModel(t, sandboxmodel.Config{Seed: 5}, fault)
			h := newHarnessWith(t, agent.JournalOn, endpoints{agentCfg: func(c *agent.Config) { c.Model = client }})
			h.deliverText("wamid.fin", payText)
			if err := h.runInboxUntilDone("wamid.fin"); err != nil {
				t.Fatal(err)
			}
			turn, _ := agent.GetTurn(h.ctx, h.pool, tenant, "wamid.fin")
			if turn.Status != agent.TurnModelError || turn.ErrorCode != code || h.psp.Count(chargeURL) != 0 {
				t.Fatalf("turn %+v, charges %d", turn, h.psp.Count(chargeURL))
			}
		})
	}
	t.Run("parallel", func(t *testing.T) {
		t.Parallel()
		_, client := sandboxModel(t, sandboxmodel.Config{Seed: 5}, "parallel")
		h := newHarnessWith(t, agent.JournalOn, endpoints{agentCfg: func(c *agent.Config) { c.Model = client }})
		h.deliverText("wamid.par", payText)
		if err := h.runInboxUntilDone("wamid.par"); err != nil {
			t.Fatal(err)
		}
		turn, _ := agent.GetTurn(h.ctx, h.pool, tenant, "wamid.par")
		if turn.Status != agent.TurnAnswered || len(turn.Tools) != 2 || h.psp.Count(chargeURL) != 1 || turn.Tools[0].Key != turn.Tools[1].Key {
			t.Fatalf("turn %+v, charges %d", turn, h.psp.Count(chargeURL))
		}
	})
}

// FuzzRetryAfter: whatever the headers say, the wait is never negative,
// and a header that parses is never ignored.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"3", "0", "1.5", "-1", "1e9", "Wed, 21 Oct 2015 07:28:00 GMT", "", "x"} {
		f.Add(s, "")
		f.Add("", s)
	}
	f.Add("7", "1500")
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, ra, ms string) {
		h := http.Header{}
		if ra != "" {
			h.Set("Retry-After", ra)
		}
		if ms != "" {
			h.Set("retry-after-ms", ms)
		}
		d, ok := agent.RetryAfter(h, now)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("Retry-After %q, retry-after-ms %q: %v %v", ra, ms, d, ok)
		}
	})
}

// RetryAfterTransport without a Base keeps its connections between
// concurrent model calls: on net/http's default transport (two idle per
// host) each round of 12 concurrent calls held at the API until all are in
// would open 10 new ones.
func TestRetryAfterTransportKeepsConnections(t *testing.T) {
	t.Parallel()
	const conc, rounds = 12, 4
	held := toolstest.NewRounds(conc)
	srv := httptest.NewUnstartedServer(held.Hold(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{}`))
	}), nil))
	srv.Config.ConnState = held.ConnState
	srv.Start()
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &agent.RetryAfterTransport{}}
	for r := range rounds {
		var wg sync.WaitGroup
		for range conc {
			wg.Go(func() {
				resp, err := client.Get(srv.URL)
				if err != nil {
					t.Errorf("round %d: %v", r, err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			})
		}
		wg.Wait()
	}
	t.Logf("%d rounds of %d concurrent calls opened %d connections", rounds, conc, held.Opened())
	if got, most := held.Opened(), int64(conc+conc/2); got > most {
		t.Fatalf("%d rounds of %d concurrent calls opened %d connections, want at most %d", rounds, conc, got, most)
	}
}
