package cli

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
)

// Every engine command answers a flag it does not know, and a setting it
// needs but lacks, the same way: exit 2 (ExitUsage), nothing on stdout, and
// stderr naming what is wrong. A command added without its cases here
// fails the test.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	type usageCase struct {
		args []string
		want []string // in stderr
	}
	// missing: the command with an empty environment and no flags, or,
	// for a command that needs no setting, another mistake of its command
	// line.
	missing := map[string]usageCase{
		"amend":     {nil, []string{"--tenant, --ref and --action are required"}},
		"inspect":   {nil, []string{"--tenant is required"}},
		"key":       {nil, []string{"RETRYSAFE_HMAC_KEY is not set"}},
		"mcp":       {nil, []string{"--tenant (or RETRYSAFE_TENANT) is not set", "RETRYSAFE_HMAC_KEY", "DATABASE_URL"}},
		"migrate":   {nil, []string{"migrate needs a database: set DATABASE_URL"}},
		"normalize": {[]string{"values.jsonl"}, []string{`unexpected argument "values.jsonl"`}},
		"operator":  {[]string{"add"}, []string{"--name and --tenants are required"}},
		"purge":     {nil, []string{"purge needs a database: set DATABASE_URL"}},
		"reconcile": {nil, []string{"RETRYSAFE_HMAC_KEY (or --hmac-key) is not set"}},
		"resolve":   {nil, []string{"--tenant is required"}},
		"serve":     {nil, []string{"RETRYSAFE_API_TOKENS is empty", "RETRYSAFE_HMAC_KEY (or --hmac-key) is not set"}},
		"tokens":    {[]string{"measure"}, []string{"tokens measure", "set DATABASE_URL"}},
		"worker":    {nil, []string{"OPENAI_API_KEY is not set", "RETRYSAFE_HMAC_KEY (or --hmac-key) is not set", "RETRYSAFE_WHATSAPP_URL is not set"}},
	}
	// sub: the subcommand a command's flags belong to.
	sub := map[string][]string{"operator": {"add"}, "tokens": {"estimate"}}

	names := slices.Sorted(maps.Keys(commands))
	if got, want := names, slices.Sorted(maps.Keys(missing)); !slices.Equal(got, want) {
		t.Fatalf("commands %v, cases for %v: give every command its cases", got, want)
	}
	run := func(t *testing.T, args []string, want []string) {
		t.Helper()
		e, out, errb := testEnv(strings.NewReader(""), nil)
		code := Run(context.Background(), e, args)
		if code != ExitUsage || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q; want exit %d and nothing on stdout", args, code, out, ExitUsage)
		}
		for _, w := range want {
			if !strings.Contains(errb.String(), w) {
				t.Errorf("%v: stderr does not name %q:\n%s", args, w, errb)
			}
		}
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bad := append(append([]string{name}, sub[name]...), "--no-such-flag")
			run(t, bad, []string{"flag provided but not defined: -no-such-flag"})
			c := missing[name]
			run(t, append([]string{name}, c.args...), c.want)
		})
	}

	// Outside any command: no command, or one that is not there.
	run(t, nil, []string{"Usage: retrysafe <command>"})
	run(t, []string{"no-such-command"}, []string{`unknown command "no-such-command"`})
	run(t, []string{"demo"}, []string{"retrysafe-lab"})
}

// `retrysafe --help` says what each exit code means.
func TestHelpNamesExitCodes(t *testing.T) {
	t.Parallel()
	e, out, _ := testEnv(nil, nil)
	if code := Run(context.Background(), e, []string{"--help"}); code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"Exit codes", "0  done", "1  failed while working", "2  not started"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
}
