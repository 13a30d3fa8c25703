package cli

import (
	"context"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/server/metrics"
	"github.com/retrysafe/retrysafe/tools/stripe"
)

func TestParseAPITokens(t *testing.T) {
	t.Parallel()
	creds, err := parseAPITokens(" tenant-a=token1, tenant-b=token2 ,tenant-a=token3,")
	if err != nil {
		t.Fatal(err)
	}
	if len(creds) != 3 || creds[0].Tenant != "tenant-a" || creds[0].Token != "token1" || creds[1].Tenant != "tenant-b" || creds[2].Token != "token3" {
		t.Fatalf("%+v", creds)
	}
	// A token may contain '=' (base64 padding): only the first one splits.
	if c, err := parseAPITokens("t=YWJj=="); err != nil || c[0].Token != "YWJj==" {
		t.Fatalf("%+v %v", c, err)
	}
	for _, bad := range []string{"", " , ", "tenant-a", "=S3CRET", "tenant-a=", "a=S3CRET,b=S3CRET", "a b=S3CRET", "a=S3 CRET"} {
		_, err := parseAPITokens(bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), "S3") {
			t.Errorf("%q: the error shows a token: %v", bad, err)
		}
	}
}

// serve refuses to start on a bad configuration, with a message that names
// the setting and exit 2, before it touches a database.
func TestServeRefusesBadConfig(t *testing.T) {
	t.Parallel()
	good := map[string]string{
		"RETRYSAFE_API_TOKENS": "tenant-a=secret-token-a",
		"RETRYSAFE_HMAC_KEY":   testSecret,
		"RETRYSAFE_PSP_URL":    "http://127.0.0.1:1",
		"RETRYSAFE_PSP_TOKEN":  "psp-secret",
		// No DATABASE_URL: a config that passed would start a private
		// cluster, so every case below must fail before that.
	}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range good {
			m[a] = b
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
		want string
	}{
		{"no tokens", with("RETRYSAFE_API_TOKENS", ""), nil, "RETRYSAFE_API_TOKENS is empty"},
		{"bad tokens", with("RETRYSAFE_API_TOKENS", "tenant-a"), nil, "RETRYSAFE_API_TOKENS entry 1: want tenant=token"},
		{"no hmac", with("RETRYSAFE_HMAC_KEY", ""), nil, "RETRYSAFE_HMAC_KEY (or --hmac-key) is not set"},
		{"short hmac", with("RETRYSAFE_HMAC_KEY", "short-secret"), nil, "RETRYSAFE_HMAC_KEY is 12 bytes; at least 32 are required"},
		{"short hmac flag", good, []string{"--hmac-key", "0123456789"}, "RETRYSAFE_HMAC_KEY is 10 bytes"},
		{"no tools", with("RETRYSAFE_PSP_URL", ""), nil, "no tools configured: set RETRYSAFE_APIPIX_URL"},
		{"bad psp url", with("RETRYSAFE_PSP_URL", "ftp://psp"), nil, `RETRYSAFE_PSP_URL: not an http(s) URL`},
		{"psp url with credentials", with("RETRYSAFE_PSP_URL", "https://u:S3cret@psp"), nil, `RETRYSAFE_PSP_URL: the URL carries user:password`},
		{"no psp token", with("RETRYSAFE_PSP_TOKEN", ""), nil, "RETRYSAFE_PSP_TOKEN (or --psp-token) is not set"},
		{"bad log format", good, []string{"--log-format", "xml"}, `--log-format "xml": want text or json`},
		{"bad addr", good, []string{"--addr", "nonsense"}, `--addr "nonsense"`},
		{"bad schema", good, []string{"--schema", "Bad-Schema"}, "--schema"},
		{"bad sync completion", with("RETRYSAFE_SYNC_COMPLETION", "yes please"), nil, `RETRYSAFE_SYNC_COMPLETION="yes please": want true or false`},
	} {
		e, out, errb := testEnv(strings.NewReader(""), tc.vars)
		code := Run(context.Background(), e, append([]string{"serve"}, tc.args...))
		if code != ExitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%s: exit %d, stderr %q, want exit 2 and %q", tc.name, code, errb.String(), tc.want)
		}
		if out.Len() != 0 {
			t.Errorf("%s: stdout %q", tc.name, out.String())
		}
		for _, secret := range []string{"secret-token-a", "psp-secret", testSecret, "S3cret"} {
			if strings.Contains(errb.String(), secret) {
				t.Errorf("%s: stderr shows a secret", tc.name)
			}
		}
	}
}

// serve refuses a schema older than the binary unless told to migrate.
func TestServeRefusesUnmigratedSchema(t *testing.T) {
	t.Parallel()
	e, _, errb := testEnv(strings.NewReader(""), map[string]string{
		"DATABASE_URL":         pgtest.URL(t),
		"RETRYSAFE_API_TOKENS": "tenant-a=tok",
		"RETRYSAFE_HMAC_KEY":   testSecret,
		"RETRYSAFE_PSP_URL":    "http://127.0.0.1:1",
		"RETRYSAFE_PSP_TOKEN":  "p",
	})
	code := Run(context.Background(), e, []string{"serve", "--schema", "never_migrated_serve", "--addr", "127.0.0.1:0"})
	if code != 1 || !strings.Contains(errb.String(), "schema never_migrated_serve is at migration 0") || !strings.Contains(errb.String(), "--migrate") {
		t.Fatalf("exit %d: %s", code, errb)
	}
}

// buildRuntime builds the tool runtime as serve and worker do, from a PSP
// configuration plus extra environment and arguments.
func buildRuntime(t *testing.T, pool *pgxpool.Pool, extra map[string]string, args []string) (*toolRuntime, error) {
	t.Helper()
	vars := map[string]string{"RETRYSAFE_HMAC_KEY": testSecret, "RETRYSAFE_PSP_URL": "http://127.0.0.1:1", "RETRYSAFE_PSP_TOKEN": "psp-secret"}
	maps.Copy(vars, extra)
	e, _, _ := testEnv(strings.NewReader(""), vars)
	fs := NewFlagSet(e, "t", "t", "t")
	var rt runtimeFlags
	rt.register(fs, e)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	reg, err := rt.registry()
	if err != nil {
		t.Fatal(err)
	}
	return rt.build(pool, reg, metrics.New(), slog.New(slog.DiscardHandler), nil)
}

// --sync-completion and RETRYSAFE_SYNC_COMPLETION reach the executor; the
// flag overrides the environment.
func TestSyncCompletionSetting(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t, nil)
	for _, tc := range []struct {
		env  string
		args []string
		want bool
	}{
		{"", nil, false},
		{"true", nil, true},
		{"false", []string{"--sync-completion"}, true},
		{"true", []string{"--sync-completion=false"}, false},
	} {
		rtm, err := buildRuntime(t, pool, map[string]string{"RETRYSAFE_SYNC_COMPLETION": tc.env}, tc.args)
		if err != nil {
			t.Fatal(err)
		}
		if got := rtm.Executor.Config().SyncCompletion; got != tc.want {
			t.Errorf("env %q, args %v: SyncCompletion %v, want %v", tc.env, tc.args, got, tc.want)
		}
	}
}

// --group-commit and --group-commit-conns reach the executor, and a value
// it refuses names the flags.
func TestGroupCommitSetting(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t, nil)
	for _, tc := range []struct {
		args        []string
		group, conn int
		err         string
	}{
		{nil, 32, 2, ""},
		{[]string{"--group-commit", "1"}, 1, 2, ""},
		{[]string{"--group-commit", "64", "--group-commit-conns", "4"}, 64, 4, ""},
		{[]string{"--group-commit", "-3"}, 0, 0, "--group-commit"},
		{[]string{"--group-commit-conns", "-1"}, 0, 0, "GroupCommitConns must be at least 1"},
		{[]string{"--lost-write-retry", "-1s"}, 0, 0, "--lost-write-retry"},
	} {
		rtm, err := buildRuntime(t, pool, nil, tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("args %v: error %v, want one naming %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if c := rtm.Executor.Config(); c.GroupCommit != tc.group || c.GroupCommitConns != tc.conn {
			t.Errorf("args %v: GroupCommit %d, GroupCommitConns %d; want %d, %d", tc.args, c.GroupCommit, c.GroupCommitConns, tc.group, tc.conn)
		}
	}
}

// The worker builds its executor through the same builder as serve
// (workerRuntime, which runWorker calls), so that every executor flag
// reaches it: --sync-completion and --group-commit used to be accepted by
// `worker` and dropped.
func TestWorkerTakesEveryExecutorFlag(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t, nil)
	vars := map[string]string{"RETRYSAFE_HMAC_KEY": testSecret, "RETRYSAFE_PSP_URL": "http://127.0.0.1:1", "RETRYSAFE_PSP_TOKEN": "psp-secret"}
	e, _, _ := testEnv(strings.NewReader(""), vars)
	fs := NewFlagSet(e, "worker", "t", "t")
	var rt runtimeFlags
	rt.register(fs, e)
	if err := fs.Parse([]string{"--sync-completion", "--group-commit", "7", "--group-commit-conns", "3", "--lease", "41s", "--retry-horizon", "2h", "--lost-write-retry", "90s"}); err != nil {
		t.Fatal(err)
	}
	reg, err := rt.registry()
	if err != nil {
		t.Fatal(err)
	}
	rtm, err := rt.workerRuntime(pool, reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	c := rtm.Executor.Config()
	if !c.SyncCompletion || c.GroupCommit != 7 || c.GroupCommitConns != 3 || c.Lease != 41*time.Second || c.RetryHorizon != 2*time.Hour ||
		c.LostWriteRetry != 90*time.Second {
		t.Fatalf("worker's executor: SyncCompletion %v, GroupCommit %d, GroupCommitConns %d, Lease %s, RetryHorizon %s, LostWriteRetry %s",
			c.SyncCompletion, c.GroupCommit, c.GroupCommitConns, c.Lease, c.RetryHorizon, c.LostWriteRetry)
	}
}

// A first start with nothing set names every missing setting in one
// message, not one per failed start.
func TestServeNamesEveryMissingSetting(t *testing.T) {
	t.Parallel()
	e, _, errb := testEnv(strings.NewReader(""), map[string]string{})
	if code := Run(context.Background(), e, []string{"serve"}); code != ExitUsage {
		t.Fatalf("exit %d: %s", code, errb)
	}
	for _, want := range []string{"RETRYSAFE_API_TOKENS", "RETRYSAFE_HMAC_KEY"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %s:\n%s", want, errb)
		}
	}
	e, _, errb = testEnv(strings.NewReader(""), map[string]string{"RETRYSAFE_API_TOKENS": "a=t", "RETRYSAFE_HMAC_KEY": testSecret})
	if code := Run(context.Background(), e, []string{"serve"}); code != ExitUsage || !strings.Contains(errb.String(), "no tools configured") {
		t.Fatalf("exit %d: %s", code, errb)
	}
}

// RETRYSAFE_STRIPE_API_KEY turns stripe.payment on, in serve, worker, mcp
// and reconcile alike (they share the registry).
func TestStripeToolFromSettings(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t, nil)
	rtm, err := buildRuntime(t, pool, map[string]string{"RETRYSAFE_STRIPE_API_KEY": "sk_test_123", "RETRYSAFE_STRIPE_URL": "http://127.0.0.1:12111"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rtm.Tools.Tool(stripe.Name); !ok {
		t.Fatalf("stripe.payment not registered: %v", rtm.Tools.Names())
	}
	e, _, _ := testEnv(strings.NewReader(""), map[string]string{"RETRYSAFE_HMAC_KEY": testSecret, "RETRYSAFE_STRIPE_URL": "http://127.0.0.1:12111"})
	fs := NewFlagSet(e, "t", "t", "t")
	var rt runtimeFlags
	rt.register(fs, e)
	if _, err := rt.registry(); err == nil || !strings.Contains(err.Error(), "without RETRYSAFE_STRIPE_API_KEY") {
		t.Fatalf("a Stripe URL without a key: %v", err)
	}
}
