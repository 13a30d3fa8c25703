package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestHelpPrintsNoEnvironmentValue runs every command's --help, and a
// mistyped flag, with every environment variable set to a value that must
// not appear in the output: help says a flag is set from its variable,
// never what it holds.
func TestHelpPrintsNoEnvironmentValue(t *testing.T) {
	t.Parallel()
	const mark = "S3cret"
	getenv := func(name string) string {
		switch name {
		case "DATABASE_URL":
			return "postgres://u:" + mark + "@127.0.0.1/x"
		case "RETRYSAFE_API_TOKENS":
			return "a=" + mark + "TOK"
		}
		return mark + "-" + name
	}
	for name := range commands {
		for _, args := range [][]string{{name, "--help"}, {name, "--no-such-flag"}} {
			var out, errOut bytes.Buffer
			e := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: getenv}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // nothing may start
			Run(ctx, e, args)
			if got := out.String() + errOut.String(); strings.Contains(got, mark) {
				i := strings.Index(got, mark)
				t.Errorf("retrysafe %s printed an environment value: …%s…", strings.Join(args, " "), got[max(0, i-60):min(len(got), i+20)])
			} else if args[1] == "--help" && !strings.Contains(got, "Usage") {
				t.Errorf("retrysafe %s printed no usage:\n%s", strings.Join(args, " "), got)
			}
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	e := &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}
	if code := Run(context.Background(), e, []string{"--version"}); code != 0 || !strings.HasPrefix(out.String(), "retrysafe ") {
		t.Fatalf("--version: exit %d, %q", code, out.String())
	}
}
