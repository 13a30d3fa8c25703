package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/tools"
)

// recorder is an Observer and Failpoints that keeps what it is told.
type recorder struct {
	executor.NopObserver // ExecutionFinished and the rest are overridden
	mu                   sync.Mutex
	calls, lookups       []executor.ProviderEvent
	execs                []executor.ExecutionEvent
	writes               []executor.WriteEvent
	hits                 []string
}

func (r *recorder) WriteLost(ev executor.WriteEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, ev)
}

// lostWrites returns the lost writes recorded so far.
func (r *recorder) lostWrites() []executor.WriteEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.writes)
}

func (r *recorder) ProviderCalled(ev executor.ProviderEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, ev)
}

func (r *recorder) LookupDone(ev executor.ProviderEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups = append(r.lookups, ev)
}

func (r *recorder) ExecutionFinished(ev executor.ExecutionEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.execs = append(r.execs, ev)
}

func (r *recorder) Hit(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hits = append(r.hits, name)
}

// take returns what was recorded since the last take.
func (r *recorder) take() (calls, lookups []executor.ProviderEvent, execs []executor.ExecutionEvent, hits []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	calls, lookups, execs, hits = r.calls, r.lookups, r.execs, r.hits
	r.calls, r.lookups, r.execs, r.hits = nil, nil, nil, nil
	return
}

// The executor reports every provider call, lookup and execution as it
// knows them (tenant, key, attempt, error class, takeover) and hits the
// failpoints around the provider call, under the names the crash tests use.
func TestObserverAndFailpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var fail, looked atomic.Bool
	tool := &tools.Func{ToolName: "notify.obs", Fields: simpleSchema("notify.obs"), HonoursKey: true,
		Exec: func(context.Context, string, derive.Payload) (json.RawMessage, error) {
			if fail.Load() {
				return nil, tools.Uncertain("http_502", "bad gateway", nil)
			}
			return json.RawMessage(`{"ok":true}`), nil
		},
		Look: func(context.Context, string) (json.RawMessage, error) {
			looked.Store(true)
			return nil, tools.ErrNotFound
		}}
	rec := &recorder{}
	e := newEnv(t, &envOpts{extra: []tools.Tool{tool}, cfg: func(c *executor.Config) {
		c.Observer, c.Failpoints = rec, rec
	}})
	call := executor.Call{Tenant: "t1", Ref: "r-1", Action: "notify.obs", Fields: map[string]any{"to": "x"}}

	out, err := e.ex.Execute(ctx, call, nil)
	if err != nil || out.Status != executor.StatusCompleted {
		t.Fatalf("first: %+v %v", out, err)
	}
	calls, lookups, execs, hits := rec.take()
	want := []string{executor.FailActionClaimed, executor.FailActionClaimed + ".notify.obs",
		executor.FailProviderAnswered, executor.FailProviderAnswered + ".notify.obs"}
	if !slices.Equal(hits, want) || want[0] != "agent.action-claimed" || want[2] != "agent.provider-answered" {
		t.Fatalf("failpoints hit %q, want %q", hits, want)
	}
	if len(calls) != 1 || len(lookups) != 0 {
		t.Fatalf("first: %d calls, %d lookups", len(calls), len(lookups))
	}
	if c := calls[0]; c.Tenant != "t1" || c.Action != "notify.obs" || c.Key != out.Key || c.Attempt != 1 || c.Err != nil || c.Class != "" || c.Elapsed <= 0 {
		t.Fatalf("call event %+v", c)
	}
	if len(execs) != 1 || execs[0].Outcome != out || execs[0].TookOver || execs[0].Tenant != "t1" || execs[0].Action != "notify.obs" || execs[0].Elapsed <= 0 {
		t.Fatalf("execution events %+v", execs)
	}

	// A replay calls nothing; ExecuteKey names the action from the intent.
	if out, err := e.ex.ExecuteKey(ctx, "t1", out.Key, nil); err != nil || !out.Replayed {
		t.Fatalf("replay: %+v %v", out, err)
	}
	calls, lookups, execs, hits = rec.take()
	if len(calls)+len(lookups)+len(hits) != 0 || len(execs) != 1 || execs[0].Action != "notify.obs" || execs[0].TookOver {
		t.Fatalf("replay: calls %v lookups %v hits %v execs %+v", calls, lookups, hits, execs)
	}

	// An uncertain failure, released (NoWait); the next caller takes the
	// expired lease over, looks up (nothing), and calls again.
	fail.Store(true)
	call.Ref = "r-2"
	out, err = e.ex.Execute(ctx, call, &executor.Opts{NoWait: true})
	if err != nil || out.Status != executor.StatusInFlight {
		t.Fatalf("uncertain: %+v %v", out, err)
	}
	calls, _, execs, _ = rec.take()
	if len(calls) != 1 || calls[0].Class != tools.ClassUncertain || calls[0].Err == nil || len(execs) != 1 || execs[0].TookOver {
		t.Fatalf("uncertain: calls %+v execs %+v", calls, execs)
	}
	fail.Store(false)
	waitExpired(t, e.pool, "t1", out.Key)
	out, err = e.ex.Execute(ctx, call, &executor.Opts{NoWait: true})
	if err != nil || out.Status != executor.StatusCompleted || out.Attempt != 2 || !looked.Load() {
		t.Fatalf("takeover: %+v %v", out, err)
	}
	calls, lookups, execs, _ = rec.take()
	if len(lookups) != 1 || !lookups[0].NotFound || lookups[0].Class != "" || !errors.Is(lookups[0].Err, tools.ErrNotFound) || lookups[0].Attempt != 2 || lookups[0].Key != out.Key {
		t.Fatalf("lookup events %+v", lookups)
	}
	if len(calls) != 1 || calls[0].Attempt != 2 || calls[0].Err != nil {
		t.Fatalf("call events after the takeover %+v", calls)
	}
	if len(execs) != 1 || !execs[0].TookOver || execs[0].Outcome != out {
		t.Fatalf("execution events after the takeover %+v", execs)
	}

	// No answer: an unknown tool is reported with its error.
	if _, err := e.ex.Execute(ctx, executor.Call{Tenant: "t1", Ref: "r-3", Action: "no.such"}, nil); !errors.Is(err, executor.ErrUnknownTool) {
		t.Fatal(err)
	}
	if _, _, execs, _ = rec.take(); len(execs) != 1 || execs[0].Outcome != nil || !errors.Is(execs[0].Err, executor.ErrUnknownTool) {
		t.Fatalf("unknown tool: %+v", execs)
	}
}

// The defaults are the no-op hooks, visible in the validated Config.
func TestHooksDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.ex.Config()
	if _, ok := c.Observer.(executor.NopObserver); !ok || c.Failpoints == nil {
		t.Fatalf("defaults: Observer %T, Failpoints %T", c.Observer, c.Failpoints)
	}
	c.Failpoints.Hit(executor.FailActionClaimed) // does nothing
}
