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
	"github.com/retrysafe/retrysafe/internal/lostconn"
	"github.com/retrysafe/retrysafe/internal/pgembed"
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
//   - "reservation": crashed before the request: its reservation cannot
//     reach the server, and is sent again until it can; the handler runs
//     once, instead of the request answering 503.
func TestThroughACrash(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		lost string // the log line of the write found lost
	}{
		{"answer", `msg="idempotency: answer's connection lost, storing it again"`},
		{"release", `msg="idempotency: release's connection lost, sending it again"`},
		{"reservation", `msg="idempotency: reservation's connection lost, sending it again"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			throughACrash(t, c.name, c.lost)
		})
	}
}

func throughACrash(t *testing.T, mode, lost string) {
	abandon, before := mode == "release", mode == "reservation"
	ctx := context.Background()
	cluster, pool := pgtest.Private(t, nil)
	logs := &testutil.LockedBuffer{}
	// A lease far longer than the test: only the write sent again can
	// free the key before it ends.
	hr := &heard{}
	mw, err := idempotency.New(pool, idempotency.Config{
		Tenant: tenantFromHeader, Lease: 10 * time.Minute,
		Logger: slog.New(slog.NewTextHandler(logs, nil)), OnLostWrite: hr.hear,
	})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	entered, proceed := make(chan struct{}), make(chan struct{})
	h := mw.Reservation(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if n == 1 && !before {
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
	if before {
		if err := cluster.Crash(); err != nil {
			t.Fatal(err)
		}
	}
	var first result
	done := make(chan struct{})
	go func() {
		defer close(done)
		first = doCtx(rctx, h, "acme", "crash-key", `{"amount":500}`)
	}()
	if !before {
		testutil.FinishWithin(t, 10*time.Second, "the handler", func() { <-entered })
		if err := cluster.Crash(); err != nil {
			t.Fatal(err)
		}
		if abandon {
			hangUp()
		}
		close(proceed)
	}
	logs.WaitFor(t, 10*time.Second, lost)
	if err := cluster.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.FinishWithin(t, 30*time.Second, "the request", func() { <-done })
	// Sent again until the server was back: through.
	switch mode {
	case "answer":
		hr.one(t, idempotency.WriteAnswer, 1, true)
	case "release":
		hr.one(t, idempotency.WriteRelease, 1, true)
	default:
		hr.one(t, idempotency.WriteReservation, 0, true)
	}

	retry := do(h, "acme", "crash-key", `{"amount":500}`)
	if abandon {
		if first.status != http.StatusBadGateway || retry.status != http.StatusCreated || retry.replayed ||
			!strings.Contains(retry.body, `"attempt":2`) || calls.Load() != 2 {
			t.Fatalf("abandoned %+v, then the retry %+v after %d runs: want the retry to run the handler again at once (attempt 2)\n%s",
				first, retry, calls.Load(), logs)
		}
		return
	}
	if first.status != http.StatusCreated || first.replayed || !strings.Contains(first.body, `"attempt":1`) {
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
	sb := newStandbyless(t, 1, nil) // one session: the handler's SET reaches the middleware's
	pool, logs, mw := sb.pool, sb.logs, sb.mw
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
	first := sb.doTerminated(t, h, "lost-key", "the answer's commit")
	sb.heard.one(t, idempotency.WriteAnswer, 1, true)
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
//   - "unknown": the server stays down past LostWriteRetry's tries: 503
//     commit-unknown; once it is back, the retry gets the stored answer.
//   - "committed after the loss": the commit waits on the deferred check's
//     lock and the client's sockets are closed (the network lost): the
//     server, unaware, goes on. The read of what it left waits for the
//     key's writer to end; the lock is let go, the commit commits, and
//     the answer is the handler's. A plain read would have found no row
//     and answered not-committed, falsely.
//   - "a takeover committed after the loss": the same, for a request that
//     took over an expired key (an update of its row, not an insert): a
//     read that did not wait would have found the expired answer and
//     replayed it.
func TestCommitLost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                                 string
		deferred, crash, stay, cut, takeover bool
	}{
		{name: "committed, terminated"},
		{name: "committed, crashed", crash: true},
		{name: "rolled back, crashed", deferred: true, crash: true},
		{name: "unknown", crash: true, stay: true},
		{name: "committed after the loss", deferred: true, cut: true},
		{name: "a takeover committed after the loss", deferred: true, cut: true, takeover: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			commitLost(t, c.deferred, c.crash, c.stay, c.cut, c.takeover)
		})
	}
}

func commitLost(t *testing.T, deferred, crash, stay, cut, takeover bool) {
	ctx := context.Background()
	var (
		mu      sync.Mutex
		sockets []net.Conn  // the pool's, for "cut"
		down    atomic.Bool // the pool's dials refused
		refused atomic.Int32
	)
	sb := newStandbyless(t, 2, func(cfg *pgxpool.Config) {
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
	})
	cluster, pool, watch, logs, mw := sb.cluster, sb.pool, sb.admin, sb.logs, sb.mw
	const window = 2 * time.Second
	if stay {
		// The database stays away past the window: the request gives up
		// after it.
		mw = sb.middleware(t, func(c *idempotency.Config) { c.LostWriteRetry = window })
	}
	if _, err := pool.Exec(ctx, effectsDDL+`;
		CREATE TABLE public.parents (id int PRIMARY KEY);
		INSERT INTO public.parents VALUES (1);
		CREATE TABLE public.children (parent int REFERENCES public.parents DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	locker := sb.connect(t)
	var calls atomic.Int32
	var armed atomic.Bool // the next run's COMMIT waits
	h := mw.Transactional(route, func(w http.ResponseWriter, r *http.Request, tx pgx.Tx) {
		calls.Add(1)
		if armed.CompareAndSwap(true, false) {
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
	waiting := `SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'SyncRep'`
	if deferred {
		if _, err := locker.Exec(ctx, `BEGIN; SELECT id FROM parents WHERE id = 1 FOR UPDATE`); err != nil {
			t.Fatal(err)
		}
		waiting = `SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query = 'commit'`
	}

	attempt := `"attempt":1`
	if takeover {
		// The key's first answer, expired since: the request takes it over.
		if r := do(h, "acme", "commit-key", `{"amount":500}`); r.status != http.StatusCreated {
			t.Fatalf("the key's first request: %+v", r)
		}
		if _, err := pool.Exec(ctx, `UPDATE idempotency_requests SET expires_at = now() - interval '1 second'`); err != nil {
			t.Fatal(err)
		}
		attempt = `"attempt":2`
	}
	base := calls.Load()
	runs := func() int32 { return calls.Load() - base }
	armed.Store(true)
	var first result
	done := make(chan struct{})
	go func() {
		defer close(done)
		first = do(h, "acme", "commit-key", `{"amount":500}`)
	}()
	testutil.PollTrue(t, watch, "the COMMIT's wait", waiting)
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
		testutil.PollTrue(t, watch, "the read waiting for the key's writer", `SELECT count(*) > 0 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO idempotency_requests%'`)
		if _, err := locker.Exec(ctx, `ROLLBACK`); err != nil {
			t.Fatal(err)
		}
	case !crash:
		sb.terminateWaiting(t, "the COMMIT")
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
	// What the commit left was read (committed or not), except where the
	// database stayed away.
	lw := sb.heard.one(t, idempotency.WriteCommit, map[bool]int32{false: 1, true: 2}[takeover], !stay)
	if stay && (lw.Elapsed < window-lostconn.PauseMax || lw.Elapsed > window+3*time.Second) {
		// It stops when the next pause (at most PauseMax) would end
		// past the window.
		t.Fatalf("read again for %v, want about LostWriteRetry (%v)", lw.Elapsed, window)
	}
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
		if retry.status != http.StatusCreated || !retry.replayed || !strings.Contains(retry.body, attempt) || runs() != 1 {
			t.Fatalf("the retry once it is back: %+v after %d runs, want the commit's answer replayed\n%s", retry, runs(), logs)
		}
	case cut:
		if first.status != http.StatusCreated || first.replayed || !strings.Contains(first.body, attempt) ||
			!strings.Contains(logs.String(), "the lost commit committed") {
			t.Fatalf("the request whose commit committed after its connection was lost: %+v, want the handler's own answer (%s)\n%s", first, attempt, logs)
		}
		if !retry.replayed || retry.body != first.body || runs() != 1 {
			t.Fatalf("the retry: %+v after %d runs, want %q replayed\n%s", retry, runs(), first.body, logs)
		}
		if n := count("children"); n != 1 {
			t.Fatalf("%d children: want the commit's one", n)
		}
	case deferred:
		mustProblem(t, first, http.StatusInternalServerError)
		if !strings.Contains(first.body, "#not-committed") || !strings.Contains(logs.String(), "the lost commit rolled back") {
			t.Fatalf("the request whose commit was lost before it committed: %+v\n%s", first, logs)
		}
		if retry.status != http.StatusCreated || retry.replayed || !strings.Contains(retry.body, attempt) || runs() != 2 {
			t.Fatalf("the retry: %+v after %d runs, want a fresh run\n%s", retry, runs(), logs)
		}
		if n := count("children"); n != 0 {
			t.Fatalf("%d children: the rolled-back commit's row is there", n)
		}
	default:
		if first.status != http.StatusCreated || first.replayed || first.header.Get("X-Not-Stored") != "1" ||
			!strings.Contains(logs.String(), "the lost commit committed") {
			t.Fatalf("the request whose commit was lost after it committed: %+v, want the handler's own answer\n%s", first, logs)
		}
		if !retry.replayed || retry.body != first.body || runs() != 1 {
			t.Fatalf("the retry: %+v after %d runs, want %q replayed\n%s", retry, runs(), first.body, logs)
		}
	}
	if n := count("effects"); n != int(base)+1 {
		t.Fatalf("%d effects, want %d", n, base+1)
	}
}

// A reservation whose insert committed and whose connection was lost
// before the server said so (a backend terminated while its commit waits
// for a synchronous standby: committed locally, and the client told
// nothing). Sent again, the insert finds the key running; under the
// request's own holder, it is the lost reservation, and the handler runs
// under it (attempt 1), instead of the request answering 503 and its retry
// meeting a 409 for the whole lease. "takeover": the same for a request
// that takes over an expired key (attempt 2).
func TestReservationCommittedThenLost(t *testing.T) {
	t.Parallel()
	for _, takeover := range []bool{false, true} {
		t.Run(map[bool]string{false: "reservation", true: "takeover"}[takeover], func(t *testing.T) {
			t.Parallel()
			reservationCommittedThenLost(t, takeover)
		})
	}
}

func reservationCommittedThenLost(t *testing.T, takeover bool) {
	ctx := context.Background()
	sb := newStandbyless(t, 1, nil) // one session: the SET below reaches the reservation's
	pool, logs, mw := sb.pool, sb.logs, sb.mw
	var calls atomic.Int32
	h := mw.Reservation(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		info, _ := idempotency.FromContext(r.Context())
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"charged":true,"attempt":%d}`, info.Attempt)
	}))
	attempt, runs := `"attempt":1`, int32(1)
	if takeover {
		if r := do(h, "acme", "reserve-key", `{"amount":500}`); r.status != http.StatusCreated {
			t.Fatalf("the key's first request: %+v", r)
		}
		if _, err := pool.Exec(ctx, `UPDATE idempotency_requests SET expires_at = now() - interval '1 second'`); err != nil {
			t.Fatal(err)
		}
		attempt, runs = `"attempt":2`, 2
	}
	// The pool's one session waits for the standby at its next commit:
	// the reservation's.
	if _, err := pool.Exec(ctx, `SET synchronous_commit = on`); err != nil {
		t.Fatal(err)
	}
	first := sb.doTerminated(t, h, "reserve-key", "the reservation's commit")
	sb.heard.one(t, idempotency.WriteReservation, 0, true)
	if first.status != http.StatusCreated || first.replayed || !strings.Contains(first.body, attempt) || calls.Load() != runs {
		t.Fatalf("the request whose reservation committed, then was lost: %+v after %d runs, want the handler run once under it\n%s",
			first, calls.Load(), logs)
	}
	if !strings.Contains(logs.String(), `msg="idempotency: the lost reservation had committed; running under it"`) {
		t.Fatalf("the lost reservation was not adopted:\n%s", logs)
	}
	if retry := do(h, "acme", "reserve-key", `{"amount":500}`); !retry.replayed || retry.body != first.body || calls.Load() != runs {
		t.Fatalf("the retry: %+v after %d runs, want %q replayed\n%s", retry, calls.Load(), first.body, logs)
	}
}

// standbyless is a middleware (10 min lease) on a private cluster whose
// commits wait for a synchronous standby that never comes, except in the
// pool's sessions, which commit locally until one of them turns
// synchronous_commit on. A backend terminated in that wait has committed
// locally, and PostgreSQL closes its session without a word to the client
// (it sends no error, lest the client take the commit for refused): a
// connection lost after its commit.
type standbyless struct {
	cluster *pgembed.Cluster
	pool    *pgxpool.Pool
	admin   *pgx.Conn // outside the pool
	logs    *testutil.LockedBuffer
	heard   *heard // Config.OnLostWrite's
	mw      *idempotency.Middleware
}

func newStandbyless(t *testing.T, maxConns int32, pool func(*pgxpool.Config)) *standbyless {
	t.Helper()
	sb := &standbyless{logs: &testutil.LockedBuffer{}, heard: &heard{}}
	sb.cluster, sb.pool = pgtest.Private(t, &pgtest.PrivateOpts{
		Settings: []string{"synchronous_standby_names=nobody"},
		MaxConns: maxConns,
		Pool: func(cfg *pgxpool.Config) {
			cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "local"
			if pool != nil {
				pool(cfg)
			}
		},
	})
	sb.admin = sb.connect(t)
	sb.mw = sb.middleware(t, nil)
	return sb
}

// middleware is a Middleware on sb's pool, logs and hook, its Config
// changed by mod (if not nil).
func (sb *standbyless) middleware(t *testing.T, mod func(*idempotency.Config)) *idempotency.Middleware {
	t.Helper()
	cfg := idempotency.Config{
		Tenant: tenantFromHeader, Lease: 10 * time.Minute,
		Logger: slog.New(slog.NewTextHandler(sb.logs, nil)), OnLostWrite: sb.heard.hear,
	}
	if mod != nil {
		mod(&cfg)
	}
	mw, err := idempotency.New(sb.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

// heard keeps what Config.OnLostWrite heard.
type heard struct {
	mu sync.Mutex
	ws []idempotency.LostWrite
}

func (h *heard) hear(w idempotency.LostWrite) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ws = append(h.ws, w)
}

// one fails t unless exactly one lost write was heard: write's, for
// attempt, through or not, with its loss and at least one send again. It
// returns it.
func (h *heard) one(t *testing.T, write string, attempt int32, through bool) idempotency.LostWrite {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ws) != 1 || h.ws[0].Write != write || h.ws[0].Operation != route.Operation || h.ws[0].Attempt != attempt ||
		h.ws[0].Lost == nil || (h.ws[0].Err == nil) != through || h.ws[0].Sends < 1 || h.ws[0].Elapsed <= 0 {
		t.Fatalf("lost writes heard: %+v; want one %s at attempt %d, through %v", h.ws, write, attempt, through)
	}
	return h.ws[0]
}

// connect opens a session outside the pool, closed when the test ends.
func (sb *standbyless) connect(t *testing.T) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), sb.cluster.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// doTerminated sends acme's request with key to h and terminates the
// backend of the commit (what) it makes wait for the standby: a
// connection lost after its commit. It returns the request's answer.
func (sb *standbyless) doTerminated(t *testing.T, h http.Handler, key, what string) result {
	t.Helper()
	var first result
	done := make(chan struct{})
	go func() {
		defer close(done)
		first = do(h, "acme", key, `{"amount":500}`)
	}()
	sb.terminateWaiting(t, what)
	testutil.FinishWithin(t, 30*time.Second, "the request", func() { <-done })
	return first
}

// terminateWaiting waits for a commit (what) to wait for the standby, and
// terminates its backend.
func (sb *standbyless) terminateWaiting(t *testing.T, what string) {
	t.Helper()
	testutil.PollTrue(t, sb.admin, what+" waiting for the standby", `SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'SyncRep'`)
	if _, err := sb.admin.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`); err != nil {
		t.Fatal(err)
	}
}
