package labcli

import (
	"bytes"
	"io"
	"testing"

	"github.com/retrysafe/retrysafe/internal/cli"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

// The lab's commands need PostgreSQL: the package gets its own database.
func TestMain(m *testing.M) { pgtest.Main(m) }

func testEnv(stdin io.Reader, vars map[string]string) (*cli.Env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &cli.Env{Stdin: stdin, Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return vars[k] }}, &out, &errb
}

// buildBinary builds cmd/retrysafe-lab, the binary whose commands these
// are.
func buildBinary(t *testing.T) string { return testutil.BuildBinary(t, "../../../cmd/retrysafe-lab") }

// lockedBuffer collects what a command writes while the test reads it.
type lockedBuffer = testutil.LockedBuffer

// scratchSchema names a schema of its own for a command under test, which
// creates it, and drops it when the test ends.
func scratchSchema(t *testing.T, prefix string) string { return pgtest.SchemaName(t, prefix) }
