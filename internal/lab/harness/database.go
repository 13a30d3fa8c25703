package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/internal/pgembed"
)

// DatabaseConfig describes a stack's private cluster, which always runs
// durable settings (pgembed's default): the restart test crashes it and
// must see what a crash loses, and a server that refuses fsync=off starts
// on it without an override.
type DatabaseConfig struct {
	// SynchronousCommit, when set, is made the database's default with
	// ALTER DATABASE postgres SET synchronous_commit before any process
	// connects: an operator's throughput tuning, which a transaction can
	// still override for itself (SET LOCAL, set_config(..., true)).
	SynchronousCommit string
	// Standby: "" none; "sync" a streaming standby the primary names in
	// synchronous_standby_names (a commit returns once the standby has
	// flushed it); "async" a streaming standby the primary does not wait
	// for. Every process then gets a URL naming both hosts with
	// target_session_attrs=read-write, and Failover swaps them.
	Standby string
	// SeparatePSP keeps the sandbox PSP's tables on a cluster of their
	// own, which the database faults never touch: a real provider's
	// ledger does not go down, or lose commits, with retrysafe's database.
	SeparatePSP bool
}

// standbyName is the standby's application_name at the primary.
const standbyName = "retrysafe_standby"

var synchronousCommitValues = []string{"on", "off", "local", "remote_write", "remote_apply"}

func (c DatabaseConfig) validate() error {
	if c.SynchronousCommit != "" && !slices.Contains(synchronousCommitValues, c.SynchronousCommit) {
		return fmt.Errorf("synchronous_commit %q: want one of %v", c.SynchronousCommit, synchronousCommitValues)
	}
	if c.Standby != "" && c.Standby != "sync" && c.Standby != "async" {
		return fmt.Errorf("standby %q: want sync, async or none", c.Standby)
	}
	return nil
}

// startClusters starts the private cluster (with its standby) and, when
// asked, the PSP's own, and sets s.URL.
func (s *Stack) startClusters(ctx context.Context) error {
	dc := s.Cfg.Database
	if err := dc.validate(); err != nil {
		return err
	}
	var err error
	if s.Cluster, err = pgembed.Start(ctx); err != nil {
		return err
	}
	s.URL = s.Cluster.URL
	if dc.SynchronousCommit != "" {
		if err := execOn(ctx, s.Cluster.URL, "ALTER DATABASE postgres SET synchronous_commit = "+dc.SynchronousCommit); err != nil {
			return err
		}
	}
	if dc.Standby != "" {
		if err := s.attachStandby(ctx, 0); err != nil {
			return err
		}
	}
	if dc.SeparatePSP {
		if s.PSPCluster, err = pgembed.Start(ctx); err != nil {
			return fmt.Errorf("the PSP's cluster: %w", err)
		}
	}
	return nil
}

// attachStandby makes a standby of s.Cluster on port (0: a free one),
// makes it synchronous if so configured, waits until it streams, and sets
// s.URL to name both.
func (s *Stack) attachStandby(ctx context.Context, port int) error {
	sb, err := s.Cluster.Standby(ctx, pgembed.StandbyOptions{Name: standbyName, Port: port})
	if err != nil {
		return err
	}
	s.Standby = sb
	want := "async"
	names := ""
	if s.Cfg.Database.Standby == "sync" {
		want, names = "sync", standbyName
	}
	if err := execOn(ctx, s.Cluster.URL, "ALTER SYSTEM SET synchronous_standby_names = '"+names+"'", "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	if err := waitStreaming(ctx, s.Cluster.URL, want); err != nil {
		return err
	}
	s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write", s.Cluster.Port, s.Standby.Port)
	return nil
}

// waitStreaming waits until the primary at url streams to the standby
// with sync_state want.
func waitStreaming(ctx context.Context, url, want string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(time.Minute)
	for {
		var state string
		err := conn.QueryRow(ctx, `SELECT coalesce(max(sync_state), '') FROM pg_stat_replication
			WHERE application_name = $1 AND state = 'streaming'`, standbyName).Scan(&state)
		if err != nil {
			return err
		}
		if state == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the standby is not streaming as %s after a minute (sync_state %q)", want, state)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func execOn(ctx context.Context, url string, stmts ...string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, q := range stmts {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// ErrNoCluster means a database fault was asked of a stack that did not
// start its own cluster (or has no standby, for Failover).
var ErrNoCluster = errors.New("the stack runs no private cluster of its own")

// CrashDatabase crashes the private cluster (SIGKILL of the postmaster and
// every backend at once: pgembed.Cluster.Crash) and starts it again
// through crash recovery. It returns how long the database was down.
func (s *Stack) CrashDatabase(ctx context.Context) (time.Duration, error) {
	if s.Cluster == nil {
		return 0, ErrNoCluster
	}
	start := time.Now()
	if err := s.Cluster.Crash(); err != nil {
		return 0, err
	}
	if err := s.Cluster.Recover(ctx); err != nil {
		return time.Since(start), err
	}
	return time.Since(start), nil
}

// FailoverTimes are how long a failover's steps took.
type FailoverTimes struct {
	// Down: from the primary's crash until the standby accepted writes.
	Down time.Duration
	// Rebuild: the new standby's base backup until it streamed.
	Rebuild time.Duration
}

// Failover crashes the primary (as CrashDatabase), promotes the standby,
// which every process reaches through the URL's second host, and then
// builds a new standby of it on the dead primary's port, so that the URL
// stays the same and the next failover can go the other way.
func (s *Stack) Failover(ctx context.Context) (FailoverTimes, error) {
	var ft FailoverTimes
	if s.Cluster == nil || s.Standby == nil {
		return ft, ErrNoCluster
	}
	start := time.Now()
	old := s.Cluster
	if err := old.Crash(); err != nil {
		return ft, err
	}
	if err := s.Standby.Promote(ctx); err != nil {
		return ft, err
	}
	ft.Down = time.Since(start)
	s.mu.Lock()
	s.Cluster, s.Standby = s.Standby, nil
	s.mu.Unlock()
	if err := old.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "remove the old primary: %v\n", err)
	}
	start = time.Now()
	if err := s.attachStandby(ctx, old.Port); err != nil {
		return ft, fmt.Errorf("a new standby: %w", err)
	}
	ft.Rebuild = time.Since(start)
	return ft, nil
}

func (s *Stack) stopClusters() {
	for _, c := range []*pgembed.Cluster{s.Standby, s.Cluster, s.PSPCluster} {
		if c != nil {
			if err := c.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "stop private cluster: %v\n", err)
			}
		}
	}
}
