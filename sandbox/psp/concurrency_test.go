package psp_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/sandbox/psp"
)

// The proof: 20, then 500, simultaneous requests with one key at a
// pool of 4 connections create exactly one charge, and every caller gets
// that charge (201 first or replayed) or a 409; nothing deadlocks.
func TestSimultaneousRequestsOneKeyOneCharge(t *testing.T) {
	t.Parallel()
	srv, _, _ := newPSP(t, 4, psp.Config{})
	h := srv.Handler()
	for _, n := range []int{20, 500} {
		key := fmt.Sprintf("order-%d", n)
		var results []result
		testutil.FinishWithin(t, 2*time.Minute, fmt.Sprintf("%d simultaneous requests", n), func() {
			results = fire(h, n, "merchant-1", key, chargeBody)
		})
		var id string
		counts := map[string]int{}
		for _, r := range results {
			switch r.status {
			case http.StatusCreated:
				c := r.charge(t)
				if id == "" {
					id = c.ID
				}
				if c.ID != id || c.IdempotencyKey != key || c.Status != "paid" {
					t.Fatalf("callers got different charges: %s and %+v", id, c)
				}
				if r.replayed {
					counts["replayed"]++
				} else {
					counts["created"]++
				}
			case http.StatusConflict:
				if r.header.Get("Retry-After") == "" {
					t.Fatal("409 without Retry-After")
				}
				counts["409"]++
			default:
				t.Fatalf("unexpected answer %d %s", r.status, r.body)
			}
		}
		if counts["created"] != 1 {
			t.Fatalf("%d callers saw a new charge, want 1 (%v)", counts["created"], counts)
		}
		t.Logf("%d callers: %v", n, counts)
	}
	if got := len(charges(t, h, "merchant-1")); got != 2 {
		t.Fatalf("%d charges for two keys, want 2", got)
	}
}

// naiveCreate is the same charge handler written check-then-act, the way
// it is often written by hand: look for a charge with the key, and create
// one if there is none. The pause stands for whatever a real handler does
// between the two (a fraud check, a call to the bank): the race exists
// without it, the pause only makes it reliable.
func naiveCreate(pool *pgxpool.Pool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		merchant := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		key := r.Header.Get("Idempotency-Key")
		body, _ := io.ReadAll(r.Body)
		in, apiErr := psp.ParseChargeRequest(body)
		if apiErr != nil {
			http.Error(w, apiErr.Message, apiErr.Status)
			return
		}
		if c, err := psp.ChargeGetByKey(ctx, pool, merchant, key); err == nil { // check
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id":%q}`, c.ID)
			return
		}
		time.Sleep(20 * time.Millisecond)
		c, err := psp.ChargeInsert(ctx, pool, merchant, fmt.Sprint("pix_naive_", time.Now().UnixNano()), key, in) // act
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%q}`, c.ID)
	})
}

// The baseline: the naive handler under the same test creates more than
// one charge for one key. This is what shows that the test above can fail.
func TestNaiveCheckThenActDuplicates(t *testing.T) {
	t.Parallel()
	srv, pool, _ := newPSP(t, 4, psp.Config{})
	naive := naiveCreate(pool)
	dups := 0
	for try := 0; try < 3 && dups <= 1; try++ {
		merchant := fmt.Sprint("naive-", try)
		testutil.FinishWithin(t, time.Minute, "naive requests", func() {
			fire(naive, 20, merchant, "order-1", chargeBody)
		})
		dups = len(charges(t, srv.Handler(), merchant))
	}
	if dups <= 1 {
		t.Fatalf("the naive check-then-act handler created %d charge(s) for one key; the concurrency test would not catch a race", dups)
	}
	t.Logf("naive handler: %d charges for one key from 20 simultaneous requests", dups)
}
