package sidecar_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/server/internal/edgetest"
	"github.com/retrysafe/retrysafe/server/metrics"
	"github.com/retrysafe/retrysafe/server/sidecar"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	testSecret = "sidecar-test-secret-0123456789abcdef"
	tokenA     = "token-a-0123456789"
	tokenB     = "token-b-0123456789"
	pspToken   = edgetest.PSPToken
	chargePath = "/v1/pix/charges"
)

// harness is one sidecar on its own schema, in front of a fake PSP.
type harness struct {
	eng   *edgetest.Engine
	t     *testing.T
	url   string
	pool  *pgxpool.Pool
	psp   *toolstest.Provider
	m     *metrics.Metrics
	srv   *sidecar.Server
	ex    *executor.Executor
	store *intent.Store
	logs  *testutil.LockedBuffer
	log   *slog.Logger
}

type harnessOpts struct {
	maxConns int32
	exec     func(*executor.Config)
	schema   string // override Config.Schema (readyz tests)
	side     func(*sidecar.Config)
}

func newHarness(t *testing.T, o *harnessOpts) *harness {
	t.Helper()
	if o == nil {
		o = &harnessOpts{}
	}
	e := edgetest.New(t, edgetest.Opts{MaxConns: o.maxConns, Secret: testSecret, Exec: o.exec})
	pool, schema, ex := e.Pool, e.Schema, e.Executor
	if o.schema != "" {
		schema = o.schema
	}
	scfg := sidecar.Config{
		DB: pool, Schema: schema, Executor: ex, Tools: e.Tools, Metrics: e.Metrics, Logger: e.Log,
		Credentials: []sidecar.Credential{{Tenant: "tenant-a", Token: tokenA}, {Tenant: "tenant-b", Token: tokenB}},
	}
	if o.side != nil {
		o.side(&scfg)
	}
	srv, err := sidecar.New(scfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &harness{t: t, eng: e, url: hs.URL, pool: pool, psp: e.PSP, m: e.Metrics, srv: srv, ex: ex, store: e.Intents, logs: e.Logs, log: e.Log}
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) exec(t *testing.T) sidecar.ExecuteResponse {
	t.Helper()
	var out sidecar.ExecuteResponse
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("HTTP %d, body %s: %v", r.status, r.body, err)
	}
	return out
}

func (r reply) problem(t *testing.T) sidecar.Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json (body %s)", ct, r.body)
	}
	var p sidecar.Problem
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func (h *harness) do(method, path, token, body string) reply {
	h.t.Helper()
	return doHTTP(h.t, method, h.url+path, token, body)
}

func doHTTP(t testing.TB, method, url, token, body string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

func (h *harness) execute(token, ref, fields string) reply {
	h.t.Helper()
	return h.do(http.MethodPost, "/v1/tools/pix.charge/execute", token,
		`{"intent_ref":`+quote(ref)+`,"fields":`+fields+`,"source_ref":"msg-1"}`)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// count returns the rows of a table in the harness's schema.
func (h *harness) count(table string) int {
	h.t.Helper()
	return h.eng.Count(h.t, table)
}

// A CPF (valid check digits) in the spellings models produce.
const (
	cpfDigits = "52998224725"
	cpfPunct  = "529.982.247-25"
)

func chargeFields(amount string, cpf string) string {
	return `{"customer_id":"cust-42","amount":` + amount + `,"pix_key":` + quote(cpf) + `,"pix_key_type":"cpf"}`
}
