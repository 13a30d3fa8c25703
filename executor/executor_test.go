package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

type result struct {
	out *executor.Outcome
	err error
}

// checkErr accepts no error, or ErrLeaseLost with an outcome: a caller whose
// completion was fenced after a takeover still reports the action's state.
func checkErr(t *testing.T, i int, r result) {
	t.Helper()
	if r.err == nil || (errors.Is(r.err, executor.ErrLeaseLost) && r.out != nil) {
		if r.err != nil {
			t.Logf("caller %d: %v (outcome %s)", i, r.err, r.out.Status)
		}
		return
	}
	t.Fatalf("caller %d: %v", i, r.err)
}

func runConcurrent(n int, call func(i int) executor.Call, ex *executor.Executor) []result {
	res := make([]result, n)
	testutil.TogetherPrepared(n, func(i int) func() {
		c := call(i)
		return func() { res[i].out, res[i].err = ex.Execute(context.Background(), c, nil) }
	})
	return res
}

// 200 concurrent executions of one (tenant, ref, action), each with a
// differently formatted but equivalent extraction, on a pool of 4: one
// charge at the PSP, one key, every caller gets that charge or in_flight.
func TestConcurrentEquivalentExtractions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &envOpts{poolSize: 4})
	c := testutil.CPF(123456789)
	res := runConcurrent(200, func(i int) executor.Call { return pixCall("t1", "inv-100", extraction(i, c)) }, e.ex)

	if n := e.psp.Count(""); n != 1 {
		t.Fatalf("PSP charged %d times, want 1", n)
	}
	charge := e.psp.Records("")[0]
	if charge["amount_cents"] != float64(18000) || charge["pix_key"] != c {
		t.Fatalf("charge %v", charge)
	}
	var key string
	executed, completed, inFlight := 0, 0, 0
	for i, r := range res {
		checkErr(t, i, r)
		if key == "" {
			key = r.out.Key
		}
		if r.out.Key != key || len(r.out.Divergent) != 0 {
			t.Fatalf("caller %d: key %s divergent %v (first key %s)", i, r.out.Key, r.out.Divergent, key)
		}
		switch r.out.Status {
		case executor.StatusCompleted:
			completed++
			if chargeID(t, r.out.Response) != charge["id"] {
				t.Fatalf("caller %d got another charge: %s", i, r.out.Response)
			}
			if !r.out.Replayed {
				executed++
			}
		case executor.StatusInFlight:
			inFlight++
			if r.out.RetryAfter <= 0 || !errors.Is(r.out.Err(), executor.ErrInFlight) || !executor.IsRetryable(r.out.Err()) {
				t.Fatalf("caller %d: in flight without retry hint: %+v", i, r.out)
			}
		default:
			t.Fatalf("caller %d: status %s", i, r.out.Status)
		}
	}
	if executed != 1 || charge["idempotency_key"] != key {
		t.Fatalf("%d callers executed; charge key %v, frozen key %s", executed, charge["idempotency_key"], key)
	}
	t.Logf("200 callers: %d completed (1 executed), %d in flight", completed, inFlight)
	// Everyone who retries now replays the one charge.
	out, err := e.ex.Execute(context.Background(), pixCall("t1", "inv-100", extraction(7, c)), nil)
	if err != nil || out.Status != executor.StatusCompleted || !out.Replayed || chargeID(t, out.Response) != charge["id"] {
		t.Fatalf("replay: %+v %v", out, err)
	}
}

// The same, with some callers extracting a different amount: still one
// charge, for the first frozen amount; the others report divergent fields.
func TestConcurrentDivergentExtractions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &envOpts{poolSize: 4})
	c := testutil.CPF(555444333)
	differs := func(i int) bool { return i%5 == 2 }
	res := runConcurrent(200, func(i int) executor.Call {
		f := extraction(i, c)
		if differs(i) {
			f["amount"] = "1.800,00"
		}
		return pixCall("t1", "inv-200", f)
	}, e.ex)
	if n := e.psp.Count(""); n != 1 {
		t.Fatalf("PSP charged %d times, want 1", n)
	}
	charged := e.psp.Records("")[0]["amount_cents"].(float64)
	frozen := "18000"
	if charged == 180000 {
		frozen = "180000"
	} else if charged != 18000 {
		t.Fatalf("charged %v cents", charged)
	}
	div := 0
	for i, r := range res {
		checkErr(t, i, r)
		mine := "18000"
		if differs(i) {
			mine = "180000"
		}
		if want := mine != frozen; want != (len(r.out.Divergent) > 0) || (want && fmt.Sprint(r.out.Divergent) != "[amount]") {
			t.Fatalf("caller %d (amount %s, frozen %s): divergent %v", i, mine, frozen, r.out.Divergent)
		}
		if len(r.out.Divergent) > 0 {
			div++
		}
		if r.out.Status != executor.StatusCompleted && r.out.Status != executor.StatusInFlight {
			t.Fatalf("caller %d: %s", i, r.out.Status)
		}
	}
	t.Logf("frozen amount %s cents; %d callers reported divergent_fields=[amount]", frozen, div)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	base := e.cfg
	bad := []func(*executor.Config){
		func(c *executor.Config) {
			c.Lease, c.Timeout, c.LeaseMargin = 10*time.Second, 9*time.Second, 2*time.Second
		},
		func(c *executor.Config) {
			c.Heartbeat, c.Lease, c.LeaseMargin = time.Second, 2*time.Second, time.Second
		},
		func(c *executor.Config) { c.DB = nil },
		func(c *executor.Config) { c.Intents = nil },
		func(c *executor.Config) { c.Tools = nil },
		func(c *executor.Config) { c.MaxAttempts = -1 },
		func(c *executor.Config) { c.BackoffBase, c.BackoffMax = time.Second, time.Millisecond },
		func(c *executor.Config) { c.Timeout = -time.Second },
		func(c *executor.Config) { c.GroupCommit = -1 },
		func(c *executor.Config) { c.GroupCommitConns = -1 },
		func(c *executor.Config) { c.LostWriteRetry = -time.Second },
	}
	for i, mod := range bad {
		c := base
		mod(&c)
		if _, err := executor.New(c); !errors.Is(err, executor.ErrConfig) {
			t.Errorf("case %d accepted: %v", i, err)
		}
	}
	tx, err := e.pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	c := base
	c.DB = tx
	if _, err := executor.New(c); !errors.Is(err, executor.ErrConfig) {
		t.Errorf("a transaction was accepted as DB: %v", err)
	}
	def, err := executor.Config{DB: e.pool, Intents: e.store, Tools: e.reg}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if def.Lease != 30*time.Second || def.Timeout != 10*time.Second || def.MaxAttempts != 0 || def.RetryHorizon != 6*time.Hour || def.BackoffMax != time.Minute || def.Owner == "" || def.Clock == nil ||
		def.GroupCommit != 32 || def.GroupCommitConns != 2 || def.LostWriteRetry != 10*time.Second {
		t.Fatalf("defaults: %+v", def)
	}
	// Long calls with a heartbeat: the timeout may exceed the lease.
	c = base
	c.Heartbeat, c.Lease, c.Timeout, c.LeaseMargin = 100*time.Millisecond, time.Second, 5*time.Second, 200*time.Millisecond
	if _, err := executor.New(c); err != nil {
		t.Fatal(err)
	}
}

func TestUnknownToolAndBadFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	if _, err := e.ex.Execute(ctx, executor.Call{Tenant: "t1", Ref: "r", Action: "nope"}, nil); !errors.Is(err, executor.ErrUnknownTool) {
		t.Fatalf("unknown tool: %v", err)
	}
	a, b := 0.1, 0.2 // variables: constant arithmetic would be exact
	_, err := e.ex.Execute(ctx, pixCall("t1", "r", map[string]any{"customer_id": "c", "amount": a + b, "pix_key": testutil.CPF(1)}), nil)
	if !errors.Is(err, derive.ErrInvalidField) {
		t.Fatalf("float money: %v", err)
	}
	if e.psp.Requests() != 0 {
		t.Fatal("a bad extraction reached the provider")
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	// A provider that takes the key but cannot be asked, answering 500:
	// nobody can tell whether it acted, so the spent attempts end in
	// review (a Lookup that found nothing would end them failed).
	sms := &counted{Func: tools.Func{ToolName: "sms.send", Fields: simpleSchema("sms.send"), HonoursKey: true,
		Exec: func(context.Context, string, derive.Payload) (json.RawMessage, error) {
			return nil, &tools.Error{Class: tools.ClassUncertain, Code: "http_500", Status: 500, Message: "Internal Server Error"}
		}}}
	e := newEnv(t, &envOpts{extra: []tools.Tool{sms}, cfg: func(c *executor.Config) { c.MaxAttempts = 2 }})
	ctx := context.Background()
	smsCall := func(to string) executor.Call {
		return executor.Call{Tenant: "t1", Ref: "inv-r", Action: "sms.send", Fields: map[string]any{"to": to}}
	}
	out, err := e.ex.Execute(ctx, smsCall("ana"), nil)
	if err != nil || out.Status != executor.StatusReview || !errors.Is(out.Err(), executor.ErrNeedsReview) || executor.IsRetryable(out.Err()) {
		t.Fatalf("want review: %+v %v", out, err)
	}
	if out.Failure == nil || out.Failure.Code != "http_500" || out.Attempt != 2 {
		t.Fatalf("failure %+v", out.Failure)
	}
	list, err := executor.List(ctx, e.pool, executor.ListParams{Tenant: "t1", Status: executor.RowReview})
	if err != nil || len(list) != 1 || list[0].Key != out.Key {
		t.Fatalf("list: %v %v", list, err)
	}
	if _, err := executor.Resolve(ctx, e.pool, executor.ResolveParams{Tenant: "t2", Key: out.Key, Status: "failed", Reason: "x"}); !errors.Is(err, executor.ErrNotFound) {
		t.Fatalf("cross-tenant resolve: %v", err)
	}
	a, err := executor.Resolve(ctx, e.pool, executor.ResolveParams{
		Tenant: "t1", Key: out.Key, Status: executor.RowCompleted,
		Response: json.RawMessage(`{"id":"manual-1","status":"paid"}`), Reason: "paid by bank transfer", By: "op-7",
	})
	if err != nil || a.Status != executor.RowCompleted || a.Failure.Resolution == nil || a.Failure.Resolution.By != "op-7" {
		t.Fatalf("resolve: %+v %v", a, err)
	}
	if _, err := executor.Resolve(ctx, e.pool, executor.ResolveParams{Tenant: "t1", Key: out.Key, Status: "failed", Reason: "x"}); !errors.Is(err, executor.ErrNotResolvable) {
		t.Fatalf("second resolve: %v", err)
	}
	again, err := e.ex.Execute(ctx, smsCall(" ana "), nil)
	if err != nil || again.Status != executor.StatusCompleted || !again.Replayed || chargeID(t, again.Response) != "manual-1" {
		t.Fatalf("after resolve: %+v %v", again, err)
	}
	if n := sms.calls.Load(); n != 2 {
		t.Fatalf("%d calls, want 2 (the attempts before review)", n)
	}
}

// A tool built on tools.Func: the adapter route an existing agent uses.
func TestFuncToolWithoutIdempotency(t *testing.T) {
	t.Parallel()
	uncertain := &counted{Func: tools.Func{ToolName: "sms.send", Fields: simpleSchema("sms.send"),
		Exec: func(ctx context.Context, key string, _ derive.Payload) (json.RawMessage, error) {
			return nil, tools.Uncertain("timeout", "gateway timed out", nil)
		}}}
	notSent := &counted{Func: tools.Func{ToolName: "fax.send", Fields: simpleSchema("fax.send")}}
	notSent.Exec = func(ctx context.Context, key string, _ derive.Payload) (json.RawMessage, error) {
		if notSent.calls.Load() == 1 {
			return nil, tools.Transient("dial", "connection refused", nil)
		}
		return json.RawMessage(`{"ok":true}`), nil
	}
	var acted sync.Map
	looked := &counted{Func: tools.Func{ToolName: "push.send", Fields: simpleSchema("push.send")}}
	looked.Exec = func(ctx context.Context, key string, _ derive.Payload) (json.RawMessage, error) {
		acted.Store(key, true)
		return nil, tools.Uncertain("reset", "connection reset", nil)
	}
	looked.Look = func(ctx context.Context, key string) (json.RawMessage, error) {
		if _, ok := acted.Load(key); ok {
			return json.RawMessage(`{"found":true}`), nil
		}
		return nil, tools.ErrNotFound
	}
	e := newEnv(t, &envOpts{extra: []tools.Tool{uncertain, notSent, looked}})
	ctx := context.Background()
	call := func(action string) *executor.Outcome {
		out, err := e.ex.Execute(ctx, executor.Call{Tenant: "t1", Ref: "r1", Action: action, Fields: map[string]any{"to": "x"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// No key, no lookup, uncertain outcome: review, never a second call.
	if out := call("sms.send"); out.Status != executor.StatusReview || uncertain.calls.Load() != 1 {
		t.Fatalf("sms: %+v after %d calls", out, uncertain.calls.Load())
	}
	if out := call("sms.send"); out.Status != executor.StatusReview || !out.Replayed || uncertain.calls.Load() != 1 {
		t.Fatalf("sms again: %+v after %d calls", out, uncertain.calls.Load())
	}
	// Certainly not sent: retrying is safe even without a key.
	if out := call("fax.send"); out.Status != executor.StatusCompleted || notSent.calls.Load() != 2 {
		t.Fatalf("fax: %+v after %d calls", out, notSent.calls.Load())
	}
	// Uncertain but askable: the next attempt asks instead of calling.
	if out := call("push.send"); out.Status != executor.StatusCompleted || looked.calls.Load() != 1 || string(out.Response) != `{"found":true}` {
		t.Fatalf("push: %+v after %d calls", out, looked.calls.Load())
	}
}

func TestIsRetryable(t *testing.T) {
	t.Parallel()
	yes := []error{executor.ErrInFlight, executor.ErrLeaseLost, fmt.Errorf("x: %w", executor.ErrLeaseLost),
		&pgconn.PgError{Code: "40001"}, &pgconn.PgError{Code: "40P01"}, &pgconn.PgError{Code: "08006"}}
	no := []error{nil, executor.ErrNeedsReview, executor.ErrFailed, &executor.ToolFailure{Class: tools.ClassDefinitive},
		executor.ErrUnknownTool, &pgconn.PgError{Code: "23505"}, derive.ErrMissingField}
	for _, err := range yes {
		if !executor.IsRetryable(err) {
			t.Errorf("IsRetryable(%v) = false", err)
		}
	}
	for _, err := range no {
		if executor.IsRetryable(err) {
			t.Errorf("IsRetryable(%v) = true", err)
		}
	}
}

// The reconciler loop settles crashed work on its own and stops with its
// context.
func TestRunReconciler(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &envOpts{cfg: func(c *executor.Config) {
		// The releases below come back after their backoff, not their
		// lease, so a roomy Timeout costs the test nothing; 200 ms once
		// cut the first call short on a loaded CI machine (an uncertain
		// timeout instead of the PSP's 500).
		c.Lease, c.Timeout, c.LeaseMargin = 6*time.Second, 3*time.Second, time.Second
		c.ReconcileInterval = 50 * time.Millisecond
	}})
	// Three releases left for later by NoWait callers after a 500.
	e.psp.SetFault(func(r toolstest.Request) toolstest.Fault {
		if r.N == 1 {
			return toolstest.FailBefore
		}
		return toolstest.None
	})
	for i := range 3 {
		out, err := e.ex.Execute(context.Background(), pixCall("t1", fmt.Sprintf("inv-%d", i), extraction(i, testutil.CPF(90+i))), &executor.Opts{NoWait: true})
		if err != nil || out.Status != executor.StatusInFlight || out.Failure == nil || out.Failure.Code != "http_500" {
			t.Fatalf("%+v %v", out, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.another(t, "reconciler", nil).RunReconciler(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for countStatus(t, e.pool, executor.RowCompleted) < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunReconciler returned %v", err)
	}
	if n := countStatus(t, e.pool, executor.RowCompleted); n != 3 || e.psp.Count("") != 3 {
		t.Fatalf("completed %d, charges %d", n, e.psp.Count(""))
	}
}
