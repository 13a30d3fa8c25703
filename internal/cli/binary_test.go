package cli

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/internal/testutil"
)

// The engine's binary, cmd/retrysafe, links no lab command: its help lists
// none, and asked for one it says where it is (exit 2) instead of running
// it. What it links is checked by internal/importrule.
func TestEngineBinaryHasNoLab(t *testing.T) {
	t.Parallel()
	bin := testutil.BuildBinary(t, "../../cmd/retrysafe")
	help, err := exec.Command(bin, "help").CombinedOutput()
	if err != nil {
		t.Fatalf("help: %v\n%s", err, help)
	}
	for _, c := range []string{"serve", "worker", "mcp", "migrate", "resolve"} {
		if !strings.Contains(string(help), "  "+c+" ") {
			t.Errorf("help lacks %s:\n%s", c, help)
		}
	}
	for name := range labCommands {
		if strings.Contains(string(help), "  "+name+" ") {
			t.Errorf("the engine's help lists the lab's %s:\n%s", name, help)
		}
		out, err := exec.Command(bin, name).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != ExitUsage || !strings.Contains(string(out), "go run ./cmd/retrysafe-lab "+name) {
			t.Errorf("retrysafe %s: %v\n%s", name, err, out)
		}
	}
}
