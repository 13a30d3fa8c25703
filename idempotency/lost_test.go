package idempotency_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

// PostgreSQL crashes for real under a reservation's handler: every process
// of a private cluster gets SIGKILL (pgembed's Crash), so the pool's
// connection is dead when the middleware writes what the handler left, and
// until the cluster is started again (crash recovery) no connection can be
// made. The write is sent again until the recovered server takes it:
//
//   - "answer": the handler answered 201; the answer is stored, and the
//     client's retry gets it replayed instead of a 409 for the whole lease
//     and then a second run of the handler.
//   - "release": the client went away and the handler failed (abandoned);
//     the lease is ended, so the retry runs the handler again at once
//     instead of meeting a 409 for the whole lease.
func TestThroughACrash(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		lost string // the log line of the write found lost
	}{
		{"answer", `msg="idempotency: answer's connection lost, storing it again"`},
		{"release", `msg="idempotency: release's connection lost, sending it again"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			throughACrash(t, c.name == "release", c.lost)
		})
	}
}

func throughACrash(t *testing.T, abandon bool, lost string) {
	ctx := context.Background()
	cluster, pool := pgtest.Private(t, nil)
	logs := &testutil.LockedBuffer{}
	// A lease far longer than the test: only the write sent again can
	// free the key before it ends.
	mw, err := idempotency.New(pool, idempotency.Config{
		Tenant: tenantFromHeader, Lease: 10 * time.Minute,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	entered, proceed := make(chan struct{}), make(chan struct{})
	h := mw.Reservation(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if n == 1 {
			close(entered)
			<-proceed
			if abandon {
				// The client is gone: the handler's call failed with it.
				w.WriteHeader(http.StatusBadGateway)
				return
			}
		}
		// The effect leaves the database (a provider charged under
		// Info.Key); the answer is what the middleware must keep.
		w.WriteHeader(http.StatusCreated)
		info, _ := idempotency.FromContext(r.Context())
		fmt.Fprintf(w, `{"charged":true,"attempt":%d}`, info.Attempt)
	}))

	rctx, hangUp := context.WithCancel(ctx)
	defer hangUp()
	var first result
	done := make(chan struct{})
	go func() {
		defer close(done)
		first = doCtx(rctx, h, "acme", "crash-key", `{"amount":500}`)
	}()
	testutil.FinishWithin(t, 10*time.Second, "the handler", func() { <-entered })
	if err := cluster.Crash(); err != nil {
		t.Fatal(err)
	}
	if abandon {
		hangUp()
	}
	close(proceed)
	logs.WaitFor(t, 10*time.Second, lost)
	if err := cluster.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.FinishWithin(t, 30*time.Second, "the request", func() { <-done })

	retry := do(h, "acme", "crash-key", `{"amount":500}`)
	if abandon {
		if first.status != http.StatusBadGateway || retry.status != http.StatusCreated || retry.replayed ||
			!strings.Contains(retry.body, `"attempt":2`) || calls.Load() != 2 {
			t.Fatalf("abandoned %+v, then the retry %+v after %d runs: want the retry to run the handler again at once (attempt 2)\n%s",
				first, retry, calls.Load(), logs)
		}
		return
	}
	if first.status != http.StatusCreated || first.replayed {
		t.Fatalf("the request through the crash: %+v\n%s", first, logs)
	}
	if retry.status != http.StatusCreated || !retry.replayed || retry.body != first.body || calls.Load() != 1 {
		t.Fatalf("the retry: %+v after %d runs: want %q replayed, one run\n%s", retry, calls.Load(), first.body, logs)
	}
	if strings.Contains(logs.String(), "answer not stored") || strings.Contains(logs.String(), "lease lost") {
		t.Fatalf("the answer was stored, yet:\n%s", logs)
	}
}

// An answer whose write committed and whose connection was lost before the
// server said so: a backend terminated while its commit waits for a
// synchronous standby has committed locally, and PostgreSQL closes the
// session without a word to the client (it sends no error, lest the
// client take the commit for refused). The answer is sent again; fenced by
// its attempt and the running status, it matches nothing, and the row
// tells why: this attempt's, done. It is not mistaken for a lease lost to
// a newer attempt, and the retry gets the answer replayed.
func TestAnswerCommittedThenLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A standby that never comes: a session's commit waits for it unless
	// the session commits locally, as the pool's sessions do until the
	// handler runs.
	cluster, pool := pgtest.Private(t, &pgtest.PrivateOpts{
		Settings: []string{"synchronous_standby_names=nobody"},
		MaxConns: 1, // the session the handler's SET reaches is the middleware's
		Pool: func(cfg *pgxpool.Config) {
			cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "local"
		},
	})
	admin, err := pgx.Connect(ctx, cluster.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(ctx) })
	logs := &testutil.LockedBuffer{}
	mw, err := idempotency.New(pool, idempotency.Config{
		Tenant: tenantFromHeader, Lease: 10 * time.Minute,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	h := mw.Reservation(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		// From here the pool's one session waits for the standby at
		// every commit: the answer's write will.
		if _, err := pool.Exec(r.Context(), `SET synchronous_commit = on`); err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"charged":true}`)
	}))
	var first result
	done := make(chan struct{})
	go func() {
		defer close(done)
		first = do(h, "acme", "lost-key", `{"amount":500}`)
	}()
	testutil.FinishWithin(t, 10*time.Second, "the answer's commit waiting for the standby", func() {
		for n := 0; n == 0; {
			if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`).Scan(&n); err != nil {
				t.Error(err)
				return
			}
		}
	})
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`); err != nil {
		t.Fatal(err)
	}
	testutil.FinishWithin(t, 30*time.Second, "the request", func() { <-done })
	if first.status != http.StatusCreated || first.replayed {
		t.Fatalf("the request: %+v\n%s", first, logs)
	}
	if !strings.Contains(logs.String(), `msg="idempotency: answer's connection lost, storing it again"`) {
		t.Fatalf("the answer's loss was not seen:\n%s", logs)
	}
	if strings.Contains(logs.String(), "lease lost") || strings.Contains(logs.String(), "answer not stored") {
		t.Fatalf("the answer committed before its connection was lost, yet:\n%s", logs)
	}
	retry := do(h, "acme", "lost-key", `{"amount":500}`)
	if !retry.replayed || retry.body != first.body || calls.Load() != 1 {
		t.Fatalf("the retry: %+v after %d runs: want %q replayed, one run\n%s", retry, calls.Load(), first.body, logs)
	}
}

// A transactional request whose COMMIT is sent on a connection that is then
// lost: the middleware reads, on another connection, what the commit left,
// and answers accordingly.
//
//   - "committed, terminated": the commit waits for a synchronous standby
//     that never comes (it is in the WAL, committed locally) and its
//     backend is terminated, which tells the client nothing: the answer is
//     the handler's, and the retry gets it replayed.
//   - "committed, crashed": the same wait, and the server is SIGKILLed
//     (crash recovery replays the commit); the answer comes once the
//     server is back.
//   - "rolled back, crashed": the commit waits on a lock for a deferred
//     foreign key's check, before its commit record, and the server is
//     SIGKILLed: nothing committed, and the answer says not-committed,
//     truthfully; the retry runs afresh.
//   - "unknown": the server stays down past the 10 s of tries: 503
//     commit-unknown; once it is back, the retry gets the stored answer.
//   - "committed after the loss": the commit waits on the deferred check's
//     lock and the client's sockets are closed (the network lost): the
//     server, unaware, goes on. The read of what it left waits for the
//     key's writer to end; the lock is let go, the commit commits, and
//     the answer is the handler's. A plain read would have found no row
//     and answered not-committed, falsely.
func TestCommitLost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                       string
		deferred, crash, stay, cut bool
	}{
		{name: "committed, terminated"},
		{name: "committed, crashed", crash: true},
		{name: "rolled back, crashed", deferred: true, crash: true},
		{name: "unknown", crash: true, stay: true},
		{name: "committed after the loss", deferred: true, cut: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			commitLost(t, c.deferred, c.crash, c.stay, c.cut)
		})
	}
}

func commitLost(t *testing.T, deferred, crash, stay, cut bool) {
	ctx := context.Background()
	var (
		mu      sync.Mutex
		sockets []net.Conn  // the pool's, for "cut"
		down    atomic.Bool // the pool's dials refused
		refused atomic.Int32
	)
	// A standby that never comes: a commit waits for it unless its session
	// commits locally, as the pool's sessions do.
	cluster, pool := pgtest.Private(t, &pgtest.PrivateOpts{
		Settings: []string{"synchronous_standby_names=nobody"},
		Pool: func(cfg *pgxpool.Config) {
			cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "local"
			// pgx dials its cancel requests with it too.
			cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if down.Load() {
					refused.Add(1)
					return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
				}
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err == nil {
					mu.Lock()
					sockets = append(sockets, c)
					mu.Unlock()
				}
				return c, err
			}
		},
	})
	if _, err := pool.Exec(ctx, effectsDDL+`;
		CREATE TABLE public.parents (id int PRIMARY KEY);
		INSERT INTO public.parents VALUES (1);
		CREATE TABLE public.children (parent int REFERENCES public.parents DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	connect := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, cluster.URL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(ctx) })
		return c
	}
	watch, locker := connect(), connect()
	logs := &testutil.LockedBuffer{}
	mw, err := idempotency.New(pool, idempotency.Config{
		Tenant: tenantFromHeader, Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	h := mw.Transactional(route, func(w http.ResponseWriter, r *http.Request, tx pgx.Tx) {
		if calls.Add(1) == 1 {
			wait := `SET LOCAL synchronous_commit = on` // the COMMIT waits for the standby
			if deferred {
				wait = `INSERT INTO children VALUES (1)` // the COMMIT's check waits for the lock
			}
			if _, err := tx.Exec(r.Context(), wait); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		effectTx(w, r, tx)
	})
	waiting := `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`
	if deferred {
		if _, err := locker.Exec(ctx, `BEGIN; SELECT id FROM parents WHERE id = 1 FOR UPDATE`); err != nil {
			t.Fatal(err)
		}
		waiting = `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query = 'commit'`
	}

	var first result
	done := make(chan struct{})
	go func() {
		defer close(done)
		first = do(h, "acme", "commit-key", `{"amount":500}`)
	}()
	testutil.FinishWithin(t, 10*time.Second, "the COMMIT's wait", func() {
		for n := 0; n == 0; {
			if err := watch.QueryRow(ctx, waiting).Scan(&n); err != nil {
				t.Error(err)
				return
			}
		}
	})
	switch {
	case cut:
		// The network is lost: the sockets close, and nothing of the
		// client reaches the server for a while, pgx's cancel request
		// for the COMMIT included (over a broken connection pgx cancels
		// the query it was running, on a new one; had it got through,
		// the COMMIT would have been canceled before its commit record,
		// and the answer would be not-committed).
		down.Store(true)
		mu.Lock()
		for _, c := range sockets {
			c.Close()
		}
		mu.Unlock()
		logs.WaitFor(t, 10*time.Second, `msg="idempotency: commit's connection lost, reading what it left"`)
		testutil.FinishWithin(t, 10*time.Second, "the reads refused", func() {
			for refused.Load() < 3 {
				time.Sleep(time.Millisecond)
			}
		})
		down.Store(false)
		testutil.FinishWithin(t, 10*time.Second, "the read waiting for the key's writer", func() {
			for n := 0; n == 0; {
				if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO idempotency_requests%'`).Scan(&n); err != nil {
					t.Error(err)
					return
				}
			}
		})
		if _, err := locker.Exec(ctx, `ROLLBACK`); err != nil {
			t.Fatal(err)
		}
	case !crash:
		if _, err := watch.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`); err != nil {
			t.Fatal(err)
		}
	default:
		if err := cluster.Crash(); err != nil {
			t.Fatal(err)
		}
		logs.WaitFor(t, 10*time.Second, `msg="idempotency: commit's connection lost, reading what it left"`)
		if stay {
			testutil.FinishWithin(t, 30*time.Second, "the request", func() { <-done })
		}
		if err := cluster.Recover(ctx); err != nil {
			t.Fatal(err)
		}
	}
	testutil.FinishWithin(t, 30*time.Second, "the request", func() { <-done })
	retry := do(h, "acme", "commit-key", `{"amount":500}`)
	count := func(table string) int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	switch {
	case stay:
		mustProblem(t, first, http.StatusServiceUnavailable)
		if !strings.Contains(first.body, "#commit-unknown") || first.header.Get("Retry-After") == "" {
			t.Fatalf("the request while the database stays down: %+v, want commit-unknown with Retry-After\n%s", first, logs)
		}
		if retry.status != http.StatusCreated || !retry.replayed || !strings.Contains(retry.body, `"attempt":1`) || calls.Load() != 1 {
			t.Fatalf("the retry once it is back: %+v after %d runs, want the commit's answer replayed\n%s", retry, calls.Load(), logs)
		}
	case cut:
		if first.status != http.StatusCreated || first.replayed || !strings.Contains(logs.String(), "the lost commit committed") {
			t.Fatalf("the request whose commit committed after its connection was lost: %+v, want the handler's own answer\n%s", first, logs)
		}
		if !retry.replayed || retry.body != first.body || calls.Load() != 1 {
			t.Fatalf("the retry: %+v after %d runs, want %q replayed\n%s", retry, calls.Load(), first.body, logs)
		}
		if n := count("children"); n != 1 {
			t.Fatalf("%d children: want the commit's one", n)
		}
	case deferred:
		mustProblem(t, first, http.StatusInternalServerError)
		if !strings.Contains(first.body, "#not-committed") || !strings.Contains(logs.String(), "the lost commit rolled back") {
			t.Fatalf("the request whose commit was lost before it committed: %+v\n%s", first, logs)
		}
		if retry.status != http.StatusCreated || retry.replayed || !strings.Contains(retry.body, `"attempt":1`) || calls.Load() != 2 {
			t.Fatalf("the retry: %+v after %d runs, want a fresh run\n%s", retry, calls.Load(), logs)
		}
		if n := count("children"); n != 0 {
			t.Fatalf("%d children: the rolled-back commit's row is there", n)
		}
	default:
		if first.status != http.StatusCreated || first.replayed || first.header.Get("X-Not-Stored") != "1" ||
			!strings.Contains(logs.String(), "the lost commit committed") {
			t.Fatalf("the request whose commit was lost after it committed: %+v, want the handler's own answer\n%s", first, logs)
		}
		if !retry.replayed || retry.body != first.body || calls.Load() != 1 {
			t.Fatalf("the retry: %+v after %d runs, want %q replayed\n%s", retry, calls.Load(), first.body, logs)
		}
	}
	if n := count("effects"); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
}
