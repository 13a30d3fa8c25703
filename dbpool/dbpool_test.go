package dbpool_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/procfs"

	"github.com/retrysafe/retrysafe/dbpool"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A session that would start with synchronous_commit off (a database or
// role default) runs with it on; a setting that survives a crash of the
// primary is left alone.
func TestSessionsCommitSynchronously(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ start, want string }{{"off", "on"}, {"local", "local"}, {"remote_apply", "remote_apply"}} {
		if got, err := sessionStartedAt(t, "synchronous_commit", tc.start, "synchronous_commit"); err != nil || got != tc.want {
			t.Errorf("session starting at %s runs with %q (%v), want %s", tc.start, got, err, tc.want)
		}
	}
}

// sessionStartedAt opens a pool of ParseConfig whose sessions start with
// param at value, as a database or role default (ALTER DATABASE ... SET)
// would start them, and returns show as the pool's first session has it.
func sessionStartedAt(t *testing.T, param, value, show string) (string, error) {
	t.Helper()
	ctx := context.Background()
	cfg, err := dbpool.ParseConfig(pgtest.URL(t), "public")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams[param] = value
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var got string
	err = pool.QueryRow(ctx, `SHOW `+show).Scan(&got)
	return got, err
}

// A session that would start with another default isolation than read
// committed (a database or role default) runs read committed.
func TestSessionsReadCommitted(t *testing.T) {
	t.Parallel()
	for _, start := range []string{"serializable", "repeatable read", "read uncommitted", "read committed"} {
		if got, err := sessionStartedAt(t, "default_transaction_isolation", start, "transaction_isolation"); err != nil || got != "read committed" {
			t.Errorf("session starting at %s runs %q (%v), want read committed", start, got, err)
		}
	}
}

// A database in another encoding than UTF8 is refused at the first
// connection, by name and encoding, before anything is written to it.
func TestEncodingOtherThanUTF8Refused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pgtest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	name := fmt.Sprintf("rstest_latin1_%d", time.Now().UnixNano())
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+name+` ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`); err != nil {
		t.Fatal(err)
	}
	// Registered after the close above, so it runs first.
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), `DROP DATABASE `+name+` WITH (FORCE)`); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	u, err := url.Parse(pgtest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	pool, err := dbpool.Open(ctx, u.String(), "public", 1)
	if err == nil {
		pool.Close()
		t.Fatal("a LATIN1 database was accepted")
	}
	if !errors.Is(err, dbpool.ErrEncoding) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "LATIN1") {
		t.Fatalf("error %v: want ErrEncoding naming the database and its encoding", err)
	}
}

// A session ParseConfig starts keeps a freed block of up to a megabyte for
// the next statement instead of handing it back to the kernel and faulting
// it in again (allocatorWarmup): three statements that each allocate and
// free 900 kB cost the backend no page fault. Without the warm-up, glibc
// maps and unmaps the block every time: about 220 faults per statement
// (1254 for the three, seen 2026-12-06). The backend's faults are read
// from /proc, so the server must run on this machine, as the test
// server does (pgtest).
func TestSessionKeepsFreedMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := dbpool.ParseConfig(pgtest.URL(t), "public")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	faults := func() uint {
		t.Helper()
		p, err := procfs.NewProc(pid)
		if err != nil {
			t.Fatalf("the backend's page faults (the test server must run on this machine): %v", err)
		}
		st, err := p.Stat()
		if err != nil {
			t.Fatal(err)
		}
		return st.MinFlt
	}
	const stmt = `SELECT length(repeat(' ', 900000))`
	if _, err := conn.Exec(ctx, stmt); err != nil { // the heap grows to hold it once
		t.Fatal(err)
	}
	before := faults()
	for range 3 {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	// A few faults are allowed for anything else the statements touch for
	// the first time; the block alone would be hundreds.
	if n := faults() - before; n > 30 {
		t.Errorf("three statements that allocate and free 900 kB cost the backend %d page faults, want almost none: it hands the block back to the kernel each time", n)
	}
}

// Configure on a pool configuration the application built itself: the
// sessions start as retrysafe's statements assume (here against a
// serializable default, as ALTER DATABASE ... SET would make it), and the
// application's own AfterConnect still runs, once per connection, after
// that start and on the configured session.
func TestConfigureKeepsTheApplicationsHook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "serializable"
	var hooked atomic.Int32
	var seen atomic.Value
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		hooked.Add(1)
		var path, iso string
		if err := c.QueryRow(ctx, `SELECT current_setting('search_path'), current_setting('transaction_isolation')`).Scan(&path, &iso); err != nil {
			return err
		}
		seen.Store(path + " / " + iso)
		return nil
	}
	if err := dbpool.Configure(cfg, migrations.DefaultSchema); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var iso string
	if err := pool.QueryRow(ctx, `SHOW transaction_isolation`).Scan(&iso); err != nil || iso != "read committed" {
		t.Fatalf("the pool's session runs %q (%v), want read committed", iso, err)
	}
	if n := hooked.Load(); n != 1 {
		t.Errorf("the application's AfterConnect ran %d times for one connection, want 1", n)
	}
	if got, want := seen.Load(), migrations.DefaultSchema+",public / read committed"; got != want {
		t.Errorf("the application's AfterConnect saw %q, want %q (it runs after the session's start)", got, want)
	}
}

// Configure refuses what it cannot configure and leaves the configuration
// as it was.
func TestConfigureRefuses(t *testing.T) {
	t.Parallel()
	if err := dbpool.Configure(nil, "public"); err == nil {
		t.Error("Configure(nil) succeeded")
	}
	cfg, err := pgxpool.ParseConfig("postgres://u@127.0.0.1:1/db")
	if err != nil {
		t.Fatal(err)
	}
	if err := dbpool.Configure(cfg, "Bad-Schema"); !errors.Is(err, migrations.ErrBadSchema) {
		t.Errorf("a bad schema name: %v, want ErrBadSchema", err)
	}
	if cfg.AfterConnect != nil {
		t.Error("a refused Configure changed AfterConnect")
	}
	if _, err := dbpool.ParseConfig("postgres://u@127.0.0.1:1/db", "Bad-Schema"); !errors.Is(err, migrations.ErrBadSchema) {
		t.Errorf("ParseConfig with a bad schema name: %v, want ErrBadSchema", err)
	}
}
