package edgetest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/server/metrics"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

// PSPToken is the bearer token the fake PSP wants.
const PSPToken = "psp-token"

// Engine is one edge's tools, intents and executor on a schema of its own.
type Engine struct {
	Pool     *pgxpool.Pool
	Schema   string
	PSP      *toolstest.Provider
	Tools    *tools.Registry
	Intents  *intent.Store
	Metrics  *metrics.Metrics // the executor's Observer
	Executor *executor.Executor
	Logs     *testutil.LockedBuffer // what Log wrote, from debug up
	Log      *slog.Logger
}

// Opts configures New.
type Opts struct {
	MaxConns int32  // default 4
	Secret   string // the HMAC key; required
	// Lease and Timeout of the executor; defaults 4s and 1s.
	Lease, Timeout time.Duration
	// Exec adjusts the executor's Config last.
	Exec func(*executor.Config)
}

// New builds an Engine; everything is closed when the test ends.
func New(t testing.TB, o Opts) *Engine {
	t.Helper()
	if o.MaxConns == 0 {
		o.MaxConns = 4
	}
	pool, schema := pgtest.Schema(t, &pgtest.Opts{MaxConns: o.MaxConns})
	psp := toolstest.NewProvider()
	psp.Token = PSPToken
	t.Cleanup(psp.Close)
	pix, err := tools.NewPixCharge(tools.HTTPConfig{BaseURL: psp.URL, Token: PSPToken})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(pix)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testutil.LockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d, err := reg.Deriver([]byte(o.Secret))
	if err != nil {
		t.Fatal(err)
	}
	store, err := intent.New(intent.Config{Deriver: d, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	cfg := executor.Config{
		DB: pool, Intents: store, Tools: reg, Observer: m, Logger: log,
		Lease: orDefault(o.Lease, 4*time.Second), Timeout: orDefault(o.Timeout, time.Second), LeaseMargin: 500 * time.Millisecond,
		BackoffBase: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
	}
	if o.Exec != nil {
		o.Exec(&cfg)
	}
	ex, err := executor.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &Engine{Pool: pool, Schema: schema, PSP: psp, Tools: reg, Intents: store, Metrics: m, Executor: ex, Logs: logs, Log: log}
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Count returns the rows of a table in the engine's schema.
func (e *Engine) Count(t testing.TB, table string) int {
	t.Helper()
	var n int
	if err := e.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
