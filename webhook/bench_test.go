package webhook_test

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkDeliver measures signed deliveries through the HTTP handler on
// a real database: "first" is a new effect each time (effect, order,
// notification intent, outbox row, River job, log row: one transaction),
// "duplicate" the same event again (effect conflict, log row). Serial runs
// one delivery at a time; parallel runs GOMAXPROCS*4 senders on a pool of 8.
func BenchmarkDeliver(b *testing.B) {
	for _, mode := range []string{"serial", "parallel"} {
		b.Run("first/"+mode, func(b *testing.B) {
			h := newHarness(b, &harnessOpts{maxConns: 8})
			var n atomic.Int64
			body := func() []byte {
				i := strconv.FormatInt(n.Add(1), 10)
				return paid("evt_"+i, "pi_"+i, "ord-"+i, t0)
			}
			run(b, mode, func() {
				if r := h.post(body()); r.status != http.StatusOK || r.verdict() != "processed" {
					b.Errorf("%d %s", r.status, r.body)
				}
			})
		})
		b.Run("duplicate/"+mode, func(b *testing.B) {
			h := newHarness(b, &harnessOpts{maxConns: 8})
			body := paid("evt_1", "pi_1", "ord-1", t0)
			h.expect(body, http.StatusOK, "processed")
			run(b, mode, func() {
				if r := h.post(body); r.status != http.StatusOK || r.verdict() != "duplicate" {
					b.Errorf("%d %s", r.status, r.body)
				}
			})
		})
	}
}

func run(b *testing.B, mode string, deliver func()) {
	b.ReportAllocs()
	start := time.Now()
	if mode == "serial" {
		for b.Loop() {
			deliver()
		}
	} else {
		b.SetParallelism(4)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				deliver()
			}
		})
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "deliveries/s")
}
