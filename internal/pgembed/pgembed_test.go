package pgembed_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/internal/pgembed"
)

// Starting a real private cluster is the only honest test of this package.
func TestStartQueryStop(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgembed.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		c.Stop()
		t.Fatal(err)
	}
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Errorf("SELECT 1 = %d, %v", one, err)
	}
	conn.Close(ctx)
	if err := c.Restart(ctx); err != nil {
		t.Error(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("cluster dir %s still exists after Stop", c.Dir)
	}
}

func TestMissingBinaries(t *testing.T) {
	t.Setenv("PG_BINDIR", t.TempDir())
	if _, err := pgembed.FindBinDir(); err == nil {
		t.Fatal("FindBinDir accepted a directory with no initdb")
	}
}

// A process killed with SIGKILL cannot stop its cluster; the reaper does:
// the server goes and its directory is removed within seconds.
func TestClusterGoesWithKilledParent(t *testing.T) {
	t.Parallel()
	if os.Getenv("PGEMBED_CHILD") == "1" {
		t.Skip("the child's own run")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildHoldsCluster$", "-test.v")
	cmd.Env = append(os.Environ(), "PGEMBED_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var dir, addr string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "CLUSTER "); ok {
			f := strings.Fields(rest)
			dir, addr = f[0], f[1]
			break
		}
	}
	if dir == "" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the child printed no cluster")
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no deferred Stop runs
		t.Fatal(err)
	}
	cmd.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, statErr := os.Stat(dir)
		conn, dialErr := net.DialTimeout("tcp", addr, time.Second)
		if dialErr == nil {
			conn.Close()
		}
		if os.IsNotExist(statErr) && dialErr != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("30s after SIGKILL of its parent: dir %s exists %v, server on %s answers %v", dir, statErr == nil, addr, dialErr == nil)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestChildHoldsCluster is TestClusterGoesWithKilledParent's child: it
// starts a cluster, says where, and waits to be killed.
func TestChildHoldsCluster(t *testing.T) {
	if os.Getenv("PGEMBED_CHILD") != "1" {
		t.Skip("run by TestClusterGoesWithKilledParent")
	}
	c, err := pgembed.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("CLUSTER %s 127.0.0.1:%d\n", c.Dir, c.Port)
	time.Sleep(2 * time.Minute)
	c.Stop()
}

// Crash must kill every process of the cluster at once, with no shutdown
// checkpoint: Recover then goes through crash recovery (the log says so),
// and what was committed synchronously is there.
func TestCrashRecover(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, conn := startConnected(ctx, t, pgembed.Options{})
	var fsync, syncCommit, fpw string
	if err := conn.QueryRow(ctx, "SELECT current_setting('fsync'), current_setting('synchronous_commit'), current_setting('full_page_writes')").Scan(&fsync, &syncCommit, &fpw); err != nil {
		t.Fatal(err)
	}
	if fsync != "on" || syncCommit != "on" || fpw != "on" {
		t.Errorf("fsync %s, synchronous_commit %s, full_page_writes %s: want every one on", fsync, syncCommit, fpw)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (v int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	// A second session stays open: its backend must die with the rest.
	if err := c.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := conn.Ping(ctx); err == nil {
		t.Error("a session of the crashed cluster still answers")
	}
	conn.Close(ctx)
	if _, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", c.Port), time.Second); err == nil {
		t.Error("the crashed cluster's port still accepts connections")
	}
	if err := c.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(c.Dir + "/log")
	if !strings.Contains(string(log), "was interrupted") && !strings.Contains(string(log), "not properly shut down") {
		t.Errorf("no crash recovery in the server's log:\n%s", log)
	}
	conn, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 1 {
		t.Errorf("after recovery: %d rows, %v; want the committed one", n, err)
	}
}

// A synchronous standby has every commit the primary acknowledged: crash
// the primary, promote the standby, and the row is there and writes work.
func TestStandbyFailover(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := pgembed.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	s, err := p.Standby(ctx, pgembed.StandbyOptions{Name: "sb1"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	conn, err := pgx.Connect(ctx, p.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = 'sb1'"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var state string
		err := conn.QueryRow(ctx, "SELECT coalesce(max(sync_state), '') FROM pg_stat_replication WHERE application_name = 'sb1' AND state = 'streaming'").Scan(&state)
		if err != nil {
			t.Fatal(err)
		}
		if state == "sync" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("standby sb1 not synchronous after a minute (sync_state %q)", state)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (v int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if err := p.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := s.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	// Both hosts, as an application would name them: the dead one is
	// skipped, the promoted one accepts writes.
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write", p.Port, s.Port)
	sc, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close(ctx)
	if _, err := sc.Exec(ctx, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatalf("write on the promoted standby: %v", err)
	}
	var n int
	if err := sc.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Errorf("promoted standby: %d rows, %v; want 2", n, err)
	}
}

// A wrapped server is started through the wrapper (the benchmark's
// instruction counts run it under callgrind, whose children, the
// backends, it then counts too): here a shell that leaves a mark, with a
// quote in its script, and then runs the server.
func TestWrap(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "pgembed-wrap-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o777); err != nil { // the server's user writes the mark
		t.Fatal(err)
	}
	mark := dir + "/mark"
	script := `echo "it's wrapped" > '` + mark + `'; exec "$0" "$@"`
	_, conn := startConnected(ctx, t, pgembed.Options{Wrap: []string{"sh", "-c", script}})
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	if b, err := os.ReadFile(mark); err != nil || string(b) != "it's wrapped\n" {
		t.Errorf("the wrapper's mark: %q, %v", b, err)
	}
}

// startConnected starts a cluster with o and connects to it; both end with
// the test.
func startConnected(ctx context.Context, t *testing.T, o pgembed.Options) (*pgembed.Cluster, *pgx.Conn) {
	t.Helper()
	c, err := pgembed.StartWith(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	conn, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return c, conn
}

// TestEnv checks that Options.Env reaches the backends, from the start and
// after a restart (the benchmark's GLIBC_TUNABLES must hold for every
// backend the server forks), and that an entry without a name is refused
// before anything is made.
func TestEnv(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := pgembed.StartWith(ctx, pgembed.Options{Env: []string{"=x"}}); err == nil || !strings.Contains(err.Error(), "NAME=value") {
		t.Fatalf("an entry without a name: %v", err)
	}
	c, conn := startConnected(ctx, t, pgembed.Options{Env: []string{"RETRYSAFE_PGEMBED_MARK=from the environment"}})
	// A backend's own environment, read by the shell it starts.
	read := func(conn *pgx.Conn) string {
		t.Helper()
		if _, err := conn.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS env_mark (v text); TRUNCATE env_mark;
			COPY env_mark FROM PROGRAM 'printf "%s\n" "$RETRYSAFE_PGEMBED_MARK"'`); err != nil {
			t.Fatal(err)
		}
		var v string
		if err := conn.QueryRow(ctx, "SELECT v FROM env_mark").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := read(conn); got != "from the environment" {
		t.Errorf("a backend's RETRYSAFE_PGEMBED_MARK = %q", got)
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close(ctx)
	if got := read(again); got != "from the environment" {
		t.Errorf("after a restart, a backend's RETRYSAFE_PGEMBED_MARK = %q", got)
	}
}
