package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/server/mcpserver"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

// tools/list shows each tool under its function name with its schema,
// description and honest annotations.
func TestListTools(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cs := h.connect("tenant-a", nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 1 {
		t.Fatalf("%d tools", len(res.Tools))
	}
	tl := res.Tools[0]
	a := tl.Annotations
	if tl.Name != "pix_charge" || tl.Title != "pix.charge" || !strings.Contains(tl.Description, "Pix") ||
		a == nil || a.DestructiveHint == nil || !*a.DestructiveHint || !a.IdempotentHint || a.OpenWorldHint == nil || !*a.OpenWorldHint || a.ReadOnlyHint {
		t.Fatalf("tool %+v annotations %+v", tl, a)
	}
	schema, _ := json.Marshal(tl.InputSchema)
	want := string(tools.ParametersFromSchema(tools.PixChargeSchema(), tools.RefField))
	var got, wantV any
	json.Unmarshal(schema, &got)         //nolint:errcheck
	json.Unmarshal([]byte(want), &wantV) //nolint:errcheck
	if b1, _ := json.Marshal(got); string(b1) != mustJSON(wantV) {
		t.Fatalf("input schema %s, want %s", schema, want)
	}
	if strings.Contains(string(schema), "intent_ref") {
		t.Fatalf("the model is offered intent_ref: %s", schema)
	}
	if tl.OutputSchema == nil {
		t.Fatal("no output schema")
	}
}

// progressLog records the progress messages of one call. The client
// handles notifications on a goroutine of their own, so the response may
// arrive before them: wait blocks until the last one.
type progressLog struct {
	mu       sync.Mutex
	msgs     []string
	finished chan struct{}
}

func (p *progressLog) handle(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	p.msgs = append(p.msgs, req.Params.Message)
	p.mu.Unlock()
	if strings.HasPrefix(req.Params.Message, "finished: ") {
		p.finished <- struct{}{}
	}
}

func (p *progressLog) wait(t *testing.T) []string {
	t.Helper()
	select {
	case <-p.finished:
	case <-time.After(10 * time.Second):
		t.Fatal("no final progress notification")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.msgs)
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A call with the host's reference charges once; the same intent spelled
// differently replays; progress is reported when asked for.
func TestCallReplayAndProgress(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	pr := &progressLog{finished: make(chan struct{}, 1)}
	cs := h.connect("tenant-a", &mcp.ClientOptions{ProgressNotificationHandler: pr.handle})

	p := callParams("inv-1", charge("R$ 180,00", cpfPunct))
	p.SetProgressToken("tok-1")
	res, r := call(t, cs, p)
	if res.IsError || r.Status != "completed" || r.Replayed || !r.Created || r.IdempotencyKey == "" || r.Guarantee != "per_intent" || r.IntentRefSource != "meta" ||
		!strings.Contains(string(r.Response), `"amount_cents":18000`) {
		t.Fatalf("first call: %+v", r)
	}
	res2, r2 := call(t, cs, callParams("inv-1", charge(json.Number("180"), cpfDigits)))
	if res2.IsError || r2.Status != "completed" || !r2.Replayed || r2.IdempotencyKey != r.IdempotencyKey || len(r2.DivergentFields) != 0 {
		t.Fatalf("second call: %+v", r2)
	}
	if n := h.psp.Count(chargePath); n != 1 {
		t.Fatalf("%d charges", n)
	}
	// A progress token: the first and the last notification, at least.
	if msgs := pr.wait(t); len(msgs) < 2 || !strings.HasPrefix(msgs[0], "freezing") {
		t.Fatalf("progress messages %q", msgs)
	}
	// The sidecar's counters, labelled by tenant, action and outcome only.
	rec := httptest.NewRecorder()
	h.m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, series := range []string{
		`retrysafe_executions_total{action="pix.charge",outcome="completed",tenant="tenant-a"} 2`,
		`retrysafe_replays_total{action="pix.charge",outcome="completed",tenant="tenant-a"} 1`,
	} {
		if !strings.Contains(rec.Body.String(), series) {
			t.Fatalf("metrics lack %s", series)
		}
	}
	// Log lines: tenant, action, outcome, key; never the reference or a field.
	logs := h.logs.String()
	for _, secret := range []string{"inv-1", cpfDigits, cpfPunct, "cust-42"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("logs contain %q:\n%s", secret, logs)
		}
	}
	if !strings.Contains(logs, "idempotency_key="+r.IdempotencyKey) || !strings.Contains(logs, "outcome=completed") {
		t.Fatalf("logs:\n%s", logs)
	}
}

// Progress notifications arrive while a slow provider call runs.
func TestProgressOnSlowCall(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.psp.SlowDelay = 700 * time.Millisecond
	h.psp.SetFault(func(toolstest.Request) toolstest.Fault { return toolstest.Slow })
	pr := &progressLog{finished: make(chan struct{}, 1)}
	cs := h.connect("tenant-a", &mcp.ClientOptions{ProgressNotificationHandler: pr.handle})
	p := callParams("inv-slow", charge(180, cpfDigits))
	p.SetProgressToken(7)
	if res, r := call(t, cs, p); res.IsError || r.Status != "completed" {
		t.Fatalf("%+v", r)
	}
	msgs := pr.wait(t)
	var waiting int
	for _, m := range msgs {
		if strings.HasPrefix(m, "waiting for the provider") {
			waiting++
		}
	}
	// 700ms at a 100ms interval: several.
	if waiting < 3 || !strings.HasPrefix(msgs[len(msgs)-1], "finished: completed") {
		t.Fatalf("progress messages %q", msgs)
	}
}

// Without a host-supplied reference the call is refused and nothing is
// written or called; where the operator allows a model-supplied one, the
// result says the guarantee is weaker.
func TestHostReferenceRequired(t *testing.T) {
	t.Parallel()
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, nil)
		cs := h.connect("tenant-a", nil)
		args := charge(180, cpfDigits)
		args["intent_ref"] = "inv-from-model" // not accepted for this tool
		for _, p := range []*mcp.CallToolParams{callParams("", charge(180, cpfDigits)), callParams("", args)} {
			res, r := call(t, cs, p)
			if !res.IsError || r.Status != "refused" || !strings.Contains(r.Message, mcpserver.MetaIntentRef) {
				t.Fatalf("%+v", r)
			}
		}
		for _, bad := range []any{"", " inv-1", 42, strings.Repeat("x", 201)} {
			p := callParams("x", charge(180, cpfDigits))
			p.Meta[mcpserver.MetaIntentRef] = bad
			if res, r := call(t, cs, p); !res.IsError || r.Status != "invalid" || len(r.Errors) != 1 || r.Errors[0].Field != "_meta."+mcpserver.MetaIntentRef {
				t.Fatalf("ref %v: %+v", bad, r)
			}
		}
		if i, a, c := h.count("intents"), h.count("actions"), h.psp.Requests(); i != 0 || a != 0 || c != 0 {
			t.Fatalf("%d intents, %d actions, %d PSP requests after refusals", i, a, c)
		}
	})
	t.Run("model reference allowed", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, &harnessOpts{cfg: func(c *mcpserver.Config) { c.ModelRefTools = []string{"pix.charge"} }})
		cs := h.connect("tenant-a", nil)
		lt, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if s := mustJSON(lt.Tools[0].InputSchema); !strings.Contains(s, `"intent_ref"`) {
			t.Fatalf("schema without intent_ref: %s", s)
		}
		if res, r := call(t, cs, callParams("", charge(180, cpfDigits))); !res.IsError || r.Status != "refused" {
			t.Fatalf("no reference at all: %+v", r)
		}
		if h.count("intents") != 0 {
			t.Fatal("refusal froze an intent")
		}
		args := charge(180, cpfDigits)
		args["intent_ref"] = "inv-m1"
		res, r := call(t, cs, callParams("", args))
		if res.IsError || r.Status != "completed" || r.Guarantee != "weaker" || r.IntentRefSource != "model" || !strings.Contains(r.Message, "weaker") {
			t.Fatalf("%+v", r)
		}
		// The host's reference wins over the model's.
		res, r2 := call(t, cs, callParams("inv-m1", args))
		if res.IsError || !r2.Replayed || r2.Guarantee != "per_intent" || r2.IdempotencyKey != r.IdempotencyKey {
			t.Fatalf("%+v", r2)
		}
	})
}

// Invalid arguments: a tool error naming every broken field, nothing
// written, nothing called.
func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cs := h.connect("tenant-a", nil)
	for _, c := range []struct {
		args   map[string]any
		fields string
	}{
		{charge("cento e oitenta", cpfDigits), "amount"},
		{charge("180.005", cpfDigits), "amount"},
		{charge(180, "529.982.247-26"), "pix_key"},
		{map[string]any{"amount": "180,00"}, "customer_id,pix_key"},
		{map[string]any{"amount": "cento e oitenta", "pix_key": "529.982.247-26", "pix_key_type": "cpf"}, "amount,customer_id,pix_key"},
	} {
		res, r := call(t, cs, callParams("inv-bad", c.args))
		var names []string
		for _, e := range r.Errors {
			names = append(names, e.Field)
			if !strings.Contains(r.Message, e.Field+": "+e.Reason) {
				t.Errorf("args %v: the message %q does not name %s", c.args, r.Message, e.Field)
			}
		}
		if !res.IsError || r.Status != "invalid" || strings.Join(names, ",") != c.fields {
			t.Fatalf("args %v: %+v, want fields %s", c.args, r, c.fields)
		}
		if strings.Contains(r.Message, "529.982.247-26") || strings.Contains(r.Message, "cento") {
			t.Fatalf("message repeats a value: %s", r.Message)
		}
	}
	// Not an object.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "pix_charge", Arguments: []int{1}, Meta: mcp.Meta{mcpserver.MetaIntentRef: "inv-bad"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := decode(t, res); !res.IsError || r.Status != "invalid" || r.Errors[0].Field != "arguments" {
		t.Fatalf("%+v", r)
	}
	if i, a, c := h.count("intents"), h.count("actions"), h.psp.Requests(); i != 0 || a != 0 || c != 0 {
		t.Fatalf("%d intents, %d actions, %d PSP requests after invalid calls", i, a, c)
	}
}

// in_flight tells when to call again; review tells not to retry; a
// definitive failure says the same call gets the same answer.
func TestInFlightReviewFailed(t *testing.T) {
	t.Parallel()
	t.Run("in_flight", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, nil)
		h.psp.SlowDelay = 2 * time.Second
		arrived := make(chan struct{}, 1)
		h.psp.SetFault(func(toolstest.Request) toolstest.Fault {
			select {
			case arrived <- struct{}{}:
			default:
			}
			return toolstest.Slow
		})
		cs := h.connect("tenant-a", nil)
		first := make(chan mcpserver.Result, 1)
		go func() {
			_, r := call(t, cs, callParams("inv-if", charge(180, cpfDigits)))
			first <- r
		}()
		<-arrived
		res, r := call(t, cs, callParams("inv-if", charge("180,00", cpfPunct)))
		if !res.IsError || r.Status != "in_flight" || r.RetryAfterMillis < 1000 || !strings.Contains(r.Message, "Call again") {
			t.Fatalf("%+v", r)
		}
		if f := <-first; f.Status != "completed" || f.IdempotencyKey != r.IdempotencyKey {
			t.Fatalf("first: %+v", f)
		}
	})
	t.Run("review", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, &harnessOpts{exec: func(c *executor.Config) { c.MaxAttempts = 1 }})
		// A 500 and no way to ask by key: nobody can tell.
		h.psp.SetFault(func(toolstest.Request) toolstest.Fault { return toolstest.FailBefore })
		h.psp.LookupDown.Store(true)
		cs := h.connect("tenant-a", nil)
		res, r := call(t, cs, callParams("inv-rv", charge(180, cpfDigits)))
		if !res.IsError || r.Status != "review" || r.Error == nil || !strings.HasPrefix(r.Message, "Do not retry") {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("failed", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, nil)
		h.psp.SetFault(func(toolstest.Request) toolstest.Fault { return toolstest.Reject })
		cs := h.connect("tenant-a", nil)
		for i := range 2 {
			res, r := call(t, cs, callParams("inv-rj", charge(180, cpfDigits)))
			if !res.IsError || r.Status != "failed" || r.Error == nil || r.Replayed != (i == 1) {
				t.Fatalf("call %d: %+v", i, r)
			}
		}
		if n := h.psp.Requests(); n != 1 {
			t.Fatalf("%d PSP requests", n)
		}
	})
}

// Over streamable HTTP the bearer token names the tenant: the same
// reference under two tenants is two intents; no token, no call.
func TestHTTPTenants(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	hs := h.httpServer()
	keys := map[string]string{}
	for _, tok := range []string{tokenA, tokenB} {
		cs := httpClient(t, hs.URL, tok, nil)
		_, r := call(t, cs, callParams("inv-shared", charge(180, cpfDigits)))
		if r.Status != "completed" || r.Replayed {
			t.Fatalf("token %s: %+v", tok[:7], r)
		}
		keys[tok] = r.IdempotencyKey
	}
	if keys[tokenA] == keys[tokenB] || h.psp.Count(chargePath) != 2 {
		t.Fatalf("keys %v, %d charges", keys, h.psp.Count(chargePath))
	}
	for _, tok := range []string{"", "nope", tokenA + "x"} {
		req, _ := http.NewRequest(http.MethodPost, hs.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("token %q: HTTP %d", tok, resp.StatusCode)
		}
	}
	// The connection's header binds the reference when _meta does not.
	cs := httpClient(t, hs.URL, tokenA, http.Header{mcpserver.HeaderIntentRef: {"inv-shared"}})
	if _, r := call(t, cs, callParams("", charge("180,00", cpfPunct))); r.Status != "completed" || !r.Replayed || r.IntentRefSource != "header" || r.IdempotencyKey != keys[tokenA] {
		t.Fatalf("header reference: %+v", r)
	}
	if _, r := call(t, cs, callParams("inv-other", charge(180, cpfDigits))); r.Status != "invalid" {
		t.Fatalf("_meta and header disagree: %+v", r)
	}
	// Progress reaches an HTTP client too, on the call's own response stream.
	pr := &progressLog{finished: make(chan struct{}, 1)}
	cs = httpClient(t, hs.URL, tokenB, nil, &mcp.ClientOptions{ProgressNotificationHandler: pr.handle})
	p := callParams("inv-progress", charge(180, cpfDigits))
	p.SetProgressToken("http-1")
	if _, r := call(t, cs, p); r.Status != "completed" {
		t.Fatalf("%+v", r)
	}
	if msgs := pr.wait(t); len(msgs) < 2 {
		t.Fatalf("progress over HTTP: %q", msgs)
	}
}

// 200 concurrent tools/call for one intent over streamable HTTP: one
// charge, one key; every caller gets completed or in_flight.
func TestHTTPConcurrentOneCharge(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &harnessOpts{maxConns: 8})
	hs := h.httpServer()
	cs := httpClient(t, hs.URL, tokenA, nil)
	spellings := []map[string]any{
		charge("180,00", cpfPunct), charge("R$ 180,00", cpfDigits), charge(180, cpfPunct),
		charge(json.Number("180.0"), cpfDigits), charge("180.00", " "+cpfPunct),
	}
	const n = 200
	results := make([]mcpserver.Result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			_, results[i] = call(t, cs, callParams("inv-storm", spellings[i%len(spellings)]))
		})
	}
	close(start)
	wg.Wait()
	var completed, inFlight, fresh int
	key := results[0].IdempotencyKey
	for i, r := range results {
		if r.IdempotencyKey != key {
			t.Fatalf("caller %d: key %s, want %s", i, r.IdempotencyKey, key)
		}
		switch r.Status {
		case "completed":
			completed++
			if !r.Replayed {
				fresh++
			}
		case "in_flight":
			inFlight++
		default:
			t.Fatalf("caller %d: %+v", i, r)
		}
	}
	if c := h.psp.Count(chargePath); c != 1 || fresh != 1 {
		t.Fatalf("%d charges, %d callers reached the PSP", c, fresh)
	}
	if h.count("intents") != 1 || h.count("actions") != 1 {
		t.Fatalf("%d intents, %d actions", h.count("intents"), h.count("actions"))
	}
	// Every caller told in_flight gets the charge by calling again after
	// retry_after_ms, and the calls again create nothing.
	for i := range results {
		wg.Go(func() {
			for deadline := time.Now().Add(30 * time.Second); results[i].Status == "in_flight" && time.Now().Before(deadline); {
				time.Sleep(min(time.Duration(results[i].RetryAfterMillis)*time.Millisecond, time.Second))
				_, results[i] = call(t, cs, callParams("inv-storm", spellings[i%len(spellings)]))
			}
		})
	}
	wg.Wait()
	for i, r := range results {
		if r.Status != "completed" || r.IdempotencyKey != key || !strings.Contains(string(r.Response), `"amount_cents":18000`) {
			t.Fatalf("caller %d after calling again: %+v", i, r)
		}
	}
	if c := h.psp.Count(chargePath); c != 1 {
		t.Fatalf("%d charges after the calls again", c)
	}
	t.Logf("200 concurrent tools/call: 1 charge, 1 key, %d completed, %d in_flight (all completed on calling again)", completed, inFlight)
}

type headerTransport struct {
	h    http.Header
	base http.RoundTripper
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return t.base.RoundTrip(r)
}

func httpClient(t *testing.T, url, token string, extra http.Header, opts ...*mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + token}}
	for k, v := range extra {
		h[k] = v
	}
	hc := &http.Client{Transport: &headerTransport{h: h, base: &http.Transport{MaxIdleConnsPerHost: 256}}}
	var o *mcp.ClientOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, o).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
