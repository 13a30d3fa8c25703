package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/server/internal/edgetest"
	"github.com/retrysafe/retrysafe/server/mcpserver"
	"github.com/retrysafe/retrysafe/server/metrics"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	testSecret = "mcp-test-secret-0123456789abcdef-xyz"
	tokenA     = "token-a-0123456789"
	tokenB     = "token-b-0123456789"
	pspToken   = edgetest.PSPToken
	chargePath = "/v1/pix/charges"
	cpfDigits  = "52998224725"
	cpfPunct   = "529.982.247-25"
)

// harness is one MCP server on its own schema, in front of a fake PSP.
type harness struct {
	eng  *edgetest.Engine
	t    *testing.T
	pool *pgxpool.Pool
	psp  *toolstest.Provider
	m    *metrics.Metrics
	srv  *mcpserver.Server
	logs *testutil.LockedBuffer
}

type harnessOpts struct {
	maxConns int32
	exec     func(*executor.Config)
	cfg      func(*mcpserver.Config)
}

func newHarness(t *testing.T, o *harnessOpts) *harness {
	t.Helper()
	if o == nil {
		o = &harnessOpts{}
	}
	e := edgetest.New(t, edgetest.Opts{MaxConns: o.maxConns, Secret: testSecret, Lease: 8 * time.Second, Timeout: 5 * time.Second, Exec: o.exec})
	cfg := mcpserver.Config{Executor: e.Executor, Tools: e.Tools, Metrics: e.Metrics, Logger: e.Log, ProgressInterval: 100 * time.Millisecond}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	srv, err := mcpserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, eng: e, pool: e.Pool, psp: e.PSP, m: e.Metrics, srv: srv, logs: e.Logs}
}

// connect returns an SDK client session in process, for tenant.
func (h *harness) connect(tenant string, opts *mcp.ClientOptions) *mcp.ClientSession {
	h.t.Helper()
	ctx := context.Background()
	srv, err := h.srv.ForTenant(tenant)
	if err != nil {
		h.t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cs.Close() })
	return cs
}

// httpServer serves the streamable HTTP endpoint for tenants a and b.
func (h *harness) httpServer() *httptest.Server {
	h.t.Helper()
	hh, err := h.srv.HTTPHandler([]mcpserver.Credential{{Tenant: "tenant-a", Token: tokenA}, {Tenant: "tenant-b", Token: tokenB}})
	if err != nil {
		h.t.Fatal(err)
	}
	hs := httptest.NewServer(hh)
	h.t.Cleanup(hs.Close)
	return hs
}

func (h *harness) count(table string) int {
	h.t.Helper()
	return h.eng.Count(h.t, table)
}

func charge(amount any, cpf string) map[string]any {
	return map[string]any{"customer_id": "cust-42", "amount": amount, "pix_key": cpf, "pix_key_type": "cpf"}
}

func callParams(ref string, args map[string]any) *mcp.CallToolParams {
	return mcpserver.CallParams(tools.PixChargeName, ref, args)
}

// call runs tools/call and decodes the structured result. It reports
// failures with Errorf (callers run it on goroutines of their own) and then
// returns a zero Result, which fails every check of the caller.
func call(t testing.TB, cs *mcp.ClientSession, p *mcp.CallToolParams) (*mcp.CallToolResult, mcpserver.Result) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Errorf("tools/call: %v", err)
		return &mcp.CallToolResult{}, mcpserver.Result{}
	}
	return res, decode(t, res)
}

func decode(t testing.TB, res *mcp.CallToolResult) mcpserver.Result {
	t.Helper()
	var r mcpserver.Result
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil || len(res.Content) != 1 {
		t.Errorf("structured content %s (%v), %d content items", b, err, len(res.Content))
		return mcpserver.Result{}
	}
	return r
}
