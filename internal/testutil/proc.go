package testutil

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Proc is a command's subprocess that printed a line with "listening on
// URL" on stdout (retrysafe's servers and sandboxes do when ready).
type Proc struct {
	Cmd       *exec.Cmd
	ReadyLine string
	URL       string
	Stderr    *LockedBuffer
	Done      chan struct{}
	Code      int
}

// StartProc starts bin with args and env (beside this process's
// environment) and waits, at most 90 s, for its ready line; the test's
// cleanup stops it.
func StartProc(t *testing.T, bin string, env []string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	p := &Proc{Cmd: cmd, Stderr: &LockedBuffer{}, Done: make(chan struct{})}
	cmd.Stderr = p.Stderr
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
			p.Code = ee.ExitCode()
		} else if err != nil {
			p.Code = -1
		}
		close(p.Done)
	}()
	t.Cleanup(func() { p.Stop(t) })
	select {
	case p.ReadyLine = <-ready:
		_, url, _ := strings.Cut(p.ReadyLine, "listening on ")
		p.URL = strings.TrimSpace(url)
		return p
	case <-p.Done:
		t.Fatalf("%s exited %d before it was ready:\n%s", args[0], p.Code, p.Stderr.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("%s not ready after 90s:\n%s", args[0], p.Stderr.String())
	}
	return nil
}

// Stop sends SIGTERM and returns the exit code (killing after 20s).
func (p *Proc) Stop(t *testing.T) int {
	select {
	case <-p.Done:
		return p.Code
	default:
	}
	p.Cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck
	select {
	case <-p.Done:
	case <-time.After(20 * time.Second):
		p.Cmd.Process.Kill() //nolint:errcheck
		<-p.Done
		t.Errorf("%s did not stop within 20s of SIGTERM", p.Cmd.Args[1])
	}
	return p.Code
}

// BuildBinary builds the command in pkg (a directory, relative to the
// test's package) into the test's temporary directory and returns its
// path; the build cache makes a second build a link.
func BuildBinary(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}
