package ledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// BenchmarkFreshClaimForms compares, on one connection and interleaved
// call by call (so that a noisy machine moves both alike), the fresh claim
// of one extraction as a lone call sends it (intentActionClaimNew, scalars)
// against the group form it used to send (intentActionClaimNewMany over
// one-element arrays), each a batch of its own as the executor sends it.
// It reports each form's mean time per claim and their ratio.
//
//	go test ./internal/ledger -run '^$' -bench FreshClaimForms -count 5
func BenchmarkFreshClaimForms(b *testing.B) {
	pool, _ := pgtest.Schema(b, &pgtest.Opts{MaxConns: 1})
	ctx := context.Background()
	p := derive.Payload{{Name: "amount", Value: "18000"}, {Name: "customer_id", Value: "c1"},
		{Name: "invoice", Value: "NF-123"}, {Name: "pix_key", Value: "52998224725"}}
	run := time.Now().UnixNano()
	claim := func(i int, scalar bool) {
		r := row("t1", fmt.Sprintf("r%d-%d-%t", run, i, scalar), "pix.charge", p, "")
		bt := &pgx.Batch{}
		var fs []FreshClaim
		if scalar {
			fs = QueueFreshClaims(bt, []*NewIntent{r}, []string{"owner-1"}, 30*time.Second)
		} else {
			fs = make([]FreshClaim, 1)
			args, _ := freezeArgs([]*NewIntent{r})
			bt.Queue(intentActionClaimNewMany, append(args, []string{"owner-1"}, micros(30*time.Second))...).Query(func(rs pgx.Rows) error {
				for rs.Next() {
					fs[0].Attempt = 1
				}
				return rs.Err()
			})
		}
		if err := pool.SendBatch(ctx, bt).Close(); err != nil {
			b.Fatal(err)
		}
		if fs[0].Attempt != 1 {
			b.Fatalf("claim %d (scalar %t): %+v", i, scalar, fs[0])
		}
	}
	for i := range 20 { // prepare both, past the plan cache's custom plans
		claim(-1-2*i, true)
		claim(-2-2*i, false)
	}
	var scalarT, arrayT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		first := i%2 == 0
		for _, scalar := range []bool{first, !first} {
			t := time.Now()
			claim(i, scalar)
			if scalar {
				scalarT += time.Since(t)
			} else {
				arrayT += time.Since(t)
			}
		}
	}
	b.ReportMetric(float64(scalarT.Microseconds())/float64(b.N), "µs/scalar")
	b.ReportMetric(float64(arrayT.Microseconds())/float64(b.N), "µs/array")
	b.ReportMetric(float64(scalarT)/float64(arrayT), "scalar/array")
}
