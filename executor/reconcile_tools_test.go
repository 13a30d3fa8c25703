package executor_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/tools"
)

// A process without a tool must not take over that tool's expired actions:
// each takeover spends an attempt, and after MaxAttempts a perfectly
// recoverable action would go to review (seen: a server without the reply
// tool pushing the worker's replies to review). A process with the tool
// settles it.
func TestReconcilerTakesOnlyItsTools(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	other := tools.Func{ToolName: "notify.other", Fields: simpleSchema("notify.other"), HonoursKey: true,
		Exec: func(context.Context, string, derive.Payload) (json.RawMessage, error) {
			return json.RawMessage(`{"ok":true}`), nil
		}}
	e := newEnv(t, &envOpts{extra: []tools.Tool{&other}})

	// Leave an action of notify.other started with an expired lease, as a
	// crashed worker would.
	crashed := e.another(t, "crashed", nil)
	out, err := crashed.Execute(ctx, executor.Call{Tenant: "t1", Ref: "r-1", Action: "notify.other", Fields: map[string]any{"to": "x"}}, nil)
	if err != nil || out.Status != executor.StatusCompleted {
		t.Fatalf("setup: %+v %v", out, err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE actions SET status = 'started', lease_owner = 'crashed', lease_until = now() - interval '1 second', response = NULL, finished_at = NULL WHERE idem_key = $1`, out.Key); err != nil {
		t.Fatal(err)
	}

	pixOnly, err := tools.NewRegistry(mustTool(t, e.reg, tools.PixChargeName))
	if err != nil {
		t.Fatal(err)
	}
	server := e.another(t, "server", func(c *executor.Config) { c.Tools = pixOnly })
	for range 3 {
		res, err := server.ReconcileOnce(ctx)
		if err != nil || res.TakenOver != 0 {
			t.Fatalf("a reconciler without the tool took over: %+v %v", res, err)
		}
	}
	a, err := executor.Get(ctx, e.pool, "t1", out.Key)
	if err != nil || a.Status != executor.RowStarted || a.Attempt != 1 {
		t.Fatalf("after the foreign reconciler: %+v %v", a, err)
	}
	res, err := e.ex.ReconcileOnce(ctx)
	if err != nil || res.TakenOver != 1 || res.Completed != 1 {
		t.Fatalf("the reconciler with the tool: %+v %v", res, err)
	}
}

func mustTool(t *testing.T, reg *tools.Registry, name string) tools.Tool {
	t.Helper()
	tool, ok := reg.Tool(name)
	if !ok {
		t.Fatalf("no tool %s", name)
	}
	return tool
}
