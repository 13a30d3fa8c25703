package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

// A PSP that answers 500 to every charge for 10 seconds, under 30 intents,
// each driven by a caller that waits, two redeliveries that come back
// when told to (Retry-After) and the reconciler: once the PSP recovers,
// every intent is charged exactly once and none is in review. Under the
// old budget of 5 attempts, a third of them went to review (issue 18).
// No attempt is spent by a caller that found the action in flight: each
// attempt is one request to the PSP.
func TestPSPOutageRetriedByTime(t *testing.T) {
	t.Parallel()
	const (
		intents = 30
		outage  = 10 * time.Second
	)
	e := newEnv(t, &envOpts{poolSize: 8, cfg: func(c *executor.Config) {
		c.MaxAttempts = 0 // the default: the horizon alone
		c.BackoffBase, c.BackoffMax = 50*time.Millisecond, time.Second
		c.ReconcileInterval = 200 * time.Millisecond
	}})
	var (
		once  sync.Once
		start time.Time
		mu    sync.Mutex
		posts = map[string]int{} // requests that reached the fault, by key
		fails int
	)
	e.psp.SetFault(func(r toolstest.Request) toolstest.Fault {
		once.Do(func() { start = time.Now() })
		mu.Lock()
		defer mu.Unlock()
		posts[r.Key] = max(posts[r.Key], r.N)
		if time.Since(start) < outage {
			fails++
			return toolstest.FailBefore
		}
		return toolstest.None
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	recDone := make(chan error, 1)
	go func() { recDone <- e.ex.RunReconciler(ctx) }()

	final := make([]*executor.Outcome, intents)
	var wg sync.WaitGroup
	for i := range intents {
		call := pixCall("t1", fmt.Sprintf("inv-out-%d", i), extraction(i, testutil.CPF(4000+i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := e.ex.Execute(ctx, call, nil)
			if err != nil {
				t.Errorf("intent %d: %v", i, err)
				return
			}
			if out.Status != executor.StatusInFlight {
				final[i] = out
			}
		}()
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					out, err := e.ex.Execute(ctx, call, &executor.Opts{NoWait: true})
					if err != nil {
						t.Errorf("redelivery of %d: %v", i, err)
						return
					}
					if out.Status != executor.StatusInFlight {
						return
					}
					// As a client honouring Retry-After would.
					if e.ex.Config().Clock.Sleep(ctx, min(out.RetryAfter, 200*time.Millisecond)) != nil {
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	cancel()
	<-recDone

	if c := e.psp.Count(""); c != intents {
		t.Fatalf("%d charges for %d intents", c, intents)
	}
	if n := countStatus(t, e.pool, executor.RowReview); n != 0 {
		t.Fatalf("%d actions in review", n)
	}
	if n := countStatus(t, e.pool, executor.RowCompleted); n != intents {
		t.Fatalf("%d actions completed, want %d", n, intents)
	}
	mu.Lock()
	defer mu.Unlock()
	if fails < 6*intents/2 {
		t.Fatalf("only %d requests failed during the outage: it did not outlast the old budget", fails)
	}
	for i, out := range final {
		if out != nil && out.Status != executor.StatusCompleted {
			t.Errorf("intent %d: %s", i, out.Status)
		}
		a, err := executor.Get(context.Background(), e.pool, "t1", keyOf(t, e, "t1", fmt.Sprintf("inv-out-%d", i), extraction(i, testutil.CPF(4000+i))))
		if err != nil {
			t.Fatal(err)
		}
		if a.Attempt > posts[a.Key] {
			t.Errorf("intent %d: attempt %d after %d requests to the PSP: attempts were spent without a try", i, a.Attempt, posts[a.Key])
		}
	}
	t.Logf("%d requests failed during the %s outage; %d charges", fails, outage, e.psp.Count(""))
}

// When the horizon is spent, what ends the action is what can be known:
// a PSP whose Lookup finds nothing under the key was never charged, so the
// action fails (retries_exhausted, a new try needs a new intent_ref); a
// provider that takes the key but cannot be asked may have acted, so
// review.
func TestRetryHorizonEnds(t *testing.T) {
	t.Parallel()
	sms := &counted{Func: tools.Func{ToolName: "sms.send", Fields: simpleSchema("sms.send"), HonoursKey: true,
		Exec: func(context.Context, string, derive.Payload) (json.RawMessage, error) {
			return nil, &tools.Error{Class: tools.ClassUncertain, Code: "http_500", Status: 500}
		}}}
	e := newEnv(t, &envOpts{extra: []tools.Tool{sms}, cfg: func(c *executor.Config) {
		c.MaxAttempts = 0
		// Long enough for three attempts of 20–50 ms pauses on a loaded
		// machine under -race (300 ms once fitted only two in CI).
		c.RetryHorizon = time.Second
		c.BackoffBase, c.BackoffMax = 20*time.Millisecond, 50*time.Millisecond
	}})
	e.psp.SetFault(func(toolstest.Request) toolstest.Fault { return toolstest.FailBefore })
	ctx := context.Background()
	out, err := e.ex.Execute(ctx, pixCall("t1", "inv-h", extraction(0, testutil.CPF(4100))), nil)
	if err != nil || out.Status != executor.StatusFailed || out.Failure.Code != "retries_exhausted" || out.Attempt < 3 {
		t.Fatalf("pix: %+v %v", out, err)
	}
	out, err = e.ex.Execute(ctx, executor.Call{Tenant: "t1", Ref: "sms-h", Action: "sms.send", Fields: map[string]any{"to": "ana"}}, nil)
	if err != nil || out.Status != executor.StatusReview || out.Failure.Class != tools.ClassUncertain || sms.calls.Load() < 3 {
		t.Fatalf("sms: %+v %v (%d calls)", out, err, sms.calls.Load())
	}
	if e.psp.Count("") != 0 {
		t.Fatal("charged")
	}
}
