package idempotency_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
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
