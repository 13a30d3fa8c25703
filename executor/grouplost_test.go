package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/internal/pgembed"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/tools"
)

// A group whose connection is lost after its statements reached the
// server has an unknown outcome: PostgreSQL may still commit it (here it
// does), so its units must get the connection's error, never ErrAlone,
// which says nothing of the group happened and has each caller send its
// statements again alone. (pgx before v5.13.0 could mark a "conn closed"
// met while reading a response as safe to retry; grouper.send trusts
// that mark.)
func TestGroupLostMidResponseIsUncertain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `CREATE TABLE group_probe (k text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	through, proxy := throughProxy(t, e.pool, "")
	held, err := e.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	// 7312 holds the group at its first statement, on the server.
	if _, err := held.Exec(ctx, `SELECT pg_advisory_lock(7312)`); err != nil {
		t.Fatal(err)
	}
	wait := groupTogether(t, executor.NewGrouper(through, 16, 1), held.Conn(), 7311, nil, statements(
		`SELECT pg_advisory_xact_lock(7312)`,
		`INSERT INTO group_probe VALUES ('a')`,
		`INSERT INTO group_probe VALUES ('b')`), nil)
	pollTrue(t, held.Conn(), "the group waiting on the server", `SELECT count(*) = 1 FROM pg_locks
		WHERE locktype = 'advisory' AND objid = 7312 AND NOT granted`)
	// pgx sends a cancel request for a connection it finds broken, which
	// would stop the group's statement on the server: none gets through.
	proxy.refuse()
	proxy.cut()
	for i, err := range wait() {
		if err == nil || errors.Is(err, executor.ErrAlone) || pgconn.SafeToRetry(err) {
			t.Errorf("unit %d of a group cut mid-response: %v (safe to retry %v), want the connection's error",
				i+1, err, pgconn.SafeToRetry(err))
		}
	}
	// The server had the whole batch: once the lock is free it commits,
	// which the units could not know. (Had pgx's cancel request got
	// through, it would have rolled the group back: unknown either way.)
	if _, err := held.Exec(ctx, `SELECT pg_advisory_unlock(7312)`); err != nil {
		t.Fatal(err)
	}
	pollTrue(t, held.Conn(), "the cut group's commit", `SELECT count(*) = 2 FROM group_probe`)
}

// A backend terminated while its commit waits for a synchronous standby
// has committed locally: PostgreSQL logs a warning saying so and closes
// the session without another word to the client (it sends no error, lest
// the client take the commit for refused). The group's units must get the
// connection's error, never ErrAlone.
func TestGroupTerminatedInCommitIsUncertain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A standby that never comes: every synchronous commit waits.
	c, err := pgembed.StartWith(ctx, pgembed.Options{Settings: []string{"synchronous_standby_names=nobody"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	held, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close(ctx)
	if _, err := held.Exec(ctx, `SET synchronous_commit = local`); err != nil {
		t.Fatal(err)
	}
	if _, err := held.Exec(ctx, `CREATE TABLE group_probe (k text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, c.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	wait := groupTogether(t, executor.NewGrouper(pool, 16, 1), held, 7311, nil, statements(
		`INSERT INTO group_probe VALUES ('a')`,
		`INSERT INTO group_probe VALUES ('b')`), nil)
	pollTrue(t, held, "the group's commit waiting for the standby",
		`SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'SyncRep'`)
	if _, err := held.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`); err != nil {
		t.Fatal(err)
	}
	for i, err := range wait() {
		if err == nil || errors.Is(err, executor.ErrAlone) || pgconn.SafeToRetry(err) {
			t.Errorf("unit %d of a group terminated in its commit: %v (safe to retry %v), want the connection's error",
				i+1, err, pgconn.SafeToRetry(err))
		}
	}
	pollTrue(t, held, "the terminated group's rows", `SELECT count(*) = 2 FROM group_probe`)
}

// pollTrue waits until query, read on conn, returns true.
func pollTrue(t *testing.T, conn executor.DBTX, what, query string) {
	t.Helper()
	testutil.FinishWithin(t, 10*time.Second, what, func() {
		for {
			var ok bool
			if err := conn.QueryRow(context.Background(), query).Scan(&ok); err != nil || ok {
				if err != nil {
					t.Error(err)
				}
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// throughProxy opens a pool of one connection to pool's database through
// a cutProxy, its sessions named app.
func throughProxy(t *testing.T, pool *pgxpool.Pool, app string) (*pgxpool.Pool, *cutProxy) {
	t.Helper()
	proxy := newCutProxy(t, &pool.Config().ConnConfig.Config)
	cfg := pool.Config().Copy()
	cfg.MaxConns = 1
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = "127.0.0.1", proxy.port, nil
	if app != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = app
	}
	through, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(through.Close)
	return through, proxy
}

// cutProxy forwards TCP connections to a PostgreSQL server until cut,
// which closes every one of them at once, both sides.
type cutProxy struct {
	port     uint16
	refusing atomic.Bool
	mu       sync.Mutex
	conns    []net.Conn
}

func newCutProxy(t *testing.T, to *pgconn.Config) *cutProxy {
	t.Helper()
	network, addr := "tcp", net.JoinHostPort(to.Host, strconv.Itoa(int(to.Port)))
	if strings.HasPrefix(to.Host, "/") {
		network, addr = "unix", fmt.Sprintf("%s/.s.PGSQL.%d", to.Host, to.Port)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{port: uint16(ln.Addr().(*net.TCPAddr).Port)}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.refusing.Load() {
				c.Close()
				continue
			}
			s, err := net.Dial(network, addr)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() { _, _ = io.Copy(c, s); c.Close() }()
		}
	}()
	return p
}

// refuse closes every connection made from now on at once.
func (p *cutProxy) refuse() { p.refusing.Store(true) }

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// pausingTool charges, then, once armed, closes charged and waits for
// proceed before returning: the test takes a lock the completion will wait
// on in between.
type pausingTool struct {
	*tools.PixCharge
	armed            atomic.Bool
	charged, proceed chan struct{}
}

func (p *pausingTool) Execute(ctx context.Context, key string, pl derive.Payload) (json.RawMessage, error) {
	resp, err := p.PixCharge.Execute(ctx, key, pl)
	if p.armed.CompareAndSwap(true, false) {
		close(p.charged)
		<-p.proceed
	}
	return resp, err
}

// An executor whose connection to PostgreSQL is lost mid-flight. Lost
// while the claim waits on the server, which then commits it: the call
// ends in an error, and the intent is settled once, by the reconciler.
// Lost while the completion waits on the server: the executor writes it
// again on another connection, and the call ends completed, whether the
// server committed the first write or pgx's cancel request for the lost
// backend stopped it ("written again"), or the server never got it ("dead
// connection", cut while the tool ran); only when that fails too
// ("refused") does the call end in an error, the first write committing
// on the server, read by the redelivery. One charge in every case.
func TestConnectionLostInFlight(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                string
		claim, hold, refuse bool
		wantCompleted       bool
	}{
		{name: "claim", claim: true, hold: true, refuse: true},
		{name: "completion written again", hold: true, wantCompleted: true},
		{name: "completion on a dead connection", wantCompleted: true},
		{name: "completion refused", hold: true, refuse: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, &envOpts{cfg: func(cfg *executor.Config) {
				// The claim's lease is waited out; nothing of the
				// completion's may run out while the test holds its row.
				cfg.Lease, cfg.Timeout, cfg.LeaseMargin = 3*time.Second, 500*time.Millisecond, 200*time.Millisecond
				if !c.claim {
					cfg.Lease, cfg.Timeout = 30*time.Second, 20*time.Second
				}
			}})
			ctx := context.Background()
			app := fmt.Sprintf("lost-%d", time.Now().UnixNano())
			through, proxy := throughProxy(t, e.pool, app)
			pix, _ := e.reg.Tool(tools.PixChargeName)
			pt := &pausingTool{PixCharge: pix.(*tools.PixCharge), charged: make(chan struct{}), proceed: make(chan struct{})}
			reg, err := tools.NewRegistry(pt)
			if err != nil {
				t.Fatal(err)
			}
			logs := &testutil.LockedBuffer{}
			cutOff := e.another(t, "cut-off", func(cfg *executor.Config) {
				cfg.DB, cfg.Tools, cfg.Logger = through, reg, slog.New(slog.NewTextHandler(logs, nil))
			})
			call := pixCall("t1", "inv-lost", extraction(0, testutil.CPF(9)))
			key := keyOf(t, e, "t1", call.Ref, call.Fields)
			// A first call prepares the statements on the one connection.
			if o, err := cutOff.Execute(ctx, pixCall("t1", "inv-warm", extraction(0, testutil.CPF(10))), nil); err != nil || o.Status != executor.StatusCompleted {
				t.Fatalf("the first call: %+v %v", o, err)
			}
			pt.armed.Store(!c.claim)

			held, err := e.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Rollback(ctx)
			if c.claim {
				// The claim's INSERT of the intent waits for this
				// uncommitted one to be rolled back (a lock on the table
				// instead could hold the claim's statement before it is
				// sent whole, if it were prepared again).
				if _, err := held.Exec(ctx, `INSERT INTO intents (tenant_id, intent_ref, action, rules_version, payload, idem_key)
					VALUES ('t1', $1, $2, 1, '{}', $3)`, call.Ref, call.Action, key); err != nil {
					t.Fatal(err)
				}
			}
			var out *executor.Outcome
			var execErr error
			done := make(chan struct{})
			go func() { defer close(done); out, execErr = cutOff.Execute(ctx, call, nil) }()
			cut := func() {
				if c.refuse {
					// Before the cut: nothing opened from now on gets
					// through, pgx's cancel request for the lost backend
					// (sent as it closes a failed connection) included.
					proxy.refuse()
				}
				proxy.cut()
			}
			switch {
			case !c.claim && c.hold:
				<-pt.charged
				// The completion's UPDATE waits for this row lock.
				if _, err := held.Exec(ctx, `SELECT 1 FROM actions WHERE tenant_id = 't1' AND idem_key = $1 FOR UPDATE`, key); err != nil {
					t.Fatal(err)
				}
				close(pt.proceed)
			case !c.claim:
				<-pt.charged
				cut() // the pool's one connection, idle while the tool runs
				close(pt.proceed)
			}
			if c.hold {
				pollTrue(t, e.pool, "the call waiting on the server", `SELECT count(*) > 0 FROM pg_locks l
					JOIN pg_stat_activity a USING (pid) WHERE NOT l.granted AND a.application_name = '`+app+`'`)
				cut()
			}
			if !c.refuse {
				// The write sent again waits behind the first one.
				if err := held.Rollback(ctx); err != nil {
					t.Fatal(err)
				}
			}
			testutil.FinishWithin(t, 30*time.Second, "the cut-off call", func() { <-done })
			if out != nil {
				t.Logf("the cut-off call: %s, %v", out.Status, execErr)
			} else {
				t.Logf("the cut-off call: %v", execErr)
			}
			if c.wantCompleted {
				if execErr != nil || out.Status != executor.StatusCompleted || out.Replayed || out.Attempt != 1 {
					t.Fatalf("the cut-off call: %+v, %v: want completed by this call", out, execErr)
				}
				chargeID(t, out.Response)
				if !strings.Contains(logs.String(), `msg="executor: completion's connection lost, writing it again"`) {
					t.Fatal("completed without writing the completion again: the connection was not lost where the test meant")
				}
			} else if execErr == nil && out.Status == executor.StatusCompleted {
				t.Fatalf("a call whose %s was cut off and could not be written again reported completed", c.name)
			}
			if err := held.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
				t.Fatal(err)
			}
			// The server commits what it had: the claim or the completion.
			want := executor.RowCompleted
			if c.claim {
				want = executor.RowStarted
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
				a, err := executor.Get(ctx, e.pool, "t1", key)
				if err == nil && a.Status == want {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the server did not commit the %s: %+v, %v", c.name, a, err)
				}
			}
			if c.claim {
				// A redelivery while the lease is live: in flight, no call.
				o, err := e.ex.Execute(ctx, call, nil)
				if err != nil || o.Status != executor.StatusInFlight {
					t.Fatalf("a redelivery during the lost claim's lease: %+v %v", o, err)
				}
				waitExpired(t, e.pool, "t1", key)
				if res, err := e.ex.ReconcileOnce(ctx); err != nil || res.Completed != 1 {
					t.Fatalf("reconcile: %+v %v", res, err)
				}
			}
			o, err := e.ex.Execute(ctx, call, nil)
			if err != nil || o.Status != executor.StatusCompleted || !o.Replayed {
				t.Fatalf("the redelivery after: %+v %v", o, err)
			}
			if c.wantCompleted && !sameJSON(t, o.Response, out.Response) {
				t.Fatalf("the redelivery's response %s, the call's %s", o.Response, out.Response)
			}
			if n, k := e.psp.Count(""), e.psp.CountKey(key); n != 2 || k != 1 {
				t.Fatalf("%d charges, %d under the intent's key: want the first call's and one", n, k)
			}
		})
	}
}

// sameJSON reports whether a and b hold the same JSON value (jsonb does not
// keep a document's spacing or member order).
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}
