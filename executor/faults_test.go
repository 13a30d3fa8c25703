package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

// The provider matrix: each fault, with inline retries and with NoWait
// (left to the reconciler). Charges at the PSP are always 0 or 1 per intent,
// final states follow the state table, and after the reconciler runs no
// action is left started.
func TestProviderMatrix(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &envOpts{cfg: func(c *executor.Config) {
		c.Lease, c.Timeout, c.LeaseMargin = 800*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
		c.MaxAttempts = 6
	}})
	e.psp.SlowDelay = 400 * time.Millisecond
	first := func(n int) bool { return n == 1 }
	always := func(int) bool { return true }
	cases := []struct {
		name    string
		fault   toolstest.Fault
		pick    func(int) bool
		noWait  bool
		status  executor.Status // after Execute
		final   executor.Status // after the reconciler
		charges int
	}{
		{"500-before-executing", toolstest.FailBefore, first, false, executor.StatusCompleted, executor.StatusCompleted, 1},
		// Every attempt answered 500 and a Lookup by key found nothing:
		// certain that nothing was charged, so failed, not review.
		{"500-always", toolstest.FailBefore, always, false, executor.StatusFailed, executor.StatusFailed, 0},
		{"dropped-response-after-executing", toolstest.DropAfter, first, false, executor.StatusCompleted, executor.StatusCompleted, 1},
		{"slow-beyond-timeout", toolstest.Slow, first, false, executor.StatusCompleted, executor.StatusCompleted, 1},
		{"definitive-422", toolstest.Reject, always, false, executor.StatusFailed, executor.StatusFailed, 0},
		{"429-rate-limited", toolstest.RateLimit, first, false, executor.StatusCompleted, executor.StatusCompleted, 1},
		{"nowait/500-before-executing", toolstest.FailBefore, first, true, executor.StatusInFlight, executor.StatusCompleted, 1},
		{"nowait/dropped-response", toolstest.DropAfter, first, true, executor.StatusInFlight, executor.StatusCompleted, 1},
		{"nowait/slow-beyond-timeout", toolstest.Slow, first, true, executor.StatusInFlight, executor.StatusCompleted, 1},
		{"nowait/definitive-422", toolstest.Reject, always, true, executor.StatusFailed, executor.StatusFailed, 0},
	}
	var faults []toolstest.FaultFunc
	for i, c := range cases {
		faults = append(faults, refFault(fmt.Sprintf("inv-m%d", i), c.fault, c.pick))
	}
	e.psp.SetFault(func(r toolstest.Request) toolstest.Fault {
		for _, f := range faults {
			if x := f(r); x != toolstest.None {
				return x
			}
		}
		return toolstest.None
	})
	outs := make([]*executor.Outcome, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := e.ex.Execute(context.Background(), pixCall("t1", fmt.Sprintf("inv-m%d", i), extraction(i, testutil.CPF(1000+i))),
				&executor.Opts{NoWait: c.noWait})
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
				return
			}
			outs[i] = out
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, c := range cases {
		if outs[i].Status != c.status {
			t.Errorf("%s: status %s, want %s (failure %+v)", c.name, outs[i].Status, c.status, outs[i].Failure)
		}
	}
	// Let the leases expire, then reconcile until nothing is started.
	reconcileAll(t, e)
	for i, c := range cases {
		a, err := executor.Get(context.Background(), e.pool, "t1", outs[i].Key)
		if err != nil {
			t.Fatal(err)
		}
		if got := executor.Status(a.Status); got != c.final && !(a.Status == executor.RowStarted && c.final == executor.StatusInFlight) {
			t.Errorf("%s: final %s, want %s (failure %+v)", c.name, a.Status, c.final, a.Failure)
		}
		if n := e.psp.CountKey(outs[i].Key); n != c.charges {
			t.Errorf("%s: %d charges at the PSP, want %d", c.name, n, c.charges)
		}
		t.Logf("%-34s execute=%-9s final=%-9s attempts=%d charges=%d", c.name, outs[i].Status, a.Status, a.Attempt, e.psp.CountKey(outs[i].Key))
	}
	if n := countStatus(t, e.pool, executor.RowStarted); n != 0 {
		t.Fatalf("%d actions left started", n)
	}
}

// reconcileAll runs reconciler passes until no action is started.
func reconcileAll(t *testing.T, e *env) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if countStatus(t, e.pool, executor.RowStarted) == 0 {
			return
		}
		if _, err := e.ex.ReconcileOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%d actions still started", countStatus(t, e.pool, executor.RowStarted))
}

// crashingTool simulates a worker process dying inside the call (before or
// after the provider acted): runtime.Goexit unwinds the executing goroutine
// without letting the executor record anything.
type crashingTool struct {
	*tools.PixCharge
	crashBefore atomic.Bool
	crashAfter  atomic.Bool
}

func (c *crashingTool) Execute(ctx context.Context, key string, p derive.Payload) (json.RawMessage, error) {
	if c.crashBefore.CompareAndSwap(true, false) {
		runtime.Goexit()
	}
	resp, err := c.PixCharge.Execute(ctx, key, p)
	if c.crashAfter.CompareAndSwap(true, false) {
		runtime.Goexit()
	}
	return resp, err
}

func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	for _, after := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash-after-provider=%v", after), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, &envOpts{cfg: func(c *executor.Config) {
				c.Lease, c.Timeout, c.LeaseMargin = 600*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
			}})
			pix, _ := e.reg.Tool(tools.PixChargeName)
			ct := &crashingTool{PixCharge: pix.(*tools.PixCharge)}
			ct.crashBefore.Store(!after)
			ct.crashAfter.Store(after)
			reg, _ := tools.NewRegistry(ct)
			crashing := e.another(t, "doomed", func(c *executor.Config) { c.Tools = reg })

			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = crashing.Execute(context.Background(), pixCall("t1", "inv-crash", extraction(0, testutil.CPF(8))), nil)
			}()
			<-done
			key := keyOf(t, e, "t1", "inv-crash", extraction(0, testutil.CPF(8)))
			a, err := executor.Get(context.Background(), e.pool, "t1", key)
			if err != nil || a.Status != executor.RowStarted {
				t.Fatalf("after crash: %+v %v", a, err)
			}
			// A redelivery while the lease is live: in flight, no call.
			out, err := e.ex.Execute(context.Background(), pixCall("t1", "inv-crash", extraction(1, testutil.CPF(8))), nil)
			if err != nil || out.Status != executor.StatusInFlight {
				t.Fatalf("during lease: %+v %v", out, err)
			}
			waitExpired(t, e.pool, "t1", key)
			res, err := e.ex.ReconcileOnce(context.Background())
			if err != nil || res.TakenOver != 1 || res.Completed != 1 {
				t.Fatalf("reconcile: %+v %v", res, err)
			}
			if n := e.psp.Count(""); n != 1 {
				t.Fatalf("%d charges", n)
			}
			if after && e.psp.Replays() != 0 {
				t.Fatal("the reconciler called again instead of looking the charge up")
			}
		})
	}
}

// stallTool charges, then stalls past its lease ignoring its context (a
// frozen VM, a GC pause, a tool that does not honour ctx).
type stallTool struct {
	*tools.PixCharge
	stall   time.Duration
	charged chan struct{}
}

func (s *stallTool) Execute(_ context.Context, key string, p derive.Payload) (json.RawMessage, error) {
	resp, err := s.PixCharge.Execute(context.Background(), key, p)
	close(s.charged)
	time.Sleep(s.stall)
	return resp, err
}

// A worker that stalls past its lease loses its completion: the takeover
// settles the action through Lookup, the stalled worker's write is fenced
// (ErrLeaseLost), and the provider saw one charge.
func TestLeaseTakeoverFencesStalledWorker(t *testing.T) {
	t.Parallel()
	for _, via := range []string{"reconciler", "redelivery"} {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, &envOpts{cfg: func(c *executor.Config) {
				c.Lease, c.Timeout, c.LeaseMargin = 500*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
			}})
			pix, _ := e.reg.Tool(tools.PixChargeName)
			st := &stallTool{PixCharge: pix.(*tools.PixCharge), stall: 1500 * time.Millisecond, charged: make(chan struct{})}
			reg, _ := tools.NewRegistry(st)
			stalled := e.another(t, "stalled", func(c *executor.Config) { c.Tools = reg })

			type res struct {
				out *executor.Outcome
				err error
			}
			done := make(chan res, 1)
			go func() {
				out, err := stalled.Execute(context.Background(), pixCall("t1", "inv-stall", extraction(0, testutil.CPF(11))), nil)
				done <- res{out, err}
			}()
			<-st.charged
			key := keyOf(t, e, "t1", "inv-stall", extraction(0, testutil.CPF(11)))
			waitExpired(t, e.pool, "t1", key)

			switch via {
			case "reconciler":
				r, err := e.ex.ReconcileOnce(context.Background())
				if err != nil || r.TakenOver != 1 || r.Completed != 1 {
					t.Fatalf("reconcile: %+v %v", r, err)
				}
			case "redelivery":
				out, err := e.ex.Execute(context.Background(), pixCall("t1", "inv-stall", extraction(3, testutil.CPF(11))), nil)
				if err != nil || out.Status != executor.StatusCompleted || out.Attempt != 2 || out.Replayed {
					t.Fatalf("takeover by redelivery: %+v %v", out, err)
				}
			}
			r := <-done
			if !errors.Is(r.err, executor.ErrLeaseLost) || !executor.IsRetryable(r.err) {
				t.Fatalf("stalled worker: err %v, want ErrLeaseLost", r.err)
			}
			if r.out == nil || r.out.Status != executor.StatusCompleted || r.out.Attempt != 2 {
				t.Fatalf("stalled worker's outcome: %+v", r.out)
			}
			a, _ := executor.Get(context.Background(), e.pool, "t1", key)
			if a.Status != executor.RowCompleted || a.Attempt != 2 || a.LeaseOwner != "" {
				t.Fatalf("row %+v", a)
			}
			if n := e.psp.Count(""); n != 1 || e.psp.Replays() != 0 {
				t.Fatalf("charges %d replays %d: the takeover should have looked the charge up", n, e.psp.Replays())
			}
		})
	}
}

// Many takers race for one expired lease: the compare-and-set lets exactly
// one through.
func TestTakeoverCompareAndSet(t *testing.T) {
	t.Parallel()
	// The lease must outlast the winner's lookup and completion while 100
	// callers queue for 4 connections, or a second takeover is legitimate.
	e := newEnv(t, &envOpts{poolSize: 4, cfg: func(c *executor.Config) {
		c.Lease, c.Timeout, c.LeaseMargin = 3*time.Second, 200*time.Millisecond, 2*time.Second
	}})
	pix, _ := e.reg.Tool(tools.PixChargeName)
	ct := &crashingTool{PixCharge: pix.(*tools.PixCharge)}
	ct.crashBefore.Store(true)
	reg, _ := tools.NewRegistry(ct)
	crashing := e.another(t, "doomed", func(c *executor.Config) { c.Tools = reg })
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = crashing.Execute(context.Background(), pixCall("t1", "inv-cas", extraction(0, testutil.CPF(21))), nil)
	}()
	<-done
	key := keyOf(t, e, "t1", "inv-cas", extraction(0, testutil.CPF(21)))
	waitExpired(t, e.pool, "t1", key)

	workers := make([]*executor.Executor, 8)
	for i := range workers {
		workers[i] = e.another(t, fmt.Sprintf("w%d", i), nil)
	}
	var wg sync.WaitGroup
	var executed atomic.Int64
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := workers[i%len(workers)]
			if i%10 == 0 {
				if _, err := w.ReconcileOnce(context.Background()); err != nil {
					t.Error(err)
				}
				return
			}
			out, err := w.Execute(context.Background(), pixCall("t1", "inv-cas", extraction(i, testutil.CPF(21))), nil)
			if err != nil {
				t.Error(err)
				return
			}
			if out.Status == executor.StatusCompleted && !out.Replayed {
				executed.Add(1)
			}
		}()
	}
	wg.Wait()
	reconcileAll(t, e)
	a, _ := executor.Get(context.Background(), e.pool, "t1", key)
	if a.Status != executor.RowCompleted || a.Attempt != 2 {
		t.Fatalf("row %+v: exactly one takeover expected (attempt 2)", a)
	}
	if e.psp.Count("") != 1 || executed.Load() > 1 {
		t.Fatalf("%d charges, %d executions", e.psp.Count(""), executed.Load())
	}
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	a, err := e.ex.Execute(ctx, pixCall("tenant-a", "inv-1", extraction(0, testutil.CPF(31))), nil)
	if err != nil || a.Status != executor.StatusCompleted {
		t.Fatal(a, err)
	}
	// B knows A's key and tries everything.
	if _, err := e.ex.ExecuteKey(ctx, "tenant-b", a.Key, nil); !errors.Is(err, executor.ErrNotFound) {
		t.Fatalf("B executed A's intent by key: %v", err)
	}
	if _, err := executor.Get(ctx, e.pool, "tenant-b", a.Key); !errors.Is(err, executor.ErrNotFound) {
		t.Fatalf("B read A's action: %v", err)
	}
	if _, err := intent.GetByKey(ctx, e.pool, "tenant-b", a.Key); !errors.Is(err, intent.ErrNotFound) {
		t.Fatalf("B read A's intent: %v", err)
	}
	if l, err := executor.List(ctx, e.pool, executor.ListParams{Tenant: "tenant-b"}); err != nil || len(l) != 0 {
		t.Fatalf("B lists %d actions: %v", len(l), err)
	}
	// B's own intent with the same ref and fields is B's: another key.
	b, err := e.ex.Execute(ctx, pixCall("tenant-b", "inv-1", extraction(0, testutil.CPF(31))), nil)
	if err != nil || b.Key == a.Key || !b.Created || b.Replayed {
		t.Fatalf("B: %+v %v", b, err)
	}
	// A's key still replays for A only.
	again, err := e.ex.ExecuteKey(ctx, "tenant-a", a.Key, nil)
	if err != nil || !again.Replayed || chargeID(t, again.Response) != chargeID(t, a.Response) {
		t.Fatalf("A by key: %+v %v", again, err)
	}
}

// A long call with a heartbeat keeps its lease past Lease; when the lease
// is taken anyway, the heartbeat cancels the call.
func TestHeartbeat(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var calls atomic.Int64
	slow := &tools.Func{ToolName: "report.build", Fields: simpleSchema("report.build"), HonoursKey: true,
		Exec: func(ctx context.Context, key string, _ derive.Payload) (json.RawMessage, error) {
			calls.Add(1)
			select {
			case <-release:
				return json.RawMessage(`{"done":true}`), nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}}
	e := newEnv(t, &envOpts{extra: []tools.Tool{slow}, cfg: func(c *executor.Config) {
		// A beat late by more than Lease - Heartbeat - LeaseMargin ends
		// the call's lease on its own side: 1 s of slack (0.4 s once
		// failed under -race on a slow host, the call cut and retried).
		c.Lease, c.Heartbeat, c.LeaseMargin, c.Timeout = 1500*time.Millisecond, 250*time.Millisecond, 250*time.Millisecond, 10*time.Second
	}})
	ctx := context.Background()
	call := executor.Call{Tenant: "t1", Ref: "r1", Action: "report.build", Fields: map[string]any{"to": "x"}}
	done := make(chan *executor.Outcome, 1)
	go func() {
		out, err := e.ex.Execute(ctx, call, nil)
		if err != nil {
			t.Error(err)
		}
		done <- out
	}()
	// Three leases long: the reconciler must find nothing to take.
	deadline := time.Now().Add(4500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if r, err := e.ex.ReconcileOnce(ctx); err != nil || r.TakenOver != 0 {
			t.Fatalf("reconciler took a heartbeating lease: %+v %v", r, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(release)
	if out := <-done; out == nil || out.Status != executor.StatusCompleted || out.Attempt != 1 {
		t.Fatalf("outcome %+v", out)
	}

	// Now steal the lease under a running call: the next beat cancels it.
	call.Ref = "r2"
	type res struct {
		out *executor.Outcome
		err error
	}
	done2 := make(chan res, 1)
	release = make(chan struct{})
	go func() {
		out, err := e.ex.Execute(ctx, call, &executor.Opts{NoWait: true})
		done2 <- res{out, err}
	}()
	for calls.Load() < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE actions SET attempt = attempt + 1, lease_owner = 'thief' WHERE intent_ref = 'r2'`); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done2:
		if !errors.Is(r.err, executor.ErrLeaseLost) {
			t.Fatalf("call under a stolen lease: %+v %v", r.out, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the heartbeat did not cancel the call")
	}
}

// fakeClock records backoff sleeps and returns at once.
type fakeClock struct {
	mu     sync.Mutex
	sleeps []time.Duration
}

func (c *fakeClock) Now() time.Time { return time.Now() }
func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.sleeps = append(c.sleeps, d)
	c.mu.Unlock()
	return ctx.Err()
}

func TestBackoffWithJitter(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{}
	e := newEnv(t, &envOpts{cfg: func(c *executor.Config) {
		c.Clock, c.MaxAttempts, c.BackoffBase, c.BackoffMax = clock, 5, 100*time.Millisecond, 300*time.Millisecond
	}})
	e.psp.SetFault(refFault("inv-b", toolstest.FailBefore, func(n int) bool { return n < 5 }))
	out, err := e.ex.Execute(context.Background(), pixCall("t1", "inv-b", extraction(0, testutil.CPF(41))), nil)
	if err != nil || out.Status != executor.StatusCompleted || out.Attempt != 5 {
		t.Fatalf("%+v %v", out, err)
	}
	caps := []time.Duration{100, 200, 300, 300}
	if len(clock.sleeps) != len(caps) {
		t.Fatalf("sleeps %v", clock.sleeps)
	}
	for i, d := range clock.sleeps {
		hi := caps[i] * time.Millisecond
		if d < hi/2 || d > hi {
			t.Errorf("sleep %d = %s, want within [%s, %s]", i, d, hi/2, hi)
		}
	}
	if e.psp.Count("") != 1 || e.psp.Requests() != 5 {
		t.Fatalf("charges %d requests %d", e.psp.Count(""), e.psp.Requests())
	}
}

// Amend interplay: an intent whose action is retrying cannot be amended;
// once it failed definitively, an amendment yields a new key that executes.
func TestAmendThenExecute(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	e.psp.SetFault(refFault("inv-a", toolstest.FailBefore, func(int) bool { return true }))
	out, err := e.ex.Execute(ctx, pixCall("t1", "inv-a", extraction(0, testutil.CPF(51))), &executor.Opts{NoWait: true})
	if err != nil || out.Status != executor.StatusInFlight {
		t.Fatalf("%+v %v", out, err)
	}
	fixed := extraction(0, testutil.CPF(52))
	amend := intent.AmendParams{Tenant: "t1", Ref: "inv-a", Action: tools.PixChargeName, Fields: fixed, Reason: "customer gave another CPF"}
	if _, err := e.store.Amend(ctx, e.pool, amend); !errors.Is(err, intent.ErrActionActive) {
		t.Fatalf("amend while started: %v", err)
	}
	e.psp.SetFault(refFault("inv-a", toolstest.Reject, func(int) bool { return true }))
	waitExpired(t, e.pool, "t1", out.Key)
	failed, err := e.ex.Execute(ctx, pixCall("t1", "inv-a", extraction(1, testutil.CPF(51))), nil)
	if err != nil || failed.Status != executor.StatusFailed || !errors.Is(failed.Err(), executor.ErrFailed) {
		t.Fatalf("%+v %v", failed, err)
	}
	res, err := e.store.Amend(ctx, e.pool, amend)
	if err != nil {
		t.Fatal(err)
	}
	e.psp.SetFault(nil)
	done, err := e.ex.Execute(ctx, pixCall("t1", "inv-a", extraction(2, testutil.CPF(51))), nil)
	if err != nil || done.Status != executor.StatusCompleted || done.Key != res.Intent.Key || fmt.Sprint(done.Divergent) != "[pix_key]" {
		t.Fatalf("after amend: %+v %v", done, err)
	}
	if rec := e.psp.Records(""); len(rec) != 1 || rec[0]["pix_key"] != testutil.CPF(52) {
		t.Fatalf("charges %v", rec)
	}
}
