package labcli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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

// proc is a retrysafe-lab subprocess that printed "listening on URL".
type proc struct {
	cmd       *exec.Cmd
	readyLine string
	url       string
	stderr    *lockedBuffer
	done      chan struct{}
	code      int
}

func startProc(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	p := &proc{cmd: cmd, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on ") {
				select {
				case ready <- sc.Text():
				default:
				}
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			p.code = ee.ExitCode()
		} else if err != nil {
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(t) })
	select {
	case p.readyLine = <-ready:
		_, url, _ := strings.Cut(p.readyLine, "listening on ")
		p.url = strings.TrimSpace(url)
		return p
	case <-p.done:
		t.Fatalf("%s exited %d before it was ready:\n%s", args[0], p.code, p.stderr.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("%s not ready after 90s:\n%s", args[0], p.stderr.String())
	}
	return nil
}

// stop sends SIGTERM and returns the exit code (killing after 20s).
func (p *proc) stop(t *testing.T) int {
	select {
	case <-p.done:
		return p.code
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill() //nolint:errcheck
		<-p.done
		t.Errorf("%s did not stop within 20s of SIGTERM", p.cmd.Args[1])
	}
	return p.code
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
