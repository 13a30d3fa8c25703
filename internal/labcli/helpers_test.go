package labcli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
// are, into the test's temporary directory (the build cache makes the
// second build a link).
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "retrysafe-lab")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/retrysafe-lab").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// lockedBuffer collects what a command writes while the test reads it.
type lockedBuffer = testutil.LockedBuffer

// scratchSchema names a schema of its own for a command under test, which
// creates it, and drops it when the test ends.
func scratchSchema(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b) //nolint:errcheck // never fails
	schema, dbURL := prefix+hex.EncodeToString(b), pgtest.URL(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, dbURL); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			c.Close(ctx)
		}
	})
	return schema
}
