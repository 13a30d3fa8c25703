// Package pgembed starts a private, throwaway PostgreSQL cluster from the
// server binaries installed on the machine: initdb into a temporary
// directory, pg_ctl start on a free loopback port, and Stop removes it all.
//
// It exists so that `retrysafe demo` and friends work on a machine with
// PostgreSQL installed but no database configured. It is never used when
// DATABASE_URL is given.
//
// pg_ctl daemonizes the server, so a process killed before Stop would leave
// it running; a small reaper process (a shell in its own session) watches
// the starting process and stops and removes the cluster when it is gone.
package pgembed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"
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

// Start initializes and starts a cluster. PostgreSQL refuses to run as root,
// so as root the cluster is owned by and run as the "postgres" system user.
func Start(ctx context.Context) (*Cluster, error) {
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
	data := filepath.Join(dir, "data")
	if out, err := c.run(ctx, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	for attempt := 0; ; attempt++ {
		c.Port, err = freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200", c.Port, dir)
		out, err := c.run(ctx, "pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start")
		if err == nil {
			break
		}
		if attempt == 2 {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out, log)
		}
	}
	c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.Port)
	if err := c.startReaper(); err != nil {
		c.Stop() //nolint:errcheck
		return nil, fmt.Errorf("start the cluster's reaper: %w", err)
	}
	return c, nil
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
// into tests that run against their own cluster).
func (c *Cluster) Restart(ctx context.Context) error {
	out, err := c.run(ctx, "pg_ctl", "-D", filepath.Join(c.Dir, "data"), "-l", filepath.Join(c.Dir, "log"), "-m", "fast", "-w", "restart")
	if err != nil {
		return fmt.Errorf("pg_ctl restart: %w\n%s", err, out)
	}
	return nil
}

// Stop shuts the server down immediately and removes its directory.
func (c *Cluster) Stop() error {
	if c.reaper != nil {
		c.reaper.Process.Kill() //nolint:errcheck // already gone is fine
		c.reaper.Wait()         //nolint:errcheck // killed: an error by design
		c.reaper = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.run(ctx, "pg_ctl", "-D", filepath.Join(c.Dir, "data"), "-m", "immediate", "-w", "stop")
	rmErr := os.RemoveAll(c.Dir)
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	return rmErr
}

func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.Dir
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
