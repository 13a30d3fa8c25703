package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/dbpool"
	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// The crash tests run this test binary again as a child process whose
// handler performs its effect and then SIGKILLs its own process: no
// deferred function, no rollback, no release runs. What the database is
// left with is exactly what a killed server leaves.
//
// The child's lease is long, so that the parent's first request always
// finds the key reserved; the parent then ends the lease in the database
// (expireLeases) instead of waiting for it.
const (
	childEnv   = "IDEMPOTENCY_TEST_CHILD"
	childLease = time.Minute
)

func childMain(mode string) int {
	ctx := context.Background()
	pool, err := dbpool.Open(ctx, os.Getenv("IDEMPOTENCY_TEST_URL"), os.Getenv("IDEMPOTENCY_TEST_SCHEMA"), 2)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	mw, err := idempotency.New(pool, idempotency.Config{Tenant: tenantFromHeader, Lease: childLease})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	die := func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) } //nolint:errcheck
	var h http.Handler
	switch mode {
	case "transactional":
		h = mw.Transactional(route, func(w http.ResponseWriter, r *http.Request, tx pgx.Tx) {
			effectTx(w, r, tx) // written in the transaction, not yet committed
			var pid int
			if err := tx.QueryRow(r.Context(), `SELECT pg_backend_pid()`).Scan(&pid); err == nil {
				fmt.Printf("backend=%d\n", pid) // the session the parent waits out
			}
			die()
		})
	case "reservation":
		inner := effectPlain(pool)
		h = mw.Reservation(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inner.ServeHTTP(w, r) // the effect is out (committed), the answer is not stored
			die()
		}))
	default:
		return 3
	}
	do(h, "acme", "crash-key", `{"amount":500}`)
	time.Sleep(time.Minute) // SIGKILL is asynchronous
	return 4
}

func runKilledChild(t *testing.T, mode, schema string) (output string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		childEnv+"="+mode,
		"IDEMPOTENCY_TEST_URL="+pgtest.URL(t),
		"IDEMPOTENCY_TEST_SCHEMA="+schema)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die by SIGKILL: %v\n%s", err, out)
	}
	return string(out)
}

// waitSessionEnd returns once the server has ended the killed child's
// session, named by the backend pid the child printed. By then its
// transaction is rolled back and its locks are released: a backend aborts
// its transaction before its pg_stat_activity row goes.
func waitSessionEnd(t *testing.T, e *env, childOutput string) {
	t.Helper()
	_, after, _ := strings.Cut(childOutput, "backend=")
	var pid int
	if _, err := fmt.Sscanf(after, "%d", &pid); err != nil || pid == 0 {
		t.Fatalf("the child printed no backend pid: %v\n%s", err, childOutput)
	}
	for deadline := time.Now().Add(30 * time.Second); e.count(t, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid) != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the killed child's session %d is still open", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Transactional mode: a process killed inside the handler leaves no key
// and no effect; the retry runs as a first request.
func TestKilledTransactionalHandlerLeavesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2, idempotency.Config{})
	out := runKilledChild(t, "transactional", e.schema)
	// Until the server has noticed the dead connection, the child's rows
	// are uncommitted (invisible, so counting them proves nothing) and its
	// key is locked: wait for the session's end, after which the rows
	// counted are all that survived the crash.
	waitSessionEnd(t, e, out)
	e.mustRows(t, 0, 0, "a killed transactional handler")
	// No Route.Wait: a key lock left behind would answer 409.
	h := e.mw.Transactional(route, effectTx)
	r := do(h, "acme", "crash-key", `{"amount":500}`)
	if r.status != http.StatusCreated || r.replayed || !strings.Contains(r.body, `"attempt":1`) {
		t.Fatalf("retry after the crash: %+v", r)
	}
	e.mustRows(t, 1, -1, "retry after the crash")
}

// Reservation mode: the key stays reserved (409) until its lease ends, then
// the next request takes it over and runs the handler again (attempt 2),
// and later ones get that answer.
func TestKilledReservationHandlerRecoversAfterLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2, idempotency.Config{Lease: childLease})
	runKilledChild(t, "reservation", e.schema)
	if n := e.count(t, `SELECT count(*) FROM idempotency_requests WHERE status = 'running'`); n != 1 {
		t.Fatalf("%d running reservations after the crash, want 1", n)
	}
	h := e.mw.Reservation(route, effectPlain(e.pool))
	// Inside the lease the key is taken.
	mustProblem(t, do(h, "acme", "crash-key", `{"amount":500}`), http.StatusConflict)
	expireLeases(t, e)
	first := do(h, "acme", "crash-key", `{"amount":500}`)
	if first.status != http.StatusCreated || first.replayed || !strings.Contains(first.body, `"attempt":2`) {
		t.Fatalf("after the lease: %+v", first)
	}
	again := do(h, "acme", "crash-key", `{"amount":500}`)
	if !again.replayed || again.body != first.body {
		t.Fatalf("after takeover: %+v", again)
	}
	// The handler ran twice, which is why a reservation handler passes the
	// key on to its provider: the provider deduplicates the second run.
	e.mustRows(t, 2, -1, "crashed run + takeover")
}

// A handler that outlives its lease is fenced: the newer attempt's answer
// is the one kept, and the late one cannot overwrite it.
func TestLateHandlerIsFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 4, idempotency.Config{Lease: 300 * time.Millisecond})
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	var calls atomic.Int32
	inner := effectPlain(e.pool)
	leaseOver := make(chan struct{})
	h := e.mw.Reservation(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		if calls.Add(1) == 1 {
			// The middleware cancels the handler's context when its lease
			// ends; the lease's end in the database (now() at the claim
			// plus the lease) came before that timer, which started after
			// the claim returned.
			<-r.Context().Done()
			close(leaseOver)
			<-release
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, "late")
			return
		}
		inner.ServeHTTP(w, r)
	}))
	lateDone := make(chan result)
	go func() { lateDone <- do(h, "acme", "fence", `{"amount":1}`) }()
	<-entered
	<-leaseOver
	second := do(h, "acme", "fence", `{"amount":1}`)
	if second.status != http.StatusCreated || !strings.Contains(second.body, `"attempt":2`) {
		t.Fatalf("takeover: %+v", second)
	}
	close(release)
	late := <-lateDone
	if late.status != http.StatusCreated || late.body != "late" {
		t.Fatalf("late answer: %+v", late)
	}
	if r := do(h, "acme", "fence", `{"amount":1}`); !r.replayed || r.body != second.body {
		t.Fatalf("stored answer is not the newer attempt's: %+v", r)
	}
}

// expireLeases ends every running reservation's lease now, as the clock
// would, so that a test need not wait for it.
func expireLeases(t *testing.T, e *env) {
	t.Helper()
	if _, err := e.pool.Exec(context.Background(), `UPDATE idempotency_requests SET lease_until = now() WHERE status = 'running'`); err != nil {
		t.Fatal(err)
	}
}
