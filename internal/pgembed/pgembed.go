// Package pgembed starts a private, throwaway PostgreSQL cluster from the
// server binaries installed on the machine: initdb into a temporary
// directory, pg_ctl start on a free loopback port (internal/freeport: below
// the kernel's ephemeral range, so that no outgoing connection takes it
// between the pick and the start), and Stop removes it all.
//
// It exists so that `retrysafe demo` and friends work on a machine with
// PostgreSQL installed but no database configured. It is never used when
// DATABASE_URL is given.
//
// pg_ctl daemonizes the server, so a process killed before Stop would leave
// it running; a small reaper process (a shell in its own session) watches
// the starting process and stops and removes the cluster when it is gone.
//
// # Durability
//
// A cluster runs PostgreSQL's durable settings (fsync, synchronous_commit
// and full_page_writes on, passed explicitly) unless Options.Unsafe: the
// restart test crashes it on purpose (Crash: SIGKILL of the postmaster and
// every backend at once, then Recover through crash recovery) and must see
// what a real crash loses. A SIGKILL of the server's processes loses what
// was only in PostgreSQL's shared memory (WAL not yet written: the commits
// of synchronous_commit=off from the last few hundred milliseconds), not
// what the kernel holds; losing the kernel's page cache (fsync=off,
// full_page_writes=off) takes a machine crash, which this package does not
// simulate.
//
// # Standbys
//
// Standby takes a base backup of a running cluster (pg_basebackup) and
// starts it as a streaming standby under an application_name, which the
// primary can name in synchronous_standby_names for synchronous
// replication; Promote makes it a primary. Every cluster, standby or not,
// has its own directory, port and reaper.
package pgembed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"

	"github.com/retrysafe/retrysafe/internal/freeport"
)

// ErrNotInstalled means no initdb/pg_ctl could be found.
var ErrNotInstalled = errors.New("PostgreSQL server binaries (initdb, pg_ctl) not found; install them with `apt-get install -y postgresql` or set DATABASE_URL")

// Cluster is a running private cluster.
type Cluster struct {
	Dir  string // data and socket directory, removed by Stop
	Port int
	URL  string // postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable
	bin  string
	cred *syscall.Credential
	opts string // the postgres options pg_ctl starts it with (Recover reuses them)
	// exe, when not empty, is the script pg_ctl starts instead of the
	// postgres binary (Options.Wrap).
	exe string
	// env is added to the environment of every command run for the
	// cluster (Options.Env): pg_ctl passes it on to the postmaster, and
	// the postmaster to every backend it forks.
	env []string
	// reaper stops and removes the cluster if this process dies without
	// Stop (SIGKILL, a crash): pg_ctl daemonizes the postmaster, so nothing
	// else would.
	reaper *exec.Cmd
}

// FindBinDir locates the directory holding initdb and pg_ctl: PG_BINDIR, then
// PATH, then /usr/lib/postgresql/<newest>/bin.
func FindBinDir() (string, error) {
	if d := os.Getenv("PG_BINDIR"); d != "" {
		if fileExists(filepath.Join(d, "initdb")) {
			return d, nil
		}
		return "", fmt.Errorf("PG_BINDIR=%s has no initdb: %w", d, ErrNotInstalled)
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if d := filepath.Dir(p); fileExists(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(matches, func(i, j int) bool { return versionOf(matches[i]) > versionOf(matches[j]) })
	for _, m := range matches {
		d := filepath.Dir(m)
		if fileExists(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", ErrNotInstalled
}

func versionOf(initdb string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return v
}

// Options configure a cluster. The zero value is a durable cluster on a
// free port.
type Options struct {
	// Unsafe runs with fsync, synchronous_commit and full_page_writes off:
	// faster, and a crash of the machine may lose or corrupt anything in
	// it. For throwaway data only.
	Unsafe bool
	// Settings are more server settings, "name=value" each, passed as -c
	// after the defaults (a later one wins). A setting given here cannot
	// be changed by ALTER SYSTEM.
	Settings []string
	// Port to listen on; 0 picks a free one.
	Port int
	// DataFiles are written into the data directory after initdb (one
	// initdb wrote, like pg_hba.conf, is replaced), owned by the server's
	// user and readable by it alone, as PostgreSQL wants a private key:
	// TLS (server.crt, server.key, a CA named by ssl_ca_file in Settings).
	DataFiles map[string][]byte
	// Wrap, when set, is a command line the server runs under: the
	// postmaster is started as Wrap followed by the postgres binary and its
	// arguments (pg_ctl -p with a script in the cluster's directory), and
	// every backend it forks runs under it too. The benchmark's instruction
	// counts use it to run the server under valgrind's callgrind.
	Wrap []string
	// Env is more environment for the server, "NAME=value" each, added to
	// this process's own: the postmaster and every backend it forks start
	// with it. The benchmark uses it for glibc's allocator
	// (GLIBC_TUNABLES), which reads its environment once, at start.
	Env []string
}

// durableSettings are passed explicitly, so that the cluster is durable
// whatever the installation's postgresql.conf template says.
var durableSettings = []string{"fsync=on", "synchronous_commit=on", "full_page_writes=on"}

var unsafeSettings = []string{"fsync=off", "synchronous_commit=off", "full_page_writes=off"}

// CheckEnv refuses an Options.Env entry that is not NAME=value with a
// name of no blanks; callers that take entries from flags check them with
// it before starting anything.
func CheckEnv(e string) error {
	if name, _, ok := strings.Cut(e, "="); !ok || name == "" || strings.ContainsAny(name, " \t") {
		return fmt.Errorf("environment entry %q is not NAME=value", e)
	}
	return nil
}

// Start initializes and starts a durable cluster on a free port. PostgreSQL
// refuses to run as root, so as root the cluster is owned by and run as the
// "postgres" system user.
func Start(ctx context.Context) (*Cluster, error) { return StartWith(ctx, Options{}) }

// StartWith is Start with options.
func StartWith(ctx context.Context, o Options) (*Cluster, error) {
	for _, e := range o.Env {
		if err := CheckEnv(e); err != nil {
			return nil, fmt.Errorf("pgembed: %w", err)
		}
	}
	c, err := newCluster()
	if err != nil {
		return nil, err
	}
	c.env = slices.Clone(o.Env)
	data := filepath.Join(c.Dir, "data")
	// --no-sync: initdb's own files need no fsync for a cluster that
	// lives as long as this process (a machine crash loses it anyway).
	if out, err := c.run(ctx, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync"); err != nil {
		os.RemoveAll(c.Dir)
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	if err := c.writeDataFiles(data, o.DataFiles); err != nil {
		os.RemoveAll(c.Dir)
		return nil, err
	}
	settings := durableSettings
	if o.Unsafe {
		settings = unsafeSettings
	}
	if len(o.Wrap) > 0 {
		if err := c.wrap(o.Wrap); err != nil {
			os.RemoveAll(c.Dir)
			return nil, err
		}
	}
	if err := c.launch(ctx, o.Port, append(slices.Clone(settings), o.Settings...)); err != nil {
		os.RemoveAll(c.Dir)
		return nil, err
	}
	return c, nil
}

// newCluster makes the directory of a cluster, owned by the user the
// server will run as.
func newCluster() (*Cluster, error) {
	bin, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "retrysafe-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root needs a 'postgres' system user to own the private cluster: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	return c, nil
}

// writeDataFiles writes Options.DataFiles into the data directory.
func (c *Cluster) writeDataFiles(data string, files map[string][]byte) error {
	for name, b := range files {
		if name != filepath.Base(name) || name == "." || name == ".." {
			return fmt.Errorf("pgembed: data file %q: a plain file name is required", name)
		}
		p := filepath.Join(data, name)
		// Chmod too: WriteFile keeps the mode of a file initdb wrote.
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return err
		}
		if err := os.Chmod(p, 0o600); err != nil {
			return err
		}
		if c.cred != nil {
			if err := os.Chown(p, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return err
			}
		}
	}
	return nil
}

// wrap writes the script that runs postgres under cmd and makes it the
// executable pg_ctl starts.
func (c *Cluster) wrap(cmd []string) error {
	quoted := make([]string, 0, len(cmd)+1)
	for _, a := range append(slices.Clone(cmd), filepath.Join(c.bin, "postgres")) {
		quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	c.exe = filepath.Join(c.Dir, "postgres-wrapped")
	if err := os.WriteFile(c.exe, []byte("#!/bin/sh\nexec "+strings.Join(quoted, " ")+` "$@"`+"\n"), 0o755); err != nil {
		return err
	}
	if c.cred != nil {
		return os.Chown(c.exe, int(c.cred.Uid), int(c.cred.Gid))
	}
	return nil
}

// startArgs are pg_ctl's arguments to start the server with the cluster's
// options, and its own executable when wrapped.
func (c *Cluster) startArgs(timeout string) []string {
	args := []string{"-D", filepath.Join(c.Dir, "data"), "-o", c.opts, "-l", filepath.Join(c.Dir, "log"), "-w", "-t", timeout}
	if c.exe != "" {
		args = append(args, "-p", c.exe)
	}
	return append(args, "start")
}

// launch starts the server on port (0: a free one, retried if taken
// meanwhile) with settings, and its reaper.
func (c *Cluster) launch(ctx context.Context, port int, settings []string) error {
	for attempt := 0; ; attempt++ {
		c.Port = port
		if port == 0 {
			p, err := freeport.Pick()
			if err != nil {
				return err
			}
			c.Port = p
		}
		opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c max_connections=200", c.Port, c.Dir)
		for _, s := range settings {
			opts += " -c " + s
		}
		c.opts = opts
		out, err := c.run(ctx, "pg_ctl", c.startArgs("120")...)
		if err == nil {
			break
		}
		if attempt == 2 || port != 0 {
			log, _ := os.ReadFile(filepath.Join(c.Dir, "log"))
			return fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out, tail(log, 20))
		}
	}
	c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.Port)
	if err := c.startReaper(); err != nil {
		c.Stop() //nolint:errcheck
		return fmt.Errorf("start the cluster's reaper: %w", err)
	}
	return nil
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// startReaper starts a shell, in its own session so that a Ctrl-C aimed at
// this process does not reach it, that waits for this process to end and
// then stops the server and removes its directory. It watches /proc rather
// than kill -0, which the cluster's owner may not send to a root parent.
// Stop kills it first: then it does nothing.
func (c *Cluster) startReaper() error {
	script := `while [ -e /proc/$0 ]; do sleep 1; done; "$1" -D "$2/data" -m immediate -w stop >/dev/null 2>&1; rm -rf "$2"`
	cmd := exec.Command("/bin/sh", "-c", script, strconv.Itoa(os.Getpid()), filepath.Join(c.bin, "pg_ctl"), c.Dir)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: c.cred}
	if err := cmd.Start(); err != nil {
		return err
	}
	c.reaper = cmd
	return nil
}

// Restart restarts the server in place (used to inject a database restart
// into tests that run against their own cluster): a fast shutdown, which
// checkpoints, so nothing committed is lost.
func (c *Cluster) Restart(ctx context.Context) error {
	out, err := c.run(ctx, "pg_ctl", "-D", filepath.Join(c.Dir, "data"), "-l", filepath.Join(c.Dir, "log"), "-m", "fast", "-w", "restart")
	if err != nil {
		return fmt.Errorf("pg_ctl restart: %w\n%s", err, out)
	}
	return nil
}

// Crash kills the server as a crash would: the postmaster and every one of
// its processes (backends, WAL writer, checkpointer...) get SIGKILL at the
// same moment, with no shutdown checkpoint and nothing more written. It
// returns once they are all gone. Recover starts it again.
//
// They are frozen first (SIGSTOP, the postmaster before its children, so
// that it forks no new one and notices no death), then killed: none of
// them outlives another long enough to write or answer anything more.
// Backends are not in the postmaster's process group (each calls setsid),
// so they are found by their parent in /proc.
func (c *Cluster) Crash() error {
	pid, err := c.postmasterPID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("stop postmaster %d: %w", pid, err)
	}
	procs := []int{pid}
	seen := map[int]bool{pid: true}
	// A child forked just before the postmaster stopped shows up on a
	// later scan; three scans that find nothing new end it.
	for quiet := 0; quiet < 3; {
		quiet++
		for _, ch := range childrenOf(pid) {
			if !seen[ch] {
				seen[ch] = true
				procs = append(procs, ch)
				syscall.Kill(ch, syscall.SIGSTOP) //nolint:errcheck // gone already is fine
				quiet = 0
			}
		}
	}
	for _, p := range procs {
		syscall.Kill(p, syscall.SIGKILL) //nolint:errcheck // gone already is fine
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range procs {
		for alive(p) {
			if time.Now().After(deadline) {
				return fmt.Errorf("process %d of the cluster still alive 30s after SIGKILL", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// A postmaster nobody has reaped yet is a zombie whose pid still
	// answers kill(pid, 0): the next start would take its lock file for a
	// running server's (and the socket's lock file names it too). Every
	// process of the cluster is dead, so both are stale.
	if isZombie(pid) {
		os.Remove(filepath.Join(c.Dir, "data", "postmaster.pid"))                //nolint:errcheck
		os.Remove(filepath.Join(c.Dir, fmt.Sprintf(".s.PGSQL.%d.lock", c.Port))) //nolint:errcheck
	}
	return nil
}

// Recover starts a crashed (or stopped) server again with the options it
// had; PostgreSQL replays its WAL from the last checkpoint (crash
// recovery) before it accepts connections.
func (c *Cluster) Recover(ctx context.Context) error {
	out, err := c.run(ctx, "pg_ctl", c.startArgs("120")...)
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(c.Dir, "log"))
		return fmt.Errorf("pg_ctl start after a crash: %w\n%s\n%s", err, out, tail(log, 20))
	}
	return nil
}

// Running reports whether the server answers pg_ctl status.
func (c *Cluster) Running(ctx context.Context) bool {
	_, err := c.run(ctx, "pg_ctl", "-D", filepath.Join(c.Dir, "data"), "status")
	return err == nil
}

// Stop shuts the server down immediately and removes its directory. A
// server that is not running (crashed) is only removed.
func (c *Cluster) Stop() error {
	if c.reaper != nil {
		c.reaper.Process.Kill() //nolint:errcheck // already gone is fine
		c.reaper.Wait()         //nolint:errcheck // killed: an error by design
		c.reaper = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	var out []byte
	if c.Running(ctx) {
		out, err = c.run(ctx, "pg_ctl", "-D", filepath.Join(c.Dir, "data"), "-m", "immediate", "-w", "stop")
	}
	rmErr := os.RemoveAll(c.Dir)
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	return rmErr
}

// postmasterPID reads the first line of postmaster.pid.
func (c *Cluster) postmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.Dir, "data", "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("no running server: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("postmaster.pid: bad pid %q", line)
	}
	if !alive(pid) {
		return 0, fmt.Errorf("postmaster %d is not running", pid)
	}
	return pid, nil
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) []int {
	procs, _ := procfs.AllProcs()
	var out []int
	for _, p := range procs {
		if st, err := p.Stat(); err == nil && st.PPID == pid {
			out = append(out, p.PID)
		}
	}
	return out
}

// procStat reads a process's /proc/PID/stat (procfs: the command in its
// second field may hold spaces and parentheses).
func procStat(pid int) (procfs.ProcStat, bool) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return procfs.ProcStat{}, false
	}
	st, err := p.Stat()
	return st, err == nil
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	st, ok := procStat(pid)
	return ok && st.State != "Z" && st.State != "X"
}

func isZombie(pid int) bool {
	st, ok := procStat(pid)
	return ok && st.State == "Z"
}

func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.Dir
	if len(c.env) > 0 {
		cmd.Env = append(os.Environ(), c.env...)
	}
	// Output goes to a file, not a pipe: the postmaster that pg_ctl forks
	// inherits the descriptor, and a pipe would keep Run waiting for EOF
	// until the server exits.
	out, err := os.CreateTemp("", "retrysafe-pgctl-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group: a Ctrl-C aimed at retrysafe must not kill the
	// server before Stop runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	err = cmd.Run()
	text, _ := os.ReadFile(out.Name())
	return text, err
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
