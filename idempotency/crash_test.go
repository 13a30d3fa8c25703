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

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/dbconf"
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
	pool, err := dbconf.Open(ctx, os.Getenv("IDEMPOTENCY_TEST_URL"), os.Getenv("IDEMPOTENCY_TEST_SCHEMA"), 2)
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

func runKilledChild(t *testing.T, mode, schema string) {
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
}

// Transactional mode: a process killed inside the handler leaves no key
// and no effect; the retry runs as a first request.
func TestKilledTransactionalHandlerLeavesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2, idempotency.Config{})
	runKilledChild(t, "transactional", e.schema)
	// The server notices the dead connection and rolls back; a moment may
	// pass before its locks are gone, so the retry may wait on the lock.
	if n := e.effects(t) + e.keys(t); n != 0 {
		t.Fatalf("killed transactional handler left %d rows", n)
	}
	h := e.mw.Transactional(idempotency.Route{Operation: route.Operation, Wait: 10 * time.Second}, effectTx)
	r := do(h, "acme", "crash-key", `{"amount":500}`)
	if r.status != http.StatusCreated || r.replayed || !strings.Contains(r.body, `"attempt":1`) {
		t.Fatalf("retry after the crash: %+v", r)
	}
	if n := e.effects(t); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
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
	if n := e.effects(t); n != 2 {
		t.Fatalf("%d effects, want 2 (crashed run + takeover)", n)
	}
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
