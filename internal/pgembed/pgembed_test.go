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
