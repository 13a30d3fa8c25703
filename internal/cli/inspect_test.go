package cli

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/server/sidecar"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

// opsFixture is a migrated schema, a fake PSP and an executor on them, for
// the operator commands' tests; run invokes a command in-process on the
// same schema.
type opsFixture struct {
	t      *testing.T
	pool   *pgxpool.Pool
	schema string
	psp    *toolstest.Provider
	ex     *executor.Executor
	vars   map[string]string
}

func newOpsFixture(t *testing.T, maxAttempts int) *opsFixture {
	t.Helper()
	pool, schema := pgtest.Schema(t, nil)
	psp := toolstest.NewProvider()
	psp.Token = "psp-token"
	t.Cleanup(psp.Close)
	pix, err := tools.NewPixCharge(tools.HTTPConfig{BaseURL: psp.URL, Token: psp.Token})
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := tools.NewRegistry(pix)
	d, err := reg.Deriver([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, _ := intent.New(intent.Config{Deriver: d, Logger: quiet})
	ex, err := executor.New(executor.Config{
		DB: pool, Intents: store, Tools: reg, Logger: quiet, MaxAttempts: maxAttempts,
		Lease: 4 * time.Second, Timeout: time.Second, LeaseMargin: 500 * time.Millisecond,
		BackoffBase: 20 * time.Millisecond, BackoffMax: 40 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &opsFixture{t: t, pool: pool, schema: schema, psp: psp, ex: ex, vars: map[string]string{
		"DATABASE_URL":        pgtest.URL(t),
		"RETRYSAFE_SCHEMA":    schema,
		"RETRYSAFE_HMAC_KEY":  testSecret,
		"RETRYSAFE_PSP_URL":   psp.URL,
		"RETRYSAFE_PSP_TOKEN": psp.Token,
		"USER":                "op-tester",
	}}
}

func (f *opsFixture) run(args ...string) (code int, stdout, stderr string) {
	f.t.Helper()
	e, out, errb := testEnv(strings.NewReader(""), f.vars)
	code = Run(context.Background(), e, args)
	return code, out.String(), errb.String()
}

func (f *opsFixture) charge(tenant, ref string) *executor.Outcome {
	f.t.Helper()
	out, err := f.ex.Execute(context.Background(), executor.Call{
		Tenant: tenant, Ref: ref, Action: tools.PixChargeName,
		Fields: map[string]any{"customer_id": "c-1", "amount": "180,00", "pix_key": "529.982.247-25", "pix_key_type": "cpf"},
	}, &executor.Opts{NoWait: true})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// lostCharge leaves an action in flight: the PSP charged but its answer was
// lost, which only a reconciler pass that asks the PSP can settle.
func (f *opsFixture) lostCharge(tenant, ref string) {
	f.t.Helper()
	f.psp.SetFault(func(r toolstest.Request) toolstest.Fault {
		if r.N == 1 {
			return toolstest.DropAfter
		}
		return toolstest.None
	})
	if o := f.charge(tenant, ref); o.Status != executor.StatusInFlight {
		f.t.Fatalf("%+v", o)
	}
}

func TestInspect(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t, 5)
	o := f.charge("tenant-a", "inv-9")
	if o.Status != executor.StatusCompleted {
		t.Fatalf("%+v", o)
	}

	code, out, errb := f.run("inspect", "--tenant", "tenant-a", "--ref", "inv-9", "--action", "pix.charge")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	for _, want := range []string{"tenant-a / inv-9 / pix.charge", o.Key, "amount = 18000", "pix_key = 52998224725", "status    completed", `"amount_cents":18000`, "revisions: none"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}

	code, out, _ = f.run("inspect", "--tenant", "tenant-a", "--key", o.Key, "--json")
	var v sidecar.IntentView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Intent.IntentRef != "inv-9" || v.Status != "completed" {
		t.Fatalf("--key --json: exit %d: %s", code, out)
	}

	code, out, _ = f.run("inspect", "--tenant", "tenant-a", "--status", "completed")
	if code != 0 || !strings.Contains(out, "inv-9") || !strings.Contains(out, o.Key) || !strings.Contains(out, "STATUS") {
		t.Fatalf("--status: exit %d: %s", code, out)
	}
	if code, out, _ = f.run("inspect", "--tenant", "tenant-a", "--status", "review"); code != 0 || strings.TrimSpace(out) != "no actions" {
		t.Fatalf("--status review: exit %d: %q", code, out)
	}

	// Scoped by tenant: another tenant's ref or key finds nothing.
	if code, _, errb = f.run("inspect", "--tenant", "tenant-b", "--ref", "inv-9", "--action", "pix.charge"); code != 1 || !strings.Contains(errb, "no such intent") {
		t.Fatalf("tenant-b by ref: exit %d %s", code, errb)
	}
	if code, _, _ = f.run("inspect", "--tenant", "tenant-b", "--key", o.Key); code != 1 {
		t.Fatalf("tenant-b by key: exit %d", code)
	}

	for _, args := range [][]string{
		{"inspect", "--ref", "inv-9", "--action", "pix.charge"},
		{"inspect", "--tenant", "tenant-a"},
		{"inspect", "--tenant", "tenant-a", "--ref", "inv-9"},
		{"inspect", "--tenant", "tenant-a", "--key", "k", "--status", "review"},
		{"inspect", "--tenant", "tenant-a", "--status", "bogus"},
	} {
		if code, _, errb := f.run(args...); code != 2 || errb == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a message", args, code, errb)
		}
	}
}

// An action in review is settled by hand, with its reason recorded; callers
// then get the operator's answer; it cannot be settled twice.
func TestResolve(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t, 1)
	// A 500 and no way to ask by key: nobody can tell.
	f.psp.SetFault(func(toolstest.Request) toolstest.Fault { return toolstest.FailBefore })
	f.psp.LookupDown.Store(true)
	o := f.charge("tenant-a", "inv-r")
	if o.Status != executor.StatusReview {
		t.Fatalf("%+v", o)
	}
	if code, out, _ := f.run("inspect", "--tenant", "tenant-a", "--status", "review"); code != 0 || !strings.Contains(out, "inv-r") {
		t.Fatalf("review list: %d %s", code, out)
	}

	base := []string{"resolve", "--tenant", "tenant-a", "--ref", "inv-r", "--action", "pix.charge"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--status", "completed"}, "--reason is required"},
		{[]string{"--status", "completed", "--reason", "  "}, "--reason is required"},
		{[]string{"--status", "done", "--reason", "x"}, "--status must be completed or failed"},
		{[]string{"--status", "completed", "--reason", "x", "--response", "{"}, "--response is not valid JSON"},
		{[]string{"--status", "failed", "--reason", "x", "--response", "{}"}, "--response goes with --status completed"},
	} {
		code, _, errb := f.run(append(base, tc.args...)...)
		if code != 2 || !strings.Contains(errb, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, errb, tc.want)
		}
	}
	if code, _, errb := f.run("resolve", "--tenant", "tenant-b", "--key", o.Key, "--status", "failed", "--reason", "x"); code != 1 || !strings.Contains(errb, "no action") {
		t.Fatalf("other tenant: exit %d %s", code, errb)
	}

	code, out, errb := f.run(append(base, "--status", "completed", "--response", `{"id":"ch_manual","status":"paid"}`,
		"--reason", "charge found in the PSP dashboard")...)
	if code != 0 || !strings.Contains(out, "resolved tenant-a / "+o.Key+": completed") {
		t.Fatalf("resolve: exit %d: %s %s", code, out, errb)
	}
	again := f.charge("tenant-a", "inv-r")
	if again.Status != executor.StatusCompleted || !again.Replayed || !strings.Contains(string(again.Response), "ch_manual") {
		t.Fatalf("after resolve: %+v", again)
	}
	code, out, _ = f.run("inspect", "--tenant", "tenant-a", "--key", o.Key)
	if code != 0 || !strings.Contains(out, `resolved  completed by op-tester`) || !strings.Contains(out, "charge found in the PSP dashboard") {
		t.Fatalf("inspect after resolve:\n%s", out)
	}
	if code, _, errb := f.run(append(base, "--status", "failed", "--reason", "again")...); code != 1 || !strings.Contains(errb, "not in review") {
		t.Fatalf("second resolve: exit %d %s", code, errb)
	}
}

// reconcile settles an action whose provider answer was lost, by asking the
// PSP for the key, and says so.
func TestReconcileOnce(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t, 5)
	f.lostCharge("tenant-a", "inv-lost")
	var out string
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out, "taken over 1: completed 1") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		var code int
		var errb string
		code, out, errb = f.run("reconcile", "--log-level", "warn")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errb)
		}
	}
	if !strings.Contains(out, "taken over 1: completed 1, failed 0, review 0") {
		t.Fatalf("reconcile printed %q", out)
	}
	if f.psp.Count("/v1/pix/charges") != 1 {
		t.Fatalf("%d charges", f.psp.Count("/v1/pix/charges"))
	}
	if code, out, _ := f.run("reconcile"); code != 0 || !strings.Contains(out, "taken over 0") {
		t.Fatalf("idle pass: %d %q", code, out)
	}
}

// reconcile --loop runs until its context ends (SIGTERM in main), then
// exits 0, printing the passes that found something.
func TestReconcileLoop(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t, 5)
	f.lostCharge("tenant-a", "inv-loop")
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	e, out, errb := testEnv(strings.NewReader(""), f.vars)
	code := Run(ctx, e, []string{"reconcile", "--loop", "--reconcile-interval", "100ms", "--log-level", "warn"})
	if code != 0 || !strings.Contains(out.String(), "taken over 1: completed 1") || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errb)
	}
}

// Every operator command documents itself.
func TestOperatorCommandsHelp(t *testing.T) {
	t.Parallel()
	for cmd, want := range map[string]string{
		"serve":     "POST /v1/tools/{action}/execute",
		"inspect":   "--status",
		"reconcile": "--loop",
		"resolve":   "--reason",
	} {
		for _, args := range [][]string{{cmd, "--help"}, {"help", cmd}} {
			e, out, errb := testEnv(strings.NewReader(""), nil)
			if code := Run(context.Background(), e, args); code != 0 {
				t.Errorf("%v: exit %d: %s", args, code, errb)
			}
			if !strings.Contains(out.String(), "Usage: retrysafe "+cmd) || !strings.Contains(out.String(), want) {
				t.Errorf("%v: help lacks %q:\n%s", args, want, out)
			}
		}
	}
}
