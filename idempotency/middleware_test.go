package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

var route = idempotency.Route{Operation: "POST /effects"}

func TestMissingKeyIs400AndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2, idempotency.Config{})
	for name, h := range map[string]http.Handler{
		"transactional": e.mw.Transactional(route, effectTx),
		"reservation":   e.mw.Reservation(route, effectPlain(e.pool)),
	} {
		r := do(h, "acme", "", `{"amount":100}`)
		mustProblem(t, r, http.StatusBadRequest)
		if !strings.Contains(r.body, "idempotency-key-missing") {
			t.Errorf("%s: problem type not key-missing: %s", name, r.body)
		}
	}
	e.mustRows(t, 0, 0, "requests without a key")
}

func TestInvalidKeysAre400(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2, idempotency.Config{})
	h := e.mw.Transactional(route, effectTx)
	for name, key := range map[string]string{
		"too long":      strings.Repeat("k", 256),
		"non-ascii":     "chave-ação",
		"control":       "a\x01b",
		"blank":         "   ",
		"empty quoted":  `""`,
		"bad quoting":   `"a"b"`,
		"unterminated":  `"abc`,
		"bad sf escape": `"a\nb"`,
	} {
		req := httptest.NewRequest(http.MethodPost, "/effects", strings.NewReader(`{"amount":1}`))
		req.Header.Set("X-Tenant", "acme")
		req.Header["Idempotency-Key"] = []string{key}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest || rec.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s", name, rec.Code, rec.Body)
		}
	}
	// A repeated header is ambiguous: which key would protect the request?
	req := httptest.NewRequest(http.MethodPost, "/effects", strings.NewReader(`{"amount":1}`))
	req.Header.Set("X-Tenant", "acme")
	req.Header.Add("Idempotency-Key", "a")
	req.Header.Add("Idempotency-Key", "b")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest {
		t.Errorf("repeated header: %d", rec.Code)
	}
	e.mustRows(t, 0, 0, "invalid keys")

	// The longest key that is allowed, and the quoted form of a key.
	if r := do(h, "acme", strings.Repeat("k", 255), `{"amount":1}`); r.status != http.StatusCreated {
		t.Fatalf("255-character key: %d %s", r.status, r.body)
	}
	first := do(h, "acme", "quoted-key", `{"amount":2}`)
	again := do(h, "acme", `"quoted-key"`, `{"amount":2}`)
	if first.status != http.StatusCreated || !again.replayed || again.body != first.body {
		t.Fatalf("quoted key not the same key: %+v / %+v", first, again)
	}
}

func TestUnauthenticatedIs401(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2, idempotency.Config{})
	r := do(e.mw.Transactional(route, effectTx), "", "k1", `{"amount":1}`)
	mustProblem(t, r, http.StatusUnauthorized)
	e.mustRows(t, 0, -1, "without a tenant")
}

func TestReplayIsByteForByte(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 4, idempotency.Config{})
	for _, mode := range []string{"transactional", "reservation"} {
		t.Run(mode, func(t *testing.T) {
			h := e.mw.Transactional(idempotency.Route{Operation: "tx"}, effectTx)
			if mode == "reservation" {
				h = e.mw.Reservation(idempotency.Route{Operation: "res"}, effectPlain(e.pool))
			}
			first := do(h, "acme", "replay-1", `{"amount": 100, "note": "x"}`)
			if first.status != http.StatusCreated || first.replayed {
				t.Fatalf("first: %d replayed=%v %s", first.status, first.replayed, first.body)
			}
			// Same request with other key order and white space: same fingerprint.
			second := do(h, "acme", "replay-1", "{\n  \"note\":\"x\",\"amount\":100}")
			if second.status != first.status || second.body != first.body || !second.replayed {
				t.Fatalf("replay: %d %q replayed=%v; first %d %q", second.status, second.body, second.replayed, first.status, first.body)
			}
			for _, h := range []string{"Content-Type", "Location"} {
				if second.header.Get(h) != first.header.Get(h) {
					t.Errorf("header %s: replay %q, first %q", h, second.header.Get(h), first.header.Get(h))
				}
			}
			if second.header.Get("Content-Length") != fmt.Sprint(len(first.body)) {
				t.Errorf("replay Content-Length %q", second.header.Get("Content-Length"))
			}
		})
	}
	e.mustRows(t, 2, -1, "one per mode")
	// Headers outside the stored set are not replayed.
	r := do(e.mw.Transactional(idempotency.Route{Operation: "tx"}, effectTx), "acme", "replay-1", `{"amount":100,"note":"x"}`)
	if r.header.Get("X-Not-Stored") != "" {
		t.Error("unlisted header replayed")
	}
}

func TestErrorAnswersAreStoredAndReplayed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2, idempotency.Config{})
	h := e.mw.Transactional(route, effectTx)
	for _, tc := range []struct {
		body   string
		status int
	}{
		{`{"amount":-1}`, http.StatusUnprocessableEntity},
		{`{"amount":0}`, http.StatusInternalServerError},
		{`not json`, http.StatusBadRequest},
	} {
		key := "err-" + tc.body
		first := do(h, "acme", key, tc.body)
		second := do(h, "acme", key, tc.body)
		if first.status != tc.status || second.status != tc.status || second.body != first.body || !second.replayed {
			t.Errorf("%s: first %d %q, second %d %q replayed=%v", tc.body, first.status, first.body, second.status, second.body, second.replayed)
		}
	}
	// The two JSON bodies ran once each (their effect is committed with
	// their answer); the invalid one wrote nothing but its answer.
	e.mustRows(t, 2, -1, "stored error answers")
}

func TestKeyReusedWithOtherBodyIs422(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2, idempotency.Config{})
	for _, h := range e.bothModes() {
		if r := do(h, "acme", "k", `{"amount":100}`); r.status != http.StatusCreated {
			t.Fatal(r)
		}
		mustProblem(t, do(h, "acme", "k", `{"amount":101}`), http.StatusUnprocessableEntity)
	}
	e.mustRows(t, 2, -1, "one per mode")
}

func TestTenantsDoNotShareKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2, idempotency.Config{})
	h := e.mw.Transactional(route, effectTx)
	a := do(h, "tenant-a", "same-key", `{"amount":1}`)
	b := do(h, "tenant-b", "same-key", `{"amount":2}`) // another body: would be 422 if scopes were shared
	if a.status != http.StatusCreated || b.status != http.StatusCreated || b.replayed {
		t.Fatalf("a %d, b %d replayed=%v", a.status, b.status, b.replayed)
	}
	if n := e.count(t, `SELECT count(DISTINCT tenant) FROM effects`); n != 2 {
		t.Fatalf("%d tenants with effects, want 2", n)
	}
}

func TestHandlerCannotEndTheTransaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2, idempotency.Config{})
	var commitErr, rollbackErr error
	h := e.mw.Transactional(route, func(w http.ResponseWriter, r *http.Request, tx pgx.Tx) {
		commitErr = tx.Commit(r.Context())
		rollbackErr = tx.Rollback(r.Context())
		w.WriteHeader(http.StatusNoContent)
	})
	if r := do(h, "acme", "k", `{}`); r.status != http.StatusNoContent {
		t.Fatal(r)
	}
	if !errors.Is(commitErr, idempotency.ErrTxOwned) || !errors.Is(rollbackErr, idempotency.ErrTxOwned) {
		t.Fatalf("commit %v, rollback %v", commitErr, rollbackErr)
	}
	if r := do(h, "acme", "k", `{}`); !r.replayed || r.status != http.StatusNoContent {
		t.Fatalf("204 not replayed: %+v", r)
	}
}

func TestKeyOptionalRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2, idempotency.Config{})
	h := e.mw.Transactional(idempotency.Route{Operation: "opt", KeyOptional: true}, effectTx)
	for range 2 {
		if r := do(h, "acme", "", `{"amount":5}`); r.status != http.StatusCreated || r.replayed {
			t.Fatal(r)
		}
	}
	e.mustRows(t, 2, 0, "abandoned failures")
}

func TestHandlerPanicRollsBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2, idempotency.Config{})
	var panics atomic.Bool
	panics.Store(true)
	h := e.mw.Transactional(route, func(w http.ResponseWriter, r *http.Request, tx pgx.Tx) {
		effectTx(httptest.NewRecorder(), r, tx)
		if panics.Load() {
			panic("boom")
		}
		w.WriteHeader(http.StatusCreated)
	})
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic swallowed")
			}
		}()
		do(h, "acme", "k", `{"amount":3}`)
	}()
	e.mustRows(t, 0, 0, "a panicking handler")
	panics.Store(false)
	if r := do(h, "acme", "k", `{"amount":3}`); r.status != http.StatusCreated || r.replayed {
		t.Fatalf("retry after panic: %+v", r)
	}
}

// A duplicate of a request that is still running gets 409, problem+json and
// Retry-After, in both modes, and the first one's answer afterwards.
func TestInFlightIs409(t *testing.T) {
	t.Parallel()
	var heard []idempotency.InFlight // the duplicate runs on its subtest's goroutine, which alone reads it
	e := newEnv(t, 4, idempotency.Config{LockTimeout: 20 * time.Millisecond,
		OnInFlight: func(f idempotency.InFlight) { heard = append(heard, f) }})
	for _, mode := range []string{"transactional", "reservation"} {
		t.Run(mode, func(t *testing.T) {
			heard = nil
			entered, release := make(chan struct{}), make(chan struct{})
			var h http.Handler
			if mode == "transactional" {
				h = e.mw.Transactional(idempotency.Route{Operation: mode}, func(w http.ResponseWriter, r *http.Request, tx pgx.Tx) {
					close(entered)
					<-release
					effectTx(w, r, tx)
				})
			} else {
				inner := effectPlain(e.pool)
				h = e.mw.Reservation(idempotency.Route{Operation: mode}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					close(entered)
					<-release
					inner.ServeHTTP(w, r)
				}))
			}
			firstDone := make(chan result)
			go func() { firstDone <- do(h, "acme", "busy", `{"amount":7}`) }()
			<-entered
			dup := do(h, "acme", "busy", `{"amount":7}`)
			mustProblem(t, dup, http.StatusConflict)
			if want := []idempotency.InFlight{{Operation: mode, Round: 1}}; !slices.Equal(heard, want) {
				t.Errorf("OnInFlight heard %+v, want %+v", heard, want)
			}
			if dup.header.Get("Retry-After") != "1" {
				t.Errorf("Retry-After %q", dup.header.Get("Retry-After"))
			}
			close(release)
			first := <-firstDone
			after := do(h, "acme", "busy", `{"amount":7}`)
			if first.status != http.StatusCreated || !after.replayed || after.body != first.body {
				t.Fatalf("first %+v, after %+v", first, after)
			}
		})
	}
}

// With Route.Wait a duplicate waits for the first answer instead of 409.
// The first request's handler goes on only once the duplicate has found
// the key held and chosen to wait (Config.OnInFlight), so the duplicate's
// replay can only come from waiting, however slow the machine.
func TestWaitForTheFirstRequest(t *testing.T) {
	t.Parallel()
	inFlight := map[string]chan idempotency.InFlight{
		"transactional": make(chan idempotency.InFlight, 1),
		"reservation":   make(chan idempotency.InFlight, 1),
	}
	e := newEnv(t, 2, idempotency.Config{LockTimeout: 10 * time.Millisecond, PollInterval: 5 * time.Millisecond,
		OnInFlight: func(f idempotency.InFlight) {
			select { // the first one is enough; later polls need not be heard
			case inFlight[f.Operation] <- f:
			default:
			}
		}})
	for _, mode := range []string{"transactional", "reservation"} {
		t.Run(mode, func(t *testing.T) {
			entered, release := make(chan struct{}), make(chan struct{})
			rt := idempotency.Route{Operation: mode, Wait: 10 * time.Second}
			var h http.Handler
			if mode == "transactional" {
				h = e.mw.Transactional(rt, func(w http.ResponseWriter, r *http.Request, tx pgx.Tx) {
					close(entered)
					<-release
					effectTx(w, r, tx)
				})
			} else {
				inner := effectPlain(e.pool)
				h = e.mw.Reservation(rt, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					close(entered)
					<-release
					inner.ServeHTTP(w, r)
				}))
			}
			firstDone, dupDone := make(chan result), make(chan result)
			go func() { firstDone <- do(h, "acme", "wait", `{"amount":9}`) }()
			<-entered
			go func() { dupDone <- do(h, "acme", "wait", `{"amount":9}`) }()
			if f := <-inFlight[mode]; !f.Waiting || f.Round != 1 {
				t.Errorf("the duplicate's first try: %+v, want round 1, waiting", f)
			}
			close(release)
			first, dup := <-firstDone, <-dupDone
			if first.status != http.StatusCreated || dup.status != http.StatusCreated || !dup.replayed || dup.body != first.body {
				t.Fatalf("first %+v, waiting duplicate %+v", first, dup)
			}
		})
	}
}

// Past its retention a key is unused again, whatever its old request was.
func TestExpiredKeyRunsAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2, idempotency.Config{})
	for _, h := range e.bothModes() {
		if r := do(h, "acme", "old", `{"amount":1}`); r.status != http.StatusCreated {
			t.Fatal(r)
		}
		if _, err := e.pool.Exec(context.Background(), `UPDATE idempotency_requests SET expires_at = now() - interval '1 second'`); err != nil {
			t.Fatal(err)
		}
		if r := do(h, "acme", "old", `{"amount":2}`); r.status != http.StatusCreated || r.replayed || !strings.Contains(r.body, `"attempt":2`) {
			t.Fatalf("expired key: %+v", r)
		}
	}
	e.mustRows(t, 4, -1, "expired keys run again")
}

func TestPurgeDeletesExpiredInBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, 2, idempotency.Config{PurgeBatch: 7, Lease: time.Minute})
	h := e.mw.Transactional(route, effectTx)
	for i := range 25 {
		if r := do(h, "acme", fmt.Sprint("k", i), `{"amount":1}`); r.status != http.StatusCreated {
			t.Fatal(r)
		}
	}
	// 20 expired answers, plus one running reservation past its retention
	// but inside its lease (as if the clock had jumped): it must survive.
	if _, err := e.pool.Exec(ctx, `UPDATE idempotency_requests SET expires_at = now() - interval '1 hour'
		WHERE idem_key NOT IN ('k0','k1','k2','k3','k4')`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `INSERT INTO idempotency_requests
		(tenant_id, operation, idem_key, fingerprint, status, lease_until, expires_at)
		VALUES ('acme', 'op', 'running', '\x00', 'running', now() + interval '1 hour', now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE idempotency_requests SET lease_until = now() - interval '1 second',
		expires_at = now() - interval '2 seconds' WHERE idem_key = 'running'`); err == nil {
		t.Fatal("CHECK allowed expires_at before lease_until")
	}
	n, err := e.mw.Purge(ctx)
	if err != nil || n != 20 {
		t.Fatalf("purged %d, %v; want 20", n, err)
	}
	if left := e.keys(t); left != 6 {
		t.Fatalf("%d keys left, want 6", left)
	}
	if n, err := e.mw.Purge(ctx); err != nil || n != 0 {
		t.Fatalf("second purge: %d, %v", n, err)
	}
	// RunPurger stops with its context.
	cctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { e.mw.RunPurger(cctx); close(stopped) }()
	cancel()
	testutil.FinishWithin(t, 5*time.Second, "RunPurger", func() { <-stopped })
}

func TestConfig(t *testing.T) {
	t.Parallel()
	if _, err := idempotency.New(nil, idempotency.Config{Tenant: tenantFromHeader}); err == nil {
		t.Error("nil db accepted")
	}
	for name, cfg := range map[string]idempotency.Config{
		"no tenant":             {},
		"retention below lease": {Tenant: tenantFromHeader, Lease: time.Hour, Retention: time.Minute},
		"bad header":            {Tenant: tenantFromHeader, StoreHeaders: []string{"X Bad"}},
		"negative lock":         {Tenant: tenantFromHeader, LockTimeout: -1},
		"negative lost write":   {Tenant: tenantFromHeader, LostWriteRetry: -time.Second},
	} {
		var ce *idempotency.ConfigError
		if err := cfg.WithDefaults().Validate(); !errors.As(err, &ce) {
			t.Errorf("%s: %v", name, err)
		}
	}
	d := idempotency.Config{Tenant: tenantFromHeader}.WithDefaults()
	if d.Retention != 24*time.Hour || d.Lease != 30*time.Second || d.LostWriteRetry != 10*time.Second || d.Validate() != nil {
		t.Errorf("defaults: %+v", d)
	}
	// A long lease raises the default retention with it.
	if c := (idempotency.Config{Lease: 48 * time.Hour}).WithDefaults(); c.Retention != 48*time.Hour {
		t.Errorf("retention %v under a 48h lease", c.Retention)
	}
	if p := d.Policy(); !strings.Contains(p, "24h0m0s") || !strings.Contains(p, "30s") {
		t.Errorf("policy: %s", p)
	}
	defer func() {
		if recover() == nil {
			t.Error("route without an operation accepted")
		}
	}()
	mw, _ := idempotency.New(pgxPoolStub{}, idempotency.Config{Tenant: tenantFromHeader})
	mw.Transactional(idempotency.Route{}, effectTx)
}

// pgxPoolStub satisfies DB for tests that never reach the database.
type pgxPoolStub struct{ idempotency.DB }

// The short lock_timeout that bounds a duplicate's wait must not leak into
// the handler's own statements.
func TestHandlerKeepsItsLockTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2, idempotency.Config{LockTimeout: 7 * time.Millisecond})
	var session, inHandler string
	if err := e.pool.QueryRow(context.Background(), `SHOW lock_timeout`).Scan(&session); err != nil {
		t.Fatal(err)
	}
	h := e.mw.Transactional(route, func(w http.ResponseWriter, r *http.Request, tx pgx.Tx) {
		if err := tx.QueryRow(r.Context(), `SHOW lock_timeout`).Scan(&inHandler); err != nil {
			t.Error(err)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	if r := do(h, "acme", "lt", `{}`); r.status != http.StatusNoContent {
		t.Fatal(r)
	}
	if inHandler != session {
		t.Fatalf("handler ran with lock_timeout %q, the session has %q", inHandler, session)
	}
}

// While one request re-uses an expired key (its takeover uncommitted), a
// duplicate is told 409, not an error, and then gets the new answer.
func TestExpiredKeyTakeoverInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 4, idempotency.Config{LockTimeout: 20 * time.Millisecond})
	entered, release := make(chan struct{}), make(chan struct{})
	var slow atomic.Bool
	h := e.mw.Transactional(route, func(w http.ResponseWriter, r *http.Request, tx pgx.Tx) {
		if slow.Load() {
			close(entered)
			<-release
		}
		effectTx(w, r, tx)
	})
	if r := do(h, "acme", "re", `{"amount":1}`); r.status != http.StatusCreated {
		t.Fatal(r)
	}
	if _, err := e.pool.Exec(context.Background(), `UPDATE idempotency_requests SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	slow.Store(true)
	firstDone := make(chan result)
	go func() { firstDone <- do(h, "acme", "re", `{"amount":2}`) }()
	<-entered
	mustProblem(t, do(h, "acme", "re", `{"amount":2}`), http.StatusConflict)
	close(release)
	first := <-firstDone
	slow.Store(false)
	after := do(h, "acme", "re", `{"amount":2}`)
	if first.status != http.StatusCreated || !strings.Contains(first.body, `"attempt":2`) || !after.replayed || after.body != first.body {
		t.Fatalf("takeover %+v, after %+v", first, after)
	}
}

// TestAbandonedFailureIsNotStored: a client that hangs up while the handler
// runs makes the handler's next query fail with the canceled context (pgx
// refuses it before touching the transaction, which stays usable). The
// 500 that follows reached no one; stored, it would answer every retry of
// the key with a failure and the charge would never happen. Nothing is
// stored, and the retry runs the handler: one effect, a 201.
func TestAbandonedFailureIsNotStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 4, idempotency.Config{Lease: time.Minute})
	var runs atomic.Int32
	started := make(chan struct{}, 1)
	// Every run but the first is the ordinary handler; the first waits
	// for its client to go.
	gate := func(r *http.Request) {
		if runs.Add(1) == 1 {
			started <- struct{}{}
			<-r.Context().Done()
		}
	}
	txHandler := func(w http.ResponseWriter, r *http.Request, tx pgx.Tx) {
		gate(r)
		effectTx(w, r, tx)
	}
	plain := effectPlain(e.pool)
	for _, tc := range []struct {
		name string
		h    http.Handler
	}{
		{"transactional", e.mw.Transactional(route, txHandler)},
		{"reservation", e.mw.Reservation(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			gate(r)
			plain.ServeHTTP(w, r)
		}))},
	} {
		runs.Store(0)
		key := "abandoned-" + tc.name
		ctx, cancel := context.WithCancel(context.Background())
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/effects", strings.NewReader(`{"amount":180}`))
		req.Header.Set("X-Tenant", "acme")
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() { defer close(done); tc.h.ServeHTTP(rec, req) }()
		<-started
		cancel()
		<-done
		if rec.Code != http.StatusInternalServerError {
			t.Fatalf("%s: abandoned request answered %d, want the handler's 500", tc.name, rec.Code)
		}
		again := do(tc.h, "acme", key, `{"amount":180}`)
		if again.status != http.StatusCreated || again.replayed {
			t.Fatalf("%s: retry after an abandoned 500 got %d (replayed %v): %s", tc.name, again.status, again.replayed, again.body)
		}
		if n := e.count(t, `SELECT count(*) FROM effects WHERE key = $1`, key); n != 1 {
			t.Fatalf("%s: %d effects, want 1", tc.name, n)
		}
		if third := do(tc.h, "acme", key, `{"amount":180}`); third.status != http.StatusCreated || !third.replayed || third.body != again.body {
			t.Fatalf("%s: third request %d replayed=%v, want the stored 201", tc.name, third.status, third.replayed)
		}
	}
}
