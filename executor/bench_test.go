package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/tools"
)

// noop is a tool that does nothing, so a benchmark measures only what
// retrysafe adds: freeze + claim (one round trip, one commit) and the
// fenced completion (one round trip, one commit); a replay is one round trip.
var noop = &tools.Func{ToolName: "noop.run", HonoursKey: true,
	Fields: derive.Schema{Action: "noop.run", Version: 2, Fields: []derive.Field{
		{Name: "customer_id", Rule: derive.RuleText},
		{Name: "amount", Rule: derive.RuleMoney},
		{Name: tools.RefField, Rule: derive.RuleRef},
	}},
	Exec: func(context.Context, string, derive.Payload) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	}}

const benchPool = 8

func runBench(b *testing.B, conc int, call func(i int64) executor.Call, ex *executor.Executor, wantReplay bool) {
	var (
		next int64 = -1
		mu   sync.Mutex
		lats = make([]time.Duration, 0, b.N)
		wg   sync.WaitGroup
	)
	b.ResetTimer()
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, b.N/conc+1)
			for {
				i := atomic.AddInt64(&next, 1)
				if i >= int64(b.N) {
					break
				}
				t0 := time.Now()
				out, err := ex.Execute(context.Background(), call(i), nil)
				local = append(local, time.Since(t0))
				if err != nil || out.Status != executor.StatusCompleted || out.Replayed != wantReplay {
					b.Errorf("execution %d: %+v %v", i, out, err)
					return
				}
			}
			mu.Lock()
			lats = append(lats, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	pct := func(p float64) float64 {
		if len(lats) == 0 {
			return 0
		}
		return float64(lats[int(p*float64(len(lats)-1))].Microseconds()) / 1000
	}
	unit := "exec/s"
	if wantReplay {
		unit = "replays/s"
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), unit)
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// BenchmarkExecute: first executions (freeze + claim + no-op + complete)
// at 1, 8 and 32 concurrent callers on a pool of 8.
func BenchmarkExecute(b *testing.B) {
	for _, conc := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("callers=%d", conc), func(b *testing.B) {
			e := newEnv(b, &envOpts{poolSize: benchPool, extra: []tools.Tool{noop}})
			run := time.Now().UnixNano()
			runBench(b, conc, func(i int64) executor.Call {
				return executor.Call{Tenant: "t1", Ref: fmt.Sprintf("r%d-%d", run, i), Action: "noop.run",
					Fields: map[string]any{"customer_id": "c1", "amount": "180,00"}}
			}, e.ex, false)
		})
	}
}

// BenchmarkReplay: executions of an already completed intent.
func BenchmarkReplay(b *testing.B) {
	for _, conc := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("callers=%d", conc), func(b *testing.B) {
			e := newEnv(b, &envOpts{poolSize: benchPool, extra: []tools.Tool{noop}})
			call := executor.Call{Tenant: "t1", Ref: "r1", Action: "noop.run",
				Fields: map[string]any{"customer_id": "c1", "amount": "180,00"}}
			if _, err := e.ex.Execute(context.Background(), call, nil); err != nil {
				b.Fatal(err)
			}
			runBench(b, conc, func(int64) executor.Call { return call }, e.ex, true)
		})
	}
}
