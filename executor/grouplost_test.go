package executor_test

import (
	"context"
	"encoding/binary"
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
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/lostconn"
	"github.com/retrysafe/retrysafe/internal/pgembed"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/toolstest"
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
	testutil.PollTrue(t, held.Conn(), "the group waiting on the server", `SELECT count(*) = 1 FROM pg_locks
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
	testutil.PollTrue(t, held.Conn(), "the cut group's commit", `SELECT count(*) = 2 FROM group_probe`)
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
	testutil.PollTrue(t, held, "the group's commit waiting for the standby",
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
	testutil.PollTrue(t, held, "the terminated group's rows", `SELECT count(*) = 2 FROM group_probe`)
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
	refused  atomic.Int64 // connections refused (see refuse)
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
				// Closed at once, or answered as a server starting up
				// answers, by turns.
				if p.refused.Add(1)%2 == 0 {
					go answerStartingUp(c)
				} else {
					c.Close()
				}
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

// answerStartingUp answers a connection as PostgreSQL does while it starts
// up or recovers from a crash: an SSL or GSS encryption request with 'N',
// then the startup message with FATAL 57P03 ("the database system is
// starting up"), and closes it.
func answerStartingUp(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	for {
		var head [8]byte
		if _, err := io.ReadFull(c, head[:]); err != nil {
			return
		}
		n, code := binary.BigEndian.Uint32(head[:4]), binary.BigEndian.Uint32(head[4:])
		if n == 8 && (code == 80877103 || code == 80877104) {
			if _, err := c.Write([]byte{'N'}); err != nil {
				return
			}
			continue
		}
		if _, err := io.CopyN(io.Discard, c, int64(n)-8); err != nil {
			return
		}
		break
	}
	msg, err := (&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P03",
		Message: "the database system is starting up"}).Encode(nil)
	if err == nil {
		_, _ = c.Write(msg)
	}
}

// refuse refuses every connection made from now on: closed at once, or
// answered as by a server starting up (answerStartingUp), by turns.
func (p *cutProxy) refuse() { p.refusing.Store(true) }

// cutWhileWaiting waits until a statement of app's sessions (what) waits
// on a lock held's transaction holds, cuts every connection of proxy, lets
// held's locks go, and waits for done (the cut-off call's end).
func cutWhileWaiting(t *testing.T, db executor.DBTX, proxy *cutProxy, held pgx.Tx, app, what string, done <-chan struct{}) {
	t.Helper()
	testutil.PollTrue(t, db, what+" waiting on the server", `SELECT count(*) > 0 FROM pg_locks l
		JOIN pg_stat_activity a USING (pid) WHERE NOT l.granted AND a.application_name = '`+app+`'`)
	proxy.cut()
	if err := held.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.FinishWithin(t, 30*time.Second, "the cut-off call", func() { <-done })
}

// accept lets new connections through again.
func (p *cutProxy) accept() { p.refusing.Store(false) }

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

// pausing returns another worker (owner) on db whose pix.charge is a
// pausingTool, logging to logs; mod changes its Config further.
func (e *env) pausing(t *testing.T, owner string, db executor.DBTX, mod func(*executor.Config)) (*executor.Executor, *pausingTool, *testutil.LockedBuffer) {
	t.Helper()
	pix, _ := e.reg.Tool(tools.PixChargeName)
	pt := &pausingTool{PixCharge: pix.(*tools.PixCharge), charged: make(chan struct{}), proceed: make(chan struct{})}
	reg, err := tools.NewRegistry(pt)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testutil.LockedBuffer{}
	ex := e.another(t, owner, func(cfg *executor.Config) {
		cfg.DB, cfg.Tools, cfg.Logger = db, reg, slog.New(slog.NewTextHandler(logs, nil))
		if mod != nil {
			mod(cfg)
		}
	})
	return ex, pt, logs
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
// while the claim waits on the server, the call sends the freeze and claim
// again on another connection: when the server committed the lost claim
// ("claim adopted"), the row is under the call's own lease owner and the
// call acts under it; when it did not ("claim rolled back", its backend
// terminated), the claim sent again claims; when another worker took the
// action over meanwhile ("claim taken over"), the call reports it in
// flight and calls nothing; when no connection can be had ("claim"), the
// call tries again for LostWriteRetry, then ends in an error, and the intent
// is settled once, by the reconciler; when connections come back after
// being refused ("claim refused, then let through"), the call adopts its
// lost claim. Lost while the completion waits on the server: the executor writes it
// again on another connection, and the call ends completed, whether the
// server committed the first write or pgx's cancel request for the lost
// backend stopped it ("written again"), or the server never got it ("dead
// connection", cut while the tool ran); only when that fails too
// ("refused", for LostWriteRetry) does the call end in an error, the first
// write committing on the server, read by the redelivery; refused a few
// times, then let through, it completes. One charge in every case.
func TestConnectionLostInFlight(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                string
		claim, hold, refuse bool
		wantCompleted       bool
		// The connections the call opens after the cut are refused
		// until it has tried several times, then let through: a
		// PostgreSQL that restarts.
		restart bool
		// A lost claim's second try waits at FailClaimLost while the
		// lost one commits (or its backend is terminated, or the action
		// is taken over once it has), then connects again.
		secondTry, terminate, takenOver bool
		byKey                           bool // ExecuteKey's claim of an intent frozen before
		takeover                        bool // the takeover of another worker's expired lease
	}{
		{name: "claim", claim: true, hold: true, refuse: true},
		{name: "claim adopted", claim: true, hold: true, refuse: true, secondTry: true, wantCompleted: true},
		{name: "claim rolled back", claim: true, hold: true, refuse: true, secondTry: true, terminate: true, wantCompleted: true},
		{name: "claim taken over", claim: true, hold: true, refuse: true, secondTry: true, takenOver: true},
		{name: "claim by key adopted", claim: true, hold: true, refuse: true, secondTry: true, byKey: true, wantCompleted: true},
		{name: "takeover adopted", claim: true, hold: true, refuse: true, secondTry: true, takeover: true, wantCompleted: true},
		{name: "completion written again", hold: true, wantCompleted: true},
		{name: "completion on a dead connection", wantCompleted: true},
		{name: "completion refused", hold: true, refuse: true},
		{name: "completion refused, then let through", hold: true, refuse: true, restart: true, wantCompleted: true},
		{name: "claim refused, then let through", claim: true, hold: true, refuse: true, restart: true, wantCompleted: true},
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
			lostAt, secondTry := make(chan struct{}), make(chan struct{})
			rec := &recorder{}
			// Refused for good, the call sends its lost write again for
			// LostWriteRetry, then gives up.
			neverThrough := c.refuse && !c.restart && !c.secondTry
			const window = 2 * time.Second
			cutOff, pt, logs := e.pausing(t, "cut-off", through, func(cfg *executor.Config) {
				cfg.Observer = rec
				if neverThrough {
					cfg.LostWriteRetry = window
				}
				if c.secondTry {
					cfg.Failpoints = executor.FailpointFunc(func(name string) {
						if name == executor.FailClaimLost {
							close(lostAt)
							<-secondTry
						}
					})
				}
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
			switch {
			case c.takeover:
				if _, err := e.store.Freeze(ctx, e.pool, intent.FreezeParams{Tenant: "t1", Ref: call.Ref, Action: call.Action, Fields: call.Fields}); err != nil {
					t.Fatal(err)
				}
				// Another worker's lease, run out: the call takes it
				// over, its UPDATE waiting for this row lock.
				if _, err := e.pool.Exec(ctx, `INSERT INTO actions (tenant_id, idem_key, intent_ref, action, status, attempt, lease_owner, lease_until)
					VALUES ('t1', $1, $2, $3, 'started', 1, 'another', now() - interval '1 second')`, key, call.Ref, call.Action); err != nil {
					t.Fatal(err)
				}
				if _, err := held.Exec(ctx, `SELECT 1 FROM actions WHERE tenant_id = 't1' AND idem_key = $1 FOR UPDATE`, key); err != nil {
					t.Fatal(err)
				}
			case c.byKey:
				if _, err := e.store.Freeze(ctx, e.pool, intent.FreezeParams{Tenant: "t1", Ref: call.Ref, Action: call.Action, Fields: call.Fields}); err != nil {
					t.Fatal(err)
				}
				// The claim's INSERT of the action waits for this
				// uncommitted one to be rolled back.
				if _, err := held.Exec(ctx, `INSERT INTO actions (tenant_id, idem_key, intent_ref, action, status, attempt, response, finished_at)
					VALUES ('t1', $1, $2, $3, 'completed', 1, '{}', now())`, key, call.Ref, call.Action); err != nil {
					t.Fatal(err)
				}
			case c.claim:
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
			go func() {
				defer close(done)
				if c.byKey {
					out, execErr = cutOff.ExecuteKey(ctx, "t1", key, nil)
					return
				}
				out, execErr = cutOff.Execute(ctx, call, nil)
			}()
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
				testutil.PollTrue(t, e.pool, "the call waiting on the server", `SELECT count(*) > 0 FROM pg_locks l
					JOIN pg_stat_activity a USING (pid) WHERE NOT l.granted AND a.application_name = '`+app+`'`)
				cut()
			}
			if c.restart {
				// Six refused, three of them answered as by a server
				// starting up: pgx's cancel request for the lost backend
				// may be one of them.
				testutil.FinishWithin(t, 10*time.Second, "tries refused", func() {
					for proxy.refused.Load() < 6 {
						time.Sleep(time.Millisecond)
					}
				})
				// The lost write goes on and commits.
				if err := held.Rollback(ctx); err != nil {
					t.Fatal(err)
				}
				testutil.PollTrue(t, e.pool, "the lost write committed", `SELECT count(*) = 1 FROM actions
					WHERE tenant_id = 't1' AND idem_key = '`+key+`' AND status = '`+map[bool]string{true: "started", false: "completed"}[c.claim]+`'`)
				proxy.accept()
			}
			if c.secondTry {
				testutil.FinishWithin(t, 10*time.Second, "the claim's loss", func() { <-lostAt })
				if c.terminate {
					if _, err := e.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app); err != nil {
						t.Fatal(err)
					}
					testutil.PollTrue(t, e.pool, "the lost claim's backend gone",
						`SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = '`+app+`'`)
				}
				if err := held.Rollback(ctx); err != nil {
					t.Fatal(err)
				}
				if !c.terminate {
					testutil.PollTrue(t, e.pool, "the lost claim committed", `SELECT count(*) = 1 FROM actions
						WHERE tenant_id = 't1' AND idem_key = '`+key+`' AND status = 'started' AND lease_owner LIKE 'cut-off/%'`)
				}
				if c.takenOver {
					// What a worker that found the lease run out does.
					if _, err := e.pool.Exec(ctx, `UPDATE actions SET attempt = attempt + 1, lease_owner = 'another',
						lease_until = now() + interval '1 minute' WHERE tenant_id = 't1' AND idem_key = $1`, key); err != nil {
						t.Fatal(err)
					}
				}
				proxy.accept()
				close(secondTry)
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
			// The Observer heard the one lost write, and how sending it
			// again ended: through unless every try was refused.
			write, attempt := executor.WriteCompletion, 1
			switch {
			case c.takeover:
				write, attempt = executor.WriteTakeover, 0
			case c.claim:
				write, attempt = executor.WriteClaim, 0
			}
			gotThrough := !c.refuse || c.restart || c.secondTry
			if ws := rec.lostWrites(); len(ws) != 1 || ws[0].Write != write || ws[0].Tenant != "t1" || ws[0].Action != call.Action ||
				ws[0].Attempt != attempt || ws[0].Lost == nil || (ws[0].Err == nil) != gotThrough || ws[0].Sends < 1 ||
				(c.restart && ws[0].Sends < 6) || ws[0].Elapsed <= 0 {
				t.Fatalf("lost writes observed: %+v; want one %s at attempt %d, through %v", ws, write, attempt, gotThrough)
			} else if neverThrough && (ws[0].Elapsed < window-lostconn.PauseMax || ws[0].Elapsed > window+3*time.Second) {
				// It stops when the next pause (at most PauseMax) would
				// end past the window.
				t.Fatalf("sent again for %v, want about LostWriteRetry (%v)", ws[0].Elapsed, window)
			}
			if c.wantCompleted {
				wantAttempt := 1
				if c.takeover {
					wantAttempt = 2
				}
				if execErr != nil || out.Status != executor.StatusCompleted || out.Replayed || out.Attempt != wantAttempt {
					t.Fatalf("the cut-off call: %+v, %v: want completed by this call", out, execErr)
				}
				chargeID(t, out.Response)
				lostMsg := `msg="executor: completion's connection lost, writing it again"`
				if c.claim {
					lostMsg = `msg="executor: claim's connection lost, sending it again"`
					if c.takeover {
						lostMsg = `msg="executor: takeover's connection lost, sending it again"`
					}
					if !out.Created && !c.byKey && !c.takeover {
						t.Fatalf("the cut-off call: %+v: want the intent created by this call", out)
					}
				}
				if !strings.Contains(logs.String(), lostMsg) {
					t.Fatal("completed without the loss: the connection was not lost where the test meant")
				}
				if adopted := strings.Contains(logs.String(), `msg="executor: the lost claim had committed; acting under it"`); adopted != (c.claim && !c.terminate) {
					t.Fatalf("the lost claim adopted: %v, want %v", adopted, !c.terminate)
				}
			} else if execErr == nil && out.Status == executor.StatusCompleted {
				t.Fatalf("a call whose %s was cut off and could not be written again reported completed", c.name)
			}
			if err := held.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
				t.Fatal(err)
			}
			if c.takenOver {
				// The row under another worker's lease: nothing of the
				// cut-off call's went to the provider.
				if execErr != nil || out.Status != executor.StatusInFlight || out.Attempt != 2 {
					t.Fatalf("the cut-off call: %+v, %v: want in flight at the taker's attempt", out, execErr)
				}
				if n := e.psp.CountKey(key); n != 0 {
					t.Fatalf("%d charges under the intent's key: want none", n)
				}
				return
			}
			if c.wantCompleted {
				// Settled by the call itself: the redelivery below replays.
				c.claim = false
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

// A release (a transient failure's lease cut to its backoff) whose
// connection is lost while it waits on the server is sent again on
// another connection: the call reports the failure in flight with its
// retry delay instead of an error, and the lease ends at the backoff, not
// at its full length, whether the server committed the first write or
// pgx's cancel request stopped it. The redelivery after the backoff takes
// over and charges once.
func TestReleaseConnectionLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	app := fmt.Sprintf("lost-release-%d", time.Now().UnixNano())
	through, proxy := throughProxy(t, e.pool, app)
	logs, rec := &testutil.LockedBuffer{}, &recorder{}
	claimed, proceed := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	cutOff := e.another(t, "cut-off", func(cfg *executor.Config) {
		cfg.DB, cfg.Logger, cfg.Observer = through, slog.New(slog.NewTextHandler(logs, nil)), rec
		cfg.BackoffBase, cfg.BackoffMax = 300*time.Millisecond, 300*time.Millisecond
		cfg.Failpoints = executor.FailpointFunc(func(name string) {
			if name == executor.FailActionClaimed && armed.CompareAndSwap(true, false) {
				close(claimed)
				<-proceed
			}
		})
	})
	// A first call prepares the statements on the one connection, the
	// release's included (its first try fails before the provider acts).
	e.psp.SetFault(refFault("inv-warm", toolstest.FailBefore, func(n int) bool { return n == 1 }))
	warm := pixCall("t1", "inv-warm", extraction(0, testutil.CPF(20)))
	if o, err := cutOff.Execute(ctx, warm, &executor.Opts{NoWait: true}); err != nil || o.Status != executor.StatusInFlight {
		t.Fatalf("the first call: %+v %v", o, err)
	}
	call := pixCall("t1", "inv-release", extraction(0, testutil.CPF(21)))
	key := keyOf(t, e, "t1", call.Ref, call.Fields)
	e.psp.SetFault(refFault(call.Ref, toolstest.FailBefore, func(n int) bool { return n == 1 }))
	armed.Store(true)
	var out *executor.Outcome
	var execErr error
	done := make(chan struct{})
	go func() { defer close(done); out, execErr = cutOff.Execute(ctx, call, &executor.Opts{NoWait: true}) }()
	<-claimed
	held, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(ctx)
	// The release's UPDATE waits for this row lock.
	if _, err := held.Exec(ctx, `SELECT 1 FROM actions WHERE tenant_id = 't1' AND idem_key = $1 FOR UPDATE`, key); err != nil {
		t.Fatal(err)
	}
	close(proceed)
	cutWhileWaiting(t, e.pool, proxy, held, app, "the release", done)
	if execErr != nil || out.Status != executor.StatusInFlight || out.Failure == nil || out.RetryAfter <= 0 {
		t.Fatalf("the cut-off call: %+v, %v: want in flight with its retry delay", out, execErr)
	}
	if !strings.Contains(logs.String(), `msg="executor: release's connection lost, releasing again"`) {
		t.Fatal("released without the loss: the connection was not lost where the test meant")
	}
	if ws := rec.lostWrites(); len(ws) != 1 || ws[0].Write != executor.WriteRelease || ws[0].Attempt != 1 || ws[0].Err != nil || ws[0].Sends != 1 {
		t.Fatalf("lost writes observed: %+v; want the release at attempt 1, through at its first send again", ws)
	}
	a, err := executor.Get(ctx, e.pool, "t1", key)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != executor.RowStarted || a.Attempt != 1 || a.Failure == nil || a.LeaseLeft > time.Second {
		t.Fatalf("the released row: %+v: want started at attempt 1 with the failure, its lease cut to the backoff", a)
	}
	waitExpired(t, e.pool, "t1", key)
	o, err := e.ex.Execute(ctx, call, nil)
	if err != nil || o.Status != executor.StatusCompleted || o.Attempt != 2 {
		t.Fatalf("the redelivery after the backoff: %+v %v", o, err)
	}
	if n := e.psp.CountKey(key); n != 1 {
		t.Fatalf("%d charges under the intent's key: want one", n)
	}
}

// A read-first lookup (the path of redeliveries once they are what
// arrives) whose connection is lost changed nothing: the call goes on to
// the freeze and claim, on another connection, and replays the settled
// outcome instead of ending in an error.
func TestLookupConnectionLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	app := fmt.Sprintf("lost-lookup-%d", time.Now().UnixNano())
	through, proxy := throughProxy(t, e.pool, app)
	cutOff := e.another(t, "cut-off", func(cfg *executor.Config) { cfg.DB = through })
	call := pixCall("t1", "inv-lookup", extraction(0, testutil.CPF(22)))
	key := keyOf(t, e, "t1", call.Ref, call.Fields)
	first, err := cutOff.Execute(ctx, call, nil)
	if err != nil || first.Status != executor.StatusCompleted {
		t.Fatalf("the first call: %+v %v", first, err)
	}
	// Redeliveries until the executor reads first, and one more, which
	// prepares the lookup on the one connection.
	for i := 0; i == 0 || !cutOff.ClaimsReadOnly(); i++ {
		if i == 100 {
			t.Fatal("100 redeliveries and the executor does not read first")
		}
		if o, err := cutOff.Execute(ctx, call, nil); err != nil || !o.Replayed {
			t.Fatalf("redelivery %d: %+v %v", i, o, err)
		}
	}
	if o, err := cutOff.Execute(ctx, call, nil); err != nil || !o.Replayed {
		t.Fatalf("the redelivery that reads first: %+v %v", o, err)
	}
	held, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(ctx)
	// The lookup's SELECT waits for this lock.
	if _, err := held.Exec(ctx, `LOCK TABLE intents IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	var out *executor.Outcome
	var execErr error
	done := make(chan struct{})
	go func() { defer close(done); out, execErr = cutOff.Execute(ctx, call, nil) }()
	cutWhileWaiting(t, e.pool, proxy, held, app, "the lookup", done)
	if execErr != nil || out.Status != executor.StatusCompleted || !out.Replayed || !sameJSON(t, out.Response, first.Response) {
		t.Fatalf("the cut-off redelivery: %+v, %v: want the first call's outcome replayed", out, execErr)
	}
	if n := e.psp.CountKey(key); n != 1 {
		t.Fatalf("%d charges under the intent's key: want one", n)
	}
}
