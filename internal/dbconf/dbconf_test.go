package dbconf_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/internal/dbconf"
	"github.com/retrysafe/retrysafe/internal/pgtest"
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

// sessionStartedAt opens a pool of PoolConfig whose sessions start with
// param at value, as a database or role default (ALTER DATABASE ... SET)
// would start them, and returns show as the pool's first session has it.
func sessionStartedAt(t *testing.T, param, value, show string) (string, error) {
	t.Helper()
	ctx := context.Background()
	cfg, err := dbconf.PoolConfig(pgtest.URL(t), "public")
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
	pool, err := dbconf.Open(ctx, u.String(), "public", 1)
	if err == nil {
		pool.Close()
		t.Fatal("a LATIN1 database was accepted")
	}
	if !errors.Is(err, dbconf.ErrEncoding) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "LATIN1") {
		t.Fatalf("error %v: want ErrEncoding naming the database and its encoding", err)
	}
}
