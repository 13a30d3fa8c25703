package testutil

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/freeport"
)

// StartPgBouncer starts PgBouncer (the Debian package's binary:
// apt-get install pgbouncer) in front of the PostgreSQL server of
// upstream, a postgres:// URL, with pool_mode mode ("session",
// "transaction") and its other settings at their defaults, and returns
// upstream's URL with its host and port replaced by PgBouncer's. It runs
// until the test ends. As root it runs as the "postgres" system user: it
// refuses to run as root.
func StartPgBouncer(t *testing.T, upstream, mode string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr != nil {
			t.Fatalf("PgBouncer is not installed (apt-get install -y pgbouncer): %v", err)
		}
		bin = "/usr/sbin/pgbouncer"
	}
	u, err := url.Parse(upstream)
	if err != nil || u.Hostname() == "" {
		t.Fatalf("testutil: PgBouncer needs a postgres:// URL with a host, not %q", upstream)
	}
	upPort := u.Port()
	if upPort == "" {
		upPort = "5432"
	}
	port, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}

	// Its own directory, not t.TempDir(): a server running as another
	// user must be able to reach it.
	dir, err := os.MkdirTemp("", "retrysafe-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
logfile = %s
`, u.Hostname(), upPort, port, filepath.Join(dir, "users.txt"), mode, filepath.Join(dir, "pgbouncer.log"))
	files := map[string]string{"pgbouncer.ini": ini, "users.txt": strconv.Quote(u.User.Username()) + ` ""` + "\n"}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		pu, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("PgBouncer refuses to run as root, and there is no postgres user to run it as: %v", err)
		}
		uid, _ := strconv.Atoi(pu.Uid)
		gid, _ := strconv.Atoi(pu.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if cred != nil {
		for _, p := range []string{dir, filepath.Join(dir, "pgbouncer.ini"), filepath.Join(dir, "users.txt")} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	out := &LockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			break
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			t.Fatalf("PgBouncer exited:\n%s%s", out.String(), log)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("PgBouncer not listening on %s after 10s:\n%s", addr, out.String())
		}
	}
	through := *u
	through.Host = addr
	return through.String()
}
