package idempotency_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/idempotency"
)

// The benchmarks measure the middleware's own cost on the local
// PostgreSQL: a handler that writes one row, driven in-process (no HTTP
// transport) from GOMAXPROCS goroutines on a pool of 8. Compare
// BenchmarkNoMiddleware for the handler alone.

func benchHandler(w http.ResponseWriter, r *http.Request, tx pgx.Tx) {
	if _, err := tx.Exec(r.Context(), `INSERT INTO effects (tenant, key, amount) VALUES ('b', 'k', 1)`); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	w.Write([]byte(`{"id":"ch_0123456789abcdef","amount_cents":1000,"status":"paid"}`))
}

// benchRoute is the route in mode, on a fresh schema.
func benchRoute(b *testing.B, mode string) http.Handler {
	e := newEnv(b, 8, idempotency.Config{})
	if mode == "reservation" {
		return e.mw.Reservation(route, effectPlain(e.pool))
	}
	return e.mw.Transactional(route, benchHandler)
}

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// First requests: a new key every time (reserve + handler + store + commit).
func BenchmarkFirstRequest(b *testing.B) {
	for _, mode := range []string{"transactional", "reservation"} {
		b.Run(mode, func(b *testing.B) {
			h := benchRoute(b, mode)
			var n atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if r := do(h, "bench", fmt.Sprint("first-", n.Add(1)), `{"amount":1}`); r.status != http.StatusCreated {
						b.Fatalf("%d %s", r.status, r.body)
					}
				}
			})
			reportRate(b)
		})
	}
}

// Replays: one key, answered from the stored row every time.
func BenchmarkReplay(b *testing.B) {
	for _, mode := range []string{"transactional", "reservation"} {
		b.Run(mode, func(b *testing.B) {
			h := benchRoute(b, mode)
			if r := do(h, "bench", "replayed", `{"amount":1}`); r.status != http.StatusCreated {
				b.Fatal(r)
			}
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if r := do(h, "bench", "replayed", `{"amount":1}`); !r.replayed {
						b.Fatalf("%d %s", r.status, r.body)
					}
				}
			})
			reportRate(b)
		})
	}
}

// The same handler in a plain transaction, without the middleware.
func BenchmarkNoMiddleware(b *testing.B) {
	e := newEnv(b, 8, idempotency.Config{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, err := e.pool.Begin(r.Context())
		if err != nil {
			b.Fatal(err)
		}
		benchHandler(w, r, tx)
		if err := tx.Commit(r.Context()); err != nil {
			b.Fatal(err)
		}
	})
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			do(h, "bench", "", `{"amount":1}`)
		}
	})
	reportRate(b)
}
