package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/ledger"
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

// BenchmarkLoneCall splits a lone first execution (one caller, the no-op
// tool, no provider round trip) into what it is made of, and measures
// each part against two single-row commits, the least a claim before the
// call and its outcome after it cost:
//
//   - execute: Executor.Execute, group commit on (the default);
//   - alone: the same with GroupCommit 1 (no grouper in the path);
//   - statements: the ledger's statements as the executor sends them (the
//     fresh claim in one batch, the plan settings and the asynchronous
//     completion in another), queued by the test
//     itself: the database's share and the driver's, without the executor;
//   - two commits: two INSERT ... ON CONFLICT DO NOTHING of a new key,
//     each its own transaction.
//
// All four share one connection and run interleaved in blocks of 16 calls,
// each block's first call unrecorded: a shared machine moves too much
// between runs seconds apart for separate runs to compare, and call by
// call the two commits would pay for the completion's WAL flush that
// execute leaves to the next commit. It reports each part's p50 and the
// benchmark process's CPU per call, and p50 ratios to two commits.
//
//	go test ./executor -run '^$' -bench LoneCall -benchtime 4000x -count 3
func BenchmarkLoneCall(b *testing.B) {
	e := newEnv(b, &envOpts{poolSize: 1, extra: []tools.Tool{noop}})
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `CREATE TABLE floor (k text PRIMARY KEY)`); err != nil {
		b.Fatal(err)
	}
	cfg := e.ex.Config()
	cfg.GroupCommit = 1
	alone, err := executor.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	run := time.Now().UnixNano()
	call := func(part string, i int) executor.Call {
		return executor.Call{Tenant: "t1", Ref: fmt.Sprintf("r%d-%s-%d", run, part, i), Action: "noop.run",
			Fields: map[string]any{"customer_id": "c1", "amount": "180,00"}}
	}
	execute := func(ex *executor.Executor, part string) func(int) error {
		return func(i int) error {
			out, err := ex.Execute(ctx, call(part, i), nil)
			if err == nil && out.Status != executor.StatusCompleted {
				err = fmt.Errorf("status %s", out.Status)
			}
			return err
		}
	}
	resp := `{}`
	parts := []struct {
		name string
		op   func(int) error
	}{
		{"execute", execute(e.ex, "x")},
		{"alone", execute(alone, "a")},
		{"statements", func(i int) error {
			c := call("s", i)
			x, err := e.store.Extract(intent.FreezeParams{Tenant: c.Tenant, Ref: c.Ref, Action: c.Action, Fields: c.Fields})
			if err != nil {
				return err
			}
			row := &ledger.NewIntent{ID: ledger.ID{Tenant: c.Tenant, Ref: c.Ref, Action: c.Action},
				Version: x.Result.Version, Payload: x.Result.Payload, Key: x.Result.Key}
			bt := &pgx.Batch{}
			fs := ledger.QueueFreshClaims(bt, []*ledger.NewIntent{row}, []string{"owner-1"}, 30*time.Second)
			if err := e.pool.SendBatch(ctx, bt).Close(); err != nil {
				return err
			}
			done := &ledger.Completion{Tenant: c.Tenant, Key: row.Key, Owner: "owner-1", Attempt: int32(fs[0].Attempt), Status: "completed", Response: &resp}
			bt = &pgx.Batch{}
			ledger.QueueCompletePlans(bt)
			ledger.QueueComplete(bt, done, true)
			if err := e.pool.SendBatch(ctx, bt).Close(); err != nil {
				return err
			}
			if !done.Matched {
				return fmt.Errorf("completion of %s matched nothing", c.Ref)
			}
			return nil
		}},
		{"two commits", func(i int) error {
			k := fmt.Sprintf("%d-%d", run, i)
			if _, err := e.pool.Exec(ctx, `INSERT INTO floor (k) VALUES ($1) ON CONFLICT DO NOTHING`, k); err != nil {
				return err
			}
			_, err := e.pool.Exec(ctx, `INSERT INTO floor (k) VALUES ($1) ON CONFLICT DO NOTHING`, k+"-done")
			return err
		}},
	}
	const block = 16
	lat := make([][]time.Duration, len(parts))
	cpu := make([]time.Duration, len(parts))
	calls := make([]int, len(parts))
	next := make([]int, len(parts))
	runBlock := func(p int, record bool) {
		c0 := processCPU()
		for j := range block {
			t0 := time.Now()
			if err := parts[p].op(next[p]); err != nil {
				b.Fatalf("%s: %v", parts[p].name, err)
			}
			if record && j > 0 {
				lat[p] = append(lat[p], time.Since(t0))
			}
			next[p]++
		}
		if record {
			cpu[p] += processCPU() - c0
			calls[p] += block
		}
	}
	for p := range parts { // prepare every statement, past the plan cache's custom plans
		runBlock(p, false)
	}
	b.ResetTimer()
	for i := 0; i*(block-1) < b.N; i++ {
		for k := range parts {
			runBlock((i+k)%len(parts), true)
		}
	}
	b.StopTimer()
	p50 := make([]float64, len(parts))
	for p, l := range lat {
		slices.Sort(l)
		p50[p] = float64(l[len(l)/2].Microseconds())
		b.ReportMetric(p50[p], "µs-p50-"+strings.ReplaceAll(parts[p].name, " ", "-"))
		b.ReportMetric(float64(cpu[p].Microseconds())/float64(calls[p]), "µs-cpu-"+strings.ReplaceAll(parts[p].name, " ", "-"))
	}
	last := len(parts) - 1
	for p := range last {
		b.ReportMetric(p50[p]/p50[last], strings.ReplaceAll(parts[p].name, " ", "-")+"/two-commits")
	}
}

// processCPU is this process's CPU time so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
