package labcli

import (
	"context"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/internal/cli"
)

func TestSandboxPSPAPIPixHelp(t *testing.T) {
	t.Parallel()
	e, out, _ := testEnv(strings.NewReader(""), map[string]string{"RETRYSAFE_PSP_CLIENT_SECRET": "do-not-print"})
	if code := cli.Run(context.Background(), e, []string{"sandbox", "psp", "--flavour", "apipix", "--help"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"PUT    /api/cob/{txid}", "POST   /oauth/token", "--client-id", `(default "retrysafe-sandbox")`,
		`(default "sandbox-secret")`, "AcessoNegado", "/sandbox/cob/{txid}/pagar", "--group-max", "X-Sandbox-Fault"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("sandbox psp --flavour apipix --help lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "do-not-print") {
		t.Error("--help printed the client secret from the environment")
	}
	e, out, _ = testEnv(strings.NewReader(""), nil)
	if code := cli.Run(context.Background(), e, []string{"sandbox", "psp", "--help"}); code != 0 || !strings.Contains(out.String(), "-flavour") {
		t.Fatalf("sandbox psp --help does not show --flavour: %d", code)
	}
	for _, args := range [][]string{
		{"sandbox", "psp", "--flavour", "stripe"},
		{"sandbox", "psp", "--flavour"},
		{"sandbox", "psp", "--flavour=apipix", "--fault", "explode"},
		{"sandbox", "psp", "--flavour=apipix", "--group-max", "-1"},
		{"sandbox", "psp", "--flavour=apipix", "--webhook-url", "ftp://x"},
	} {
		e, _, errb := testEnv(strings.NewReader(""), nil)
		if code := cli.Run(context.Background(), e, args); code == 0 || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb)
		}
	}
}

func TestSplitFlavour(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args   []string
		want   string
		remain int
	}{
		{nil, defaultFlavour, 0},
		{[]string{"--addr", "x", "--flavour", "apipix"}, flavourAPIPix, 2},
		{[]string{"-flavour=v1", "--addr", "x"}, flavourV1, 2},
	} {
		f, rest, err := splitFlavour(c.args)
		if err != nil || f != c.want || len(rest) != c.remain {
			t.Errorf("%v: %q %v %v", c.args, f, rest, err)
		}
	}
}
