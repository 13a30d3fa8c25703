package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/retrysafe/retrysafe/dbpool"
	"github.com/retrysafe/retrysafe/executor/executortest"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/server/mcpserver"
	"github.com/retrysafe/retrysafe/tools"
)

// --help, and the settings checked before any database is opened.
func TestMCPCommandFlags(t *testing.T) {
	t.Parallel()
	e, out, _ := testEnv(nil, nil)
	if code := Run(context.Background(), e, []string{"mcp", "--help"}); code != 0 || !strings.Contains(out.String(), mcpserver.MetaIntentRef) {
		t.Fatalf("--help: exit %d\n%s", code, out)
	}
	base := map[string]string{"RETRYSAFE_HMAC_KEY": testSecret, "RETRYSAFE_PSP_URL": "http://127.0.0.1:1", "RETRYSAFE_PSP_TOKEN": "t", "DATABASE_URL": "postgres://127.0.0.1:1/x"}
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"mcp"}, nil, "--tenant (or RETRYSAFE_TENANT) is not set"},
		{[]string{"mcp", "--tenant", "a b"}, nil, "--tenant"},
		{[]string{"mcp", "--transport", "sse", "--tenant", "a"}, nil, `--transport "sse"`},
		{[]string{"mcp", "--transport", "http"}, nil, "RETRYSAFE_API_TOKENS is empty"},
		{[]string{"mcp", "--tenant", "a"}, map[string]string{"RETRYSAFE_HMAC_KEY": ""}, "RETRYSAFE_HMAC_KEY"},
		{[]string{"mcp", "--tenant", "a", "--allow-model-ref", "pix.refund"}, nil, "--allow-model-ref"},
		{[]string{"mcp", "--tenant", "a"}, map[string]string{"DATABASE_URL": ""}, "needs a database that outlives the process"},
	} {
		vars := map[string]string{}
		for k, v := range base {
			vars[k] = v
		}
		for k, v := range c.env {
			vars[k] = v
		}
		e, _, errb := testEnv(nil, vars)
		if code := Run(context.Background(), e, c.args); code != ExitUsage || !strings.Contains(errb.String(), c.want) {
			t.Fatalf("%v: exit %d, stderr %s; want %q", c.args, code, errb, c.want)
		}
		if strings.Contains(errb.String(), testSecret) {
			t.Fatalf("%v: the secret is printed", c.args)
		}
	}
}

// `retrysafe mcp` as a host runs it: a real subprocess over stdio, a real
// sandbox PSP, the SDK's own client; killed mid-charge and started again;
// and the official TypeScript client over stdio and streamable HTTP.
func TestMCPProcesses(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	dbURL := pgtest.URL(t)

	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		x := newMCPEnv(t, bin, dbURL, "")
		// Migrations only when asked: without --migrate, a schema behind
		// the binary is refused and left as it was.
		bare, bareErr := x.command()
		if err := bare.Run(); err == nil || !strings.Contains(bareErr.String(), "pass --migrate") {
			t.Fatalf("without --migrate on an empty schema: %v\n%s", err, bareErr)
		}
		var tables int
		if err := x.query(t, "SELECT count(*) FROM pg_tables WHERE schemaname = '"+x.schema+"'", &tables); err != nil || tables != 0 {
			t.Fatalf("%d tables (%v) after a refused start", tables, err)
		}
		cmd, stderr := x.command("--migrate")
		cs := connectCommand(t, cmd)
		lt, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(lt.Tools) != 1 || lt.Tools[0].Name != "pix_charge" || lt.Tools[0].Annotations == nil || !lt.Tools[0].Annotations.IdempotentHint {
			t.Fatalf("tools %+v", lt.Tools)
		}
		first := mcpCall(t, cs, "inv-stdio-1", mcpCharge("R$ 180,00", "529.982.247-25"))
		second := mcpCall(t, cs, "inv-stdio-1", mcpCharge(180, "52998224725"))
		refused := mcpCall(t, cs, "", mcpCharge(180, "52998224725"))
		if first.Status != "completed" || first.Replayed || second.Status != "completed" || !second.Replayed ||
			second.IdempotencyKey != first.IdempotencyKey || refused.Status != "refused" {
			t.Fatalf("first %+v\nsecond %+v\nrefused %+v", first, second, refused)
		}
		cs.Close()
		if cs := x.charges(t); len(cs) != 1 || cs[0]["idempotency_key"] != first.IdempotencyKey {
			t.Fatalf("PSP charges %v", cs)
		}
		if n := len(x.intents(t)); n != 1 {
			t.Fatalf("%d intents; the refused call must write none", n)
		}
		logs := stderr.String()
		if !strings.Contains(logs, "mcp: ready") || !strings.Contains(logs, "mcp: stopped") || strings.Contains(logs, "52998224725") || strings.Contains(logs, "inv-stdio-1") {
			t.Fatalf("stderr:\n%s", tail(logs))
		}
	})

	// SIGKILL while the PSP holds the charge's answer; a new process, the
	// same host reference, other spellings: one charge, one key, and once
	// the new process's reconciler has settled the orphan, replayed.
	t.Run("kill", func(t *testing.T) {
		t.Parallel()
		x := newMCPEnv(t, bin, dbURL, "slow=60s")
		timing := []string{"--lease", "6s", "--timeout", "3s", "--reconcile-interval", "200ms"}
		cmd1, stderr1 := x.command(append([]string{"--migrate"}, timing...)...)
		cs1 := connectCommand(t, cmd1)
		done := make(chan error, 1)
		go func() {
			_, err := cs1.CallTool(context.Background(), mcpParams("inv-kill-1", mcpCharge("R$ 180,00", "529.982.247-25")))
			done <- err
		}()
		// The PSP has charged and holds its answer: the call is in flight.
		charge := x.waitCharge(t, stderr1)
		if err := cmd1.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err == nil {
			t.Fatal("the call to the killed process returned no error")
		}
		if st := x.actionStatus(t); st != "started" {
			t.Fatalf("action %q after the kill, want started", st)
		}

		cmd2, stderr2 := x.command(timing...)
		cs2 := connectCommand(t, cmd2)
		inFlight := mcpCall(t, cs2, "inv-kill-1", mcpCharge(180, "52998224725"))
		if inFlight.Status != "in_flight" || inFlight.RetryAfterMillis <= 0 || inFlight.IdempotencyKey != charge["idempotency_key"] {
			t.Fatalf("first call after the restart: %+v", inFlight)
		}
		for deadline := time.Now().Add(30 * time.Second); x.actionStatus(t) != "completed"; {
			if time.Now().After(deadline) {
				t.Fatalf("the orphan was not settled in 30s; stderr:\n%s", tail(stderr2.String()))
			}
			time.Sleep(100 * time.Millisecond)
		}
		again := mcpCall(t, cs2, "inv-kill-1", mcpCharge("180.00", "529.982.247-25"))
		if again.Status != "completed" || !again.Replayed || again.IdempotencyKey != charge["idempotency_key"] || len(again.DivergentFields) != 0 ||
			!strings.Contains(string(again.Response), charge["id"].(string)) {
			t.Fatalf("after the reconciler settled it: %+v", again)
		}
		if cs := x.charges(t); len(cs) != 1 {
			t.Fatalf("%d charges at the PSP, want 1", len(cs))
		}
		t.Logf("killed mid-charge, restarted: 1 charge (%s), 1 key, in_flight then replayed:true", charge["id"])
	})

	// The host stops the process (SIGTERM, then the pipe closed) while the
	// PSP is still answering: the process finishes and records the charge
	// before it exits.
	t.Run("stopped mid-charge", func(t *testing.T) {
		t.Parallel()
		x := newMCPEnv(t, bin, dbURL, "slow=1500ms")
		cmd, stderr := x.command("--migrate")
		cs := connectCommand(t, cmd)
		go cs.CallTool(context.Background(), mcpParams("inv-eof-1", mcpCharge(180, "52998224725"))) //nolint:errcheck // the answer is lost with the pipe
		x.waitCharge(t, stderr)
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cs.Close(); err != nil {
			t.Logf("close: %v", err)
		}
		if st, code := x.actionStatus(t), cmd.ProcessState.ExitCode(); st != "completed" || code != 0 {
			t.Fatalf("after SIGTERM mid-charge: action %q, exit %d; stderr:\n%s", st, code, tail(stderr.String()))
		}
	})

	// The README's mcpServers entry, run as a host runs it: its command's
	// arguments and exactly its environment (values the test's own).
	t.Run("readme entry", func(t *testing.T) {
		t.Parallel()
		raw, err := os.ReadFile("../../README.md")
		if err != nil {
			t.Fatal(err)
		}
		type server struct {
			Command string
			Args    []string
			Env     map[string]string
		}
		var entry struct {
			MCPServers map[string]server `json:"mcpServers"`
		}
		for _, block := range strings.Split(string(raw), "```json\n")[1:] {
			body, _, _ := strings.Cut(block, "```")
			if strings.Contains(body, `"command"`) {
				if err := json.Unmarshal([]byte(body), &entry); err != nil {
					t.Fatalf("README mcpServers entry: %v", err)
				}
				break
			}
		}
		e, ok := entry.MCPServers["retrysafe"]
		if !ok || filepath.Base(e.Command) != "retrysafe" || len(e.Args) == 0 || e.Args[0] != "mcp" {
			t.Fatalf("README has no stdio mcpServers entry for retrysafe mcp: %+v", entry)
		}
		x := newMCPEnv(t, bin, dbURL, "")
		values := map[string]string{
			"DATABASE_URL": dbURL, "RETRYSAFE_HMAC_KEY": testSecret, "RETRYSAFE_PSP_URL": x.psp.URL,
			"RETRYSAFE_PSP_TOKEN": mcpPSPToken, "RETRYSAFE_TENANT": "tenant-readme",
		}
		env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "RETRYSAFE_SCHEMA=" + x.schema}
		for k := range e.Env {
			v, ok := values[k]
			if !ok {
				t.Fatalf("the README entry sets %s, which this test does not know", k)
			}
			env = append(env, k+"="+v)
		}
		if len(e.Env) != len(values) {
			t.Fatalf("the README entry sets %d settings, want %d", len(e.Env), len(values))
		}
		mig := exec.Command(bin, "migrate") // "run retrysafe migrate once first"
		mig.Env = env
		if out, err := mig.CombinedOutput(); err != nil {
			t.Fatalf("migrate: %v\n%s", err, out)
		}
		cmd := exec.Command(bin, e.Args...) // the test's build in place of the entry's path
		cmd.Env = env
		cs := connectCommand(t, cmd)
		a1, a2 := mcpCharge("R$ 180,00", "529.982.247-25"), mcpCharge(180, "52998224725")
		a1["intent_ref"], a2["intent_ref"] = "NF-readme-1", "NF-readme-1"
		r1, r2 := mcpCall(t, cs, "", a1), mcpCall(t, cs, "", a2)
		if r1.Status != "completed" || r1.Guarantee != "weaker" || !r2.Replayed || r2.IdempotencyKey != r1.IdempotencyKey {
			t.Fatalf("first %+v\nsecond %+v", r1, r2)
		}
	})

	t.Run("typescript", func(t *testing.T) {
		t.Parallel()
		node, err := exec.LookPath("node")
		if err != nil {
			t.Fatal("node is not installed: run scripts/mcp-interop.sh (scripts/test does)")
		}
		dir, _ := filepath.Abs("testdata/mcp-interop")
		if _, err := os.Stat(filepath.Join(dir, "node_modules/@modelcontextprotocol/sdk/package.json")); err != nil {
			t.Fatal("@modelcontextprotocol/sdk is not installed: run scripts/mcp-interop.sh (scripts/test does)")
		}
		x := newMCPEnv(t, bin, dbURL, "")
		check := func(t *testing.T, out []byte) {
			t.Helper()
			var got struct {
				Tools []struct {
					Name        string
					Annotations map[string]any
					InputSchema map[string]any
				}
				First, Second, Refused struct {
					IsError    bool
					Structured mcpserver.Result
				}
			}
			if err := json.Unmarshal(bytes.TrimSpace(out), &got); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if len(got.Tools) != 1 || got.Tools[0].Name != "pix_charge" || got.Tools[0].Annotations["destructiveHint"] != true ||
				got.Tools[0].Annotations["idempotentHint"] != true || got.Tools[0].Annotations["openWorldHint"] != true {
				t.Fatalf("tools %+v", got.Tools)
			}
			f, s, r := got.First, got.Second, got.Refused
			if f.IsError || f.Structured.Status != "completed" || f.Structured.Replayed || s.IsError || !s.Structured.Replayed ||
				s.Structured.IdempotencyKey != f.Structured.IdempotencyKey || !r.IsError || r.Structured.Status != "refused" {
				t.Fatalf("results %+v", got)
			}
		}
		t.Run("stdio", func(t *testing.T) {
			cmd, _ := x.command("--migrate")
			run := exec.Command(node, append([]string{"client.mjs", "stdio", cmd.Path}, cmd.Args[1:]...)...)
			run.Dir, run.Env = dir, append(cmd.Env, "MCP_INTEROP_REF=inv-ts-stdio")
			var stderr bytes.Buffer
			run.Stderr = &stderr
			out, err := run.Output()
			if err != nil {
				t.Fatalf("node: %v\n%s", err, tail(stderr.String()))
			}
			check(t, out)
		})
		t.Run("http", func(t *testing.T) {
			env := append(x.env(), "RETRYSAFE_API_TOKENS=tenant-a=mcp-token-a,tenant-b=mcp-token-b")
			p := testutil.StartProc(t, bin, env, "mcp", "--transport", "http", "--addr", "127.0.0.1:0", "--schema", x.schema, "--migrate", "--max-conns", "4")
			run := exec.Command(node, "client.mjs", "http", p.URL+"/mcp", "mcp-token-a")
			run.Dir, run.Env = dir, append(os.Environ(), "MCP_INTEROP_REF=inv-ts-http")
			var stderr bytes.Buffer
			run.Stderr = &stderr
			out, err := run.Output()
			if err != nil {
				t.Fatalf("node: %v\n%s\nserver:\n%s", err, tail(stderr.String()), tail(p.Stderr.String()))
			}
			check(t, out)
			resp, err := http.Get(p.URL + "/healthz")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("/healthz: %v %v", resp, err)
			}
			resp.Body.Close()
		})
		if cs := x.charges(t); len(cs) != 2 {
			t.Fatalf("%d charges for two intents", len(cs))
		}
	})
}

// mcpEnv is a sandbox PSP process and a schema for `retrysafe mcp`.
type mcpEnv struct {
	bin, dbURL, schema string
	psp                *testutil.Proc
}

const mcpPSPToken = "merchant-token-mcp"

func newMCPEnv(t *testing.T, bin, dbURL, pspFault string) *mcpEnv {
	t.Helper()
	args := []string{"sandbox", "psp", "--flavour", "v1", "--addr", "127.0.0.1:0", "--schema", scratchSchema(t, "mcp_psp_"), "--max-conns", "4", "--log-level", "warn"}
	if pspFault != "" {
		args = append(args, "--fault", pspFault)
	}
	psp := testutil.StartProc(t, bin, []string{"DATABASE_URL=" + dbURL}, args...)
	return &mcpEnv{bin: bin, dbURL: dbURL, schema: scratchSchema(t, "mcp_"), psp: psp}
}

func (x *mcpEnv) env() []string {
	return append(os.Environ(),
		"DATABASE_URL="+x.dbURL,
		"RETRYSAFE_PSP_URL="+x.psp.URL,
		"RETRYSAFE_PSP_TOKEN="+mcpPSPToken,
		"RETRYSAFE_HMAC_KEY="+testSecret,
		"RETRYSAFE_TENANT=tenant-a",
	)
}

// command is `retrysafe mcp` over stdio on the env's schema.
func (x *mcpEnv) command(args ...string) (*exec.Cmd, *lockedBuffer) {
	cmd := exec.Command(x.bin, append([]string{"mcp", "--schema", x.schema, "--max-conns", "4"}, args...)...)
	cmd.Env = x.env()
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	return cmd, stderr
}

func (x *mcpEnv) charges(t *testing.T) []map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, x.psp.URL+"/v1/pix/charges", nil)
	req.Header.Set("Authorization", "Bearer "+mcpPSPToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Data []map[string]any }
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
		t.Fatalf("PSP list: HTTP %d", resp.StatusCode)
	}
	return out.Data
}

// waitCharge returns the PSP's first charge once it exists.
func (x *mcpEnv) waitCharge(t *testing.T, stderr *lockedBuffer) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if cs := x.charges(t); len(cs) > 0 {
			return cs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no charge at the PSP after 20s; stderr:\n%s", tail(stderr.String()))
		}
	}
}

func (x *mcpEnv) query(t *testing.T, sql string, dst any) error {
	t.Helper()
	ctx := context.Background()
	pool, err := dbpool.Open(ctx, x.dbURL, x.schema, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	return pool.QueryRow(ctx, sql).Scan(dst)
}

// ledger opens the schema for a read through the ledger's test API.
func (x *mcpEnv) ledger(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := dbpool.Open(context.Background(), x.dbURL, x.schema, 1)
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// intents are the intents frozen for the server's tenant.
func (x *mcpEnv) intents(t *testing.T) []executortest.Intent {
	t.Helper()
	pool := x.ledger(t)
	defer pool.Close()
	is, err := executortest.Intents(context.Background(), pool, "tenant-a", "")
	if err != nil {
		t.Fatal(err)
	}
	return is
}

// actionStatus is the status of the schema's one action row.
func (x *mcpEnv) actionStatus(t *testing.T) string {
	t.Helper()
	pool := x.ledger(t)
	defer pool.Close()
	as, err := executortest.Actions(context.Background(), pool, executortest.Filter{})
	if err != nil || len(as) != 1 {
		t.Fatalf("actions %+v (%v), want one", as, err)
	}
	return as[0].Status
}

func connectCommand(t *testing.T, cmd *exec.Cmd) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "retrysafe-test", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to %v: %v", cmd.Args, err)
	}
	t.Cleanup(func() {
		if err := cs.Close(); err != nil && !errors.Is(err, os.ErrProcessDone) && cmd.ProcessState == nil {
			t.Logf("close: %v", err)
		}
	})
	return cs
}

func mcpCharge(amount any, cpf string) map[string]any {
	return map[string]any{"customer_id": "cust-mcp", "amount": amount, "pix_key": cpf, "pix_key_type": "cpf"}
}

func mcpParams(ref string, args map[string]any) *mcp.CallToolParams {
	return mcpserver.CallParams(tools.PixChargeName, ref, args)
}

func mcpCall(t *testing.T, cs *mcp.ClientSession, ref string, args map[string]any) mcpserver.Result {
	t.Helper()
	res, err := cs.CallTool(context.Background(), mcpParams(ref, args))
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var r mcpserver.Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return r
}
