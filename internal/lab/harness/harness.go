// Package harness starts, kills and restarts retrysafe's own processes (the
// sandbox stand-ins, the server, workers) for `retrysafe demo` and
// `retrysafe restart-test`. Killing a real process with SIGKILL is the only
// honest way to show what survives a crash, so the harness works with
// processes, not goroutines.
//
// Every child runs in its own process group and gets SIGKILL if the harness
// itself dies (Pdeathsig), so an interrupted run leaves nothing behind.
//
// A stack's PSP is the v1 sandbox (pix.charge with Idempotency-Key, signed
// payment webhooks) or, with StackConfig.PSPFlavour = PSPAPIPix, the
// sandbox speaking the Central Bank's API Pix (pix.cob, pix.refund, the Pix
// callback to the server, authenticated by webhook.PixURLToken).
//
// A stack on its own private cluster (StackConfig.Database) can have the
// database crashed (CrashDatabase) or failed over to a streaming standby
// (Failover), with the sandbox PSP's ledger on a cluster of its own that
// neither touches.
package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Spec describes one process.
type Spec struct {
	Name string
	Bin  string // default: this executable
	Args []string
	Env  []string // added to the current environment
	// Ready is the prefix of the stdout line that says the process is up;
	// the rest of that line (trimmed) becomes Proc.Ready. Empty: don't wait.
	Ready   string
	Timeout time.Duration // to become ready; default 60 s
	// Log, when set, receives the child's stdout and stderr.
	Log io.Writer
}

// Proc is a running (or finished) child.
type Proc struct {
	Name  string
	Ready string // what followed Spec.Ready, e.g. the listening URL
	cmd   *exec.Cmd
	done  chan struct{}
	err   error
	tail  *ring
}

// ErrExited means the process ended before it became ready. Start returns
// the ended Proc with it, so that a caller can read how it ended (Tail,
// Err): a worker armed to die at a failpoint may reach it before it says
// it is ready, since it takes work as soon as it starts.
var ErrExited = errors.New("process exited")

// Start runs spec and waits until its ready line appears.
func Start(ctx context.Context, spec Spec) (*Proc, error) {
	bin := spec.Bin
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		bin = exe
	}
	timeout := spec.Timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	cmd := exec.Command(bin, spec.Args...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &Proc{Name: spec.Name, cmd: cmd, done: make(chan struct{}), tail: newRing(64)}
	var logw io.Writer = p.tail
	if spec.Log != nil {
		logw = io.MultiWriter(p.tail, spec.Log)
	}
	cmd.Stderr = prefixWriter(spec.Name, logw)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	ready := make(chan string, 1)
	var scanDone sync.WaitGroup
	scanDone.Add(1)
	go func() {
		defer scanDone.Done()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintf(prefixWriter(spec.Name, logw), "%s\n", line)
			if !sent && spec.Ready != "" && strings.HasPrefix(line, spec.Ready) {
				ready <- strings.TrimSpace(strings.TrimPrefix(line, spec.Ready))
				sent = true
			}
		}
	}()
	go func() {
		scanDone.Wait() // Wait must not run before the pipe is drained
		p.err = cmd.Wait()
		close(p.done)
	}()
	if spec.Ready == "" {
		return p, nil
	}
	select {
	case r := <-ready:
		p.Ready = r
		return p, nil
	case <-p.done:
		return p, fmt.Errorf("%s: %w before it was ready (%v)\n%s", spec.Name, ErrExited, p.err, p.tail)
	case <-time.After(timeout):
		p.Kill()
		return nil, fmt.Errorf("%s: not ready after %s\n%s", spec.Name, timeout, p.tail)
	case <-ctx.Done():
		p.Kill()
		return nil, ctx.Err()
	}
}

// Pid is the child's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the exit error once Done is closed.
func (p *Proc) Err() error {
	<-p.done
	return p.err
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL to the process group and waits for the exit: no
// deferred function, no shutdown hook, no flush runs in the child.
func (p *Proc) Kill() {
	if p.Exited() {
		return
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // already gone is fine
	<-p.done
}

// Stop asks for a graceful exit (SIGTERM) and kills after grace.
func (p *Proc) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM) //nolint:errcheck
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}

// Tail is the last lines the process wrote (for error messages).
func (p *Proc) Tail() string { return p.tail.String() }

func prefixWriter(name string, w io.Writer) io.Writer {
	return &prefixed{prefix: "[" + name + "] ", w: w}
}

type prefixed struct {
	mu     sync.Mutex
	prefix string
	w      io.Writer
	mid    bool
}

func (p *prefixed) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []byte
	for _, c := range b {
		if !p.mid {
			out = append(out, p.prefix...)
			p.mid = true
		}
		out = append(out, c)
		if c == '\n' {
			p.mid = false
		}
	}
	_, err := p.w.Write(out)
	return len(b), err
}

// ring keeps the last n lines written to it.
type ring struct {
	mu    sync.Mutex
	lines []string
	n     int
	part  strings.Builder
}

func newRing(n int) *ring { return &ring{n: n} }

func (r *ring) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range b {
		if c == '\n' {
			r.lines = append(r.lines, r.part.String())
			r.part.Reset()
			if len(r.lines) > r.n {
				r.lines = r.lines[len(r.lines)-r.n:]
			}
			continue
		}
		r.part.WriteByte(c)
	}
	return len(b), nil
}

func (r *ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}
