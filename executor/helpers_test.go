package executor_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var secret = []byte("0123456789abcdef0123456789abcdef")

var quiet = slog.New(slog.DiscardHandler)

type env struct {
	pool  *pgxpool.Pool
	psp   *toolstest.Provider
	reg   *tools.Registry
	store *intent.Store
	ex    *executor.Executor
	cfg   executor.Config
}

type envOpts struct {
	poolSize int32
	cfg      func(*executor.Config)
	extra    []tools.Tool
}

func newEnv(t testing.TB, o *envOpts) *env {
	t.Helper()
	if o == nil {
		o = &envOpts{}
	}
	if o.poolSize == 0 {
		o.poolSize = 4
	}
	pool, _ := pgtest.Schema(t, &pgtest.Opts{MaxConns: o.poolSize})
	psp := toolstest.NewProvider()
	t.Cleanup(psp.Close)
	// Fresh connections: net/http silently retries a request carrying an
	// Idempotency-Key on a reused connection, which would hide faults.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	pix, err := tools.NewPixCharge(tools.HTTPConfig{BaseURL: psp.URL, Client: client})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(append([]tools.Tool{pix}, o.extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	d, err := reg.Deriver(secret)
	if err != nil {
		t.Fatal(err)
	}
	store, err := intent.New(intent.Config{Deriver: d, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	cfg := executor.Config{
		DB: pool, Intents: store, Tools: reg, Owner: "worker-a",
		// A lease far beyond the call: under -race on a loaded machine, 200
		// callers queueing for 4 connections can delay a completion by
		// seconds, and a lost lease would be legitimate. Tests of expiry
		// set short leases.
		Lease: 10 * time.Second, Timeout: 500 * time.Millisecond, LeaseMargin: 2 * time.Second,
		MaxAttempts: 5, BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		Logger: quiet,
	}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	ex, err := executor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{pool: pool, psp: psp, reg: reg, store: store, ex: ex, cfg: cfg}
}

// another returns a second executor (another worker) on the same database.
func (e *env) another(t testing.TB, owner string, mod func(*executor.Config)) *executor.Executor {
	t.Helper()
	cfg := e.cfg
	cfg.Owner = owner
	if mod != nil {
		mod(&cfg)
	}
	ex, err := executor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// extraction i of one intent: differently formatted, equivalent fields.
func extraction(i int, c string) map[string]any {
	amounts := []any{"180,00", "180.00", 180, json.Number("180"), json.Number("180.00"), "R$ 180,00"}
	keys := []string{c, testutil.PunctuatedCPF(c)}
	f := map[string]any{"customer_id": "cust-1", "amount": amounts[i%len(amounts)], "pix_key": keys[i%len(keys)]}
	if i%3 == 0 {
		f["pix_key_type"] = "cpf"
	}
	return f
}

func pixCall(tenant, ref string, fields map[string]any) executor.Call {
	return executor.Call{Tenant: tenant, Ref: ref, Action: tools.PixChargeName, Fields: fields, SourceRef: "wamid.1"}
}

func chargeID(t testing.TB, resp json.RawMessage) string {
	t.Helper()
	var ch struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(resp, &ch); err != nil || ch.ID == "" {
		t.Fatalf("response %s is not a charge: %v", resp, err)
	}
	return ch.ID
}

// refFault injects f into the requests of intent_ref ref (the pix tool
// puts it in the description) for which pick(n) is true.
func refFault(ref string, f toolstest.Fault, pick func(n int) bool) toolstest.FaultFunc {
	return func(r toolstest.Request) toolstest.Fault {
		if d, _ := r.Body["description"].(string); strings.HasSuffix(d, " "+ref) && pick(r.N) {
			return f
		}
		return toolstest.None
	}
}

func countStatus(t testing.TB, db executor.DBTX, status string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM actions WHERE status = $1`, status).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitExpired waits until the action's lease has expired by the database
// clock.
func waitExpired(t testing.TB, db executor.DBTX, tenant, key string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		a, err := executor.Get(context.Background(), db, tenant, key)
		if err != nil {
			t.Fatal(err)
		}
		if a.Status != executor.RowStarted || a.Expired {
			return
		}
		time.Sleep(a.LeaseLeft/2 + 5*time.Millisecond)
	}
	t.Fatal("lease did not expire")
}

// keyOf derives the key an intent will get (for test set-up only).
func keyOf(t testing.TB, e *env, tenant, ref string, fields map[string]any) string {
	t.Helper()
	x, err := e.store.Extract(intent.FreezeParams{Tenant: tenant, Ref: ref, Action: tools.PixChargeName, Fields: fields})
	if err != nil || x.Err != nil {
		t.Fatal(err, x.Err)
	}
	return x.Result.Key
}

// countingTool wraps a func tool and counts its executions.
type counted struct {
	tools.Func
	calls atomic.Int64
}

func (c *counted) Execute(ctx context.Context, key string, p derive.Payload) (json.RawMessage, error) {
	c.calls.Add(1)
	return c.Func.Execute(ctx, key, p)
}

func simpleSchema(name string) derive.Schema {
	return derive.Schema{Action: name, Version: 2, Fields: []derive.Field{
		{Name: "to", Rule: derive.RuleText},
		{Name: tools.RefField, Rule: derive.RuleRef},
	}}
}

func extractParams(tenant, ref string, fields map[string]any) intent.FreezeParams {
	return intent.FreezeParams{Tenant: tenant, Ref: ref, Action: tools.PixChargeName, Fields: fields}
}
