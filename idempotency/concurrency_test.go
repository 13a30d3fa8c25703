package idempotency_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

// Many simultaneous requests with one key at a small pool: exactly one
// execution, and every caller gets that execution's answer (first or
// replayed) or a 409. Run under -race.
func TestConcurrentDuplicatesExecuteOnce(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"transactional", "reservation"} {
		for _, n := range []int{20, 500} {
			t.Run(fmt.Sprintf("%s/%d", mode, n), func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, 4, idempotency.Config{})
				var h http.Handler = e.mw.Transactional(route, effectTx)
				if mode == "reservation" {
					h = e.mw.Reservation(route, effectPlain(e.pool))
				}
				var results []result
				testutil.FinishWithin(t, 2*time.Minute, "concurrent requests", func() {
					results = fire(h, n, "acme", "one-key", `{"amount":1000}`)
				})
				e.mustRows(t, 1, -1, "executions for one key")
				checkOneAnswer(t, results)
			})
		}
	}
}

func checkOneAnswer(t *testing.T, results []result) {
	t.Helper()
	var body string
	counts := map[string]int{}
	for _, r := range results {
		switch {
		case r.status == http.StatusCreated:
			if body == "" {
				body = r.body
			}
			if r.body != body {
				t.Fatalf("two different answers: %s and %s", body, r.body)
			}
			if r.replayed {
				counts["replayed"]++
			} else {
				counts["first"]++
			}
		case r.status == http.StatusConflict:
			counts["409"]++
		default:
			t.Fatalf("unexpected answer %d %s", r.status, r.body)
		}
	}
	if counts["first"] != 1 {
		t.Fatalf("%d first answers, want 1 (%v)", counts["first"], counts)
	}
	t.Logf("answers: %v", counts)
}

// A request never takes a second connection while it holds one: with a
// pool of one, concurrent requests (duplicates and distinct keys, both
// modes, a reservation handler that itself uses the pool) all finish.
func TestPoolOfOneDoesNotDeadlock(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1, idempotency.Config{})
	tx := e.mw.Transactional(idempotency.Route{Operation: "tx", Wait: 30 * time.Second}, effectTx)
	res := e.mw.Reservation(idempotency.Route{Operation: "res", Wait: 30 * time.Second}, effectPlain(e.pool))
	testutil.FinishWithin(t, time.Minute, "requests on a pool of one", func() {
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h := tx
				if i%2 == 1 {
					h = res
				}
				key := fmt.Sprint("k", i%4)
				if r := do(h, "acme", key, `{"amount":1}`); r.status != http.StatusCreated {
					t.Errorf("request %d: %d %s", i, r.status, r.body)
				}
			}()
		}
		wg.Wait()
	})
	// Keys k0..k3: even i use tx with k0/k2, odd i use res with k1/k3.
	e.mustRows(t, 4, -1, "executions")
}
