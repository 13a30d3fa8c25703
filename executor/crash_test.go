package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

// PostgreSQL crashes for real: every process of a private cluster gets
// SIGKILL (pgembed's Crash), so the pool's connection is dead, and until
// the cluster is started again (crash recovery: the WAL replayed, "the
// database system is starting up" to whoever connects meanwhile) no
// connection can be made. Crashed while the provider charges
// ("completion"), the executor writes the completion again until the
// recovered server takes it: the call ends completed, the claim it made
// before the crash was durable, and the provider charged once. Crashed
// before the call ("claim"), its freeze and claim is sent again until the
// server takes it, and the call charges once. Before sendAgain, the one
// write sent again found the server down and the call ended in an error,
// its outcome left to the lease and a second question to the provider.
func TestThroughACrash(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		lost string // the log line of the write found lost
	}{
		{"completion", `msg="executor: completion's connection lost, writing it again"`},
		// Crashed before the call: its freeze and claim cannot reach the
		// server, and is sent again until it can.
		{"claim", `msg="executor: claim's connection lost, sending it again"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			throughACrash(t, c.name == "claim", c.lost)
		})
	}
}

func throughACrash(t *testing.T, beforeClaim bool, lost string) {
	ctx := context.Background()
	e := newEnv(t, &envOpts{cfg: func(cfg *executor.Config) {
		cfg.Lease, cfg.Timeout = 60*time.Second, 20*time.Second
	}})
	cluster, pool := pgtest.Private(t, nil)
	rec := &recorder{}
	ex, pt, logs := e.pausing(t, "crashed", pool, func(cfg *executor.Config) { cfg.Observer = rec })
	if o, err := ex.Execute(ctx, pixCall("t1", "inv-warm", extraction(0, testutil.CPF(11))), nil); err != nil || o.Status != executor.StatusCompleted {
		t.Fatalf("the first call: %+v %v", o, err)
	}

	call := pixCall("t1", "inv-crash", extraction(1, testutil.CPF(12)))
	key := keyOf(t, e, "t1", call.Ref, call.Fields)
	if beforeClaim {
		if err := cluster.Crash(); err != nil {
			t.Fatal(err)
		}
	}
	pt.armed.Store(!beforeClaim)
	var out *executor.Outcome
	var execErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		out, execErr = ex.Execute(ctx, call, nil)
	}()
	if !beforeClaim {
		testutil.FinishWithin(t, 10*time.Second, "the charge", func() { <-pt.charged })
		if err := cluster.Crash(); err != nil {
			t.Fatal(err)
		}
		close(pt.proceed)
	}
	logs.WaitFor(t, 10*time.Second, lost)
	if err := cluster.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.FinishWithin(t, 30*time.Second, "the call", func() { <-done })
	if execErr != nil || out.Status != executor.StatusCompleted || out.Replayed || out.Attempt != 1 || !out.Created {
		t.Fatalf("the call through the crash: %+v, %v: want completed by this call\n%s", out, execErr, logs)
	}
	// Sent again until the server was back: through. A lost fresh
	// claim's first send again is the grouped freeze and claim, refused
	// as well, so it took two at least.
	write, attempt, sends := executor.WriteCompletion, 1, 1
	if beforeClaim {
		write, attempt, sends = executor.WriteClaim, 0, 2
	}
	if ws := rec.lostWrites(); len(ws) != 1 || ws[0].Write != write || ws[0].Attempt != attempt || ws[0].Err != nil || ws[0].Sends < sends {
		t.Fatalf("lost writes observed: %+v; want one %s, through after a refused send", ws, write)
	}
	o, err := ex.Execute(ctx, call, nil)
	if err != nil || o.Status != executor.StatusCompleted || !o.Replayed || !sameJSON(t, o.Response, out.Response) {
		t.Fatalf("the redelivery after: %+v %v, want the call's outcome replayed", o, err)
	}
	if n := e.psp.CountKey(key); n != 1 {
		t.Fatalf("%d charges under the intent's key: want one", n)
	}
}
