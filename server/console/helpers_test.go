package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/sandbox/fault"
	sandboxpsp "github.com/retrysafe/retrysafe/sandbox/psp"
	"github.com/retrysafe/retrysafe/server/console"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const secret = "0123456789abcdef0123456789abcdef"

// reviewSoon is the one place these tests depend on how the executor
// bounds its attempts before review: a provider that always fails sends
// the action to review after two claims.
func reviewSoon(c *executor.Config) {
	c.MaxAttempts = 2
	c.BackoffBase, c.BackoffMax = 10*time.Millisecond, 20*time.Millisecond
}

type env struct {
	t       *testing.T
	pool    *pgxpool.Pool
	psp     *toolstest.Provider
	ex      *executor.Executor
	store   *intent.Store
	srv     *httptest.Server
	logs    *syncWriter
	tokenA  string // alice: tenant-a
	tokenB  string // bob: tenant-b
	handler *console.Handler
	// lookupDown makes the provider's lookup by key unavailable while an
	// action is driven to review (see inReview).
	lookupDown *atomic.Bool
}

func newEnv(t *testing.T) *env { return newEnvWith(t, false) }

// newEnvWith, with sandbox, charges through the sandbox PSP (sandbox/psp,
// on the test's schema) whose fault injector answers 500 to every charge
// without acting, and gives the console its request log; without, through
// tools/toolstest, whose faults each test picks.
func newEnvWith(t *testing.T, sandbox bool) *env {
	t.Helper()
	pool, schema := pgtest.Schema(t, nil)
	// Fresh connections: net/http retries a request with an
	// Idempotency-Key on a reused connection, which would hide faults.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var (
		psp        *toolstest.Provider
		pixCfg     tools.HTTPConfig
		requests   console.RequestLog
		lookupDown = new(atomic.Bool)
	)
	if sandbox {
		if err := sandboxpsp.Migrate(context.Background(), pool, schema); err != nil {
			t.Fatal(err)
		}
		s, err := sandboxpsp.New(pool, sandboxpsp.Config{Fault: fault.Spec{FailBefore: true}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		// The PSP's lookup is down while inReview drives the executor (a
		// 500 to a charge that cannot be looked up: nobody can tell); it
		// is back when the operator asks.
		inner := s.Handler()
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if lookupDown.Load() && r.Method == http.MethodGet && r.URL.Path == "/v1/pix/charges" {
				http.Error(w, `{"error":"lookup unavailable"}`, http.StatusServiceUnavailable)
				return
			}
			inner.ServeHTTP(w, r)
		}))
		t.Cleanup(hs.Close)
		pixCfg = tools.HTTPConfig{BaseURL: hs.URL, Token: "merchant-console", Client: client}
		requests = &console.HTTPRequestLog{URL: hs.URL + "/_sandbox/requests"}
	} else {
		psp = toolstest.NewProvider()
		t.Cleanup(psp.Close)
		pixCfg = tools.HTTPConfig{BaseURL: psp.URL, Client: client}
	}
	pix, err := tools.NewPixCharge(pixCfg)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(pix)
	if err != nil {
		t.Fatal(err)
	}
	d, err := reg.Deriver([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := intent.New(intent.Config{Deriver: d, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	cfg := executor.Config{DB: pool, Intents: store, Tools: reg, Logger: quiet}
	reviewSoon(&cfg)
	ex, err := executor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncWriter{}
	h, err := console.New(console.Config{DB: pool, Tools: reg, Logger: slog.New(slog.NewTextHandler(logs, nil)), LookupTimeout: 5 * time.Second, Requests: requests})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e := &env{t: t, pool: pool, psp: psp, ex: ex, store: store, srv: srv, logs: logs, handler: h, lookupDown: lookupDown}
	ctx := context.Background()
	if e.tokenA, err = console.AddOperator(ctx, pool, "alice", []string{"tenant-a"}, false); err != nil {
		t.Fatal(err)
	}
	if e.tokenB, err = console.AddOperator(ctx, pool, "bob", []string{"tenant-b"}, false); err != nil {
		t.Fatal(err)
	}
	return e
}

// inReview charges ref for tenant through a PSP that answers 500 to every
// charge and cannot be asked by key meanwhile, until the executor gives up
// and puts the action in review (a lookup that found nothing would fail
// it instead). The lookup is back when it returns. It returns the
// action's key.
func (e *env) inReview(tenant, ref, cpf string) string {
	e.t.Helper()
	if e.psp != nil {
		e.psp.SetFault(func(toolstest.Request) toolstest.Fault { return toolstest.FailBefore })
		e.psp.LookupDown.Store(true)
		defer e.psp.LookupDown.Store(false)
	}
	e.lookupDown.Store(true)
	defer e.lookupDown.Store(false)
	out, err := e.ex.Execute(context.Background(), executor.Call{
		Tenant: tenant, Ref: ref, Action: tools.PixChargeName, SourceRef: "wamid.test-" + ref,
		Fields: map[string]any{"customer_id": "C-42", "amount": "R$ 180,00", "pix_key": cpf},
	}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if out.Status != executor.StatusReview {
		e.t.Fatalf("%s: status %s, want review (failure %+v)", ref, out.Status, out.Failure)
	}
	return out.Key
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects, so that tests see each answer.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: e.t, base: e.srv.URL, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *browser) signIn(token string) {
	b.t.Helper()
	res, body := b.post("/console/signin", url.Values{"token": {token}}, nil)
	if res.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("sign in: %d %s", res.StatusCode, body)
	}
	res, body = b.get("/console/")
	if res.StatusCode != http.StatusOK {
		b.t.Fatalf("after sign-in: %d", res.StatusCode)
	}
	m := csrfRe.FindStringSubmatch(body)
	if m == nil {
		b.t.Fatal("no csrf token in the page")
	}
	b.csrf = m[1]
}

func (b *browser) get(path string) (*http.Response, string) {
	b.t.Helper()
	res, err := b.c.Get(b.base + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

func (b *browser) post(path string, form url.Values, hdr map[string]string) (*http.Response, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

// form is a console form with the session's CSRF token.
func (b *browser) form(kv ...string) url.Values {
	v := url.Values{"csrf": {b.csrf}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

func actionRow(t *testing.T, pool *pgxpool.Pool, tenant, key string) *executor.Action {
	t.Helper()
	a, err := executor.Get(context.Background(), pool, tenant, key)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (e *env) logText() string {
	e.logs.mu.Lock()
	defer e.logs.mu.Unlock()
	return e.logs.b.String()
}
