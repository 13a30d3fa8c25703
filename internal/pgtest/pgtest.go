// Package pgtest gives every test package its own freshly created and
// migrated PostgreSQL database, and each test that asks for one its own
// schema inside it.
//
// Use it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// then pgtest.Pool(t, nil) for a pool on the package database's default
// schema, or pgtest.Schema(t, nil) for a fresh schema migrated with
// retrysafe's and River's migrations that no other
// test sees (and that is dropped when the test ends). pgtest.SchemaName
// names one for a command under test to create itself. pgtest.Private
// starts a cluster of the test's own, for a test that crashes or
// reconfigures its server.
//
// CheckGenericPlans explains the plan a connection would cache for each of
// a package's statements, and fails the test on any read in it of more
// rows than the statement names.
//
// The server comes from TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable). When it cannot
// be reached the whole package fails: a test that needs PostgreSQL never
// skips.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/dbpool"
	"github.com/retrysafe/retrysafe/internal/riverschema"
	"github.com/retrysafe/retrysafe/migrations"
)

// DefaultURL is the server tests use when TEST_DATABASE_URL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

var (
	dbURL   string // the package database
	started atomic.Bool
)

// ServerURL is the administrative connection tests create databases from.
func ServerURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Main creates the package database, migrates it, runs the tests, drops the
// database and exits. It exits 1 without running anything when PostgreSQL is
// unreachable.
func Main(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		fmt.Fprintf(os.Stderr, "pgtest: these tests need PostgreSQL; start it (./scripts/test does) or set TEST_DATABASE_URL\n")
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		return 0, fmt.Errorf("connect to %s: %w", dbpool.Redact(ServerURL()), err)
	}
	name := "rstest_" + packageSlug() + "_" + randHex(4)
	// UTF8 whatever the cluster's default: retrysafe refuses any other
	// encoding (dbpool.ErrEncoding).
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" ENCODING 'UTF8' TEMPLATE template0"); err != nil {
		admin.Close(ctx)
		return 0, fmt.Errorf("create database %s: %w", name, err)
	}
	admin.Close(ctx)

	dbURL, err = withDatabase(ServerURL(), name)
	if err != nil {
		return 0, err
	}
	defer dropDatabase(name)

	pool, err := dbpool.Open(ctx, dbURL, migrations.DefaultSchema, 2)
	if err != nil {
		return 0, err
	}
	if err := migrateAll(ctx, pool, migrations.DefaultSchema); err != nil {
		pool.Close()
		return 0, err
	}
	pool.Close()
	started.Store(true)
	return m.Run(), nil
}

// migrateAll creates retrysafe's tables and River's, as `retrysafe migrate`
// does.
func migrateAll(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if _, err := migrations.Migrate(ctx, pool, schema); err != nil {
		return err
	}
	_, err := riverschema.Migrate(ctx, pool, schema)
	return err
}

func dropDatabase(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: drop %s: %v\n", name, err)
		return
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: drop %s: %v\n", name, err)
	}
}

// URL is the package database's connection URL (for subprocesses under
// test). Its default schema is already migrated.
func URL(tb testing.TB) string {
	tb.Helper()
	mustStarted(tb)
	return dbURL
}

// Opts tunes Pool and Schema. A nil *Opts means the defaults.
type Opts struct {
	MaxConns int32 // default 4
}

// Pool returns a pool on the package database's default, shared schema.
// It is closed when the test ends.
func Pool(tb testing.TB, opts *Opts) *pgxpool.Pool {
	tb.Helper()
	mustStarted(tb)
	return open(tb, migrations.DefaultSchema, opts)
}

// Schema creates a fresh schema, migrates it, and returns a pool whose
// search_path points at it, plus the schema's name. The schema is dropped
// when the test ends.
func Schema(tb testing.TB, opts *Opts) (*pgxpool.Pool, string) {
	tb.Helper()
	mustStarted(tb)
	schema := "t_" + randHex(6)
	pool := open(tb, schema, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := migrateAll(ctx, pool, schema); err != nil {
		tb.Fatalf("pgtest: migrate %s: %v", schema, err)
	}
	tb.Cleanup(func() { dropSchema(tb, schema) })
	return pool, schema
}

// SchemaName names a fresh schema, prefix and random letters, for a
// command under test that creates (and migrates) it itself; the schema is
// dropped when the test ends, if it was created.
func SchemaName(tb testing.TB, prefix string) string {
	tb.Helper()
	mustStarted(tb)
	schema := prefix + randHex(4)
	tb.Cleanup(func() { dropSchema(tb, schema) })
	return schema
}

func dropSchema(tb testing.TB, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		tb.Logf("pgtest: drop schema %s: %v", schema, err)
		return
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		tb.Logf("pgtest: drop schema %s: %v", schema, err)
	}
}

func open(tb testing.TB, schema string, opts *Opts) *pgxpool.Pool {
	tb.Helper()
	maxConns := int32(4)
	if opts != nil && opts.MaxConns > 0 {
		maxConns = opts.MaxConns
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := dbpool.Open(ctx, dbURL, schema, maxConns)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

func mustStarted(tb testing.TB) {
	tb.Helper()
	if !started.Load() {
		tb.Fatal("pgtest: call pgtest.Main(m) from the package's TestMain")
	}
}

func withDatabase(raw, name string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		// Keyword/value DSN: append the dbname; later keys win in libpq syntax.
		if strings.Contains(raw, "=") {
			return raw + " dbname=" + name, nil
		}
		return "", fmt.Errorf("TEST_DATABASE_URL %q: not a postgres URL", raw)
	}
	u.Path = "/" + name
	return u.String(), nil
}

var slugRe = regexp.MustCompile(`[^a-z0-9]+`)

func packageSlug() string {
	wd, err := os.Getwd()
	if err != nil {
		return "pkg"
	}
	s := slugRe.ReplaceAllString(strings.ToLower(filepath.Base(wd)), "_")
	if len(s) > 20 {
		s = s[:20]
	}
	return s
}

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// SynchronousCommitOff makes cfg's sessions run with synchronous_commit
// off, as a pool that is not retrysafe's may leave them (ALTER DATABASE
// ... SET synchronous_commit = off): it is turned off after cfg's own
// start of the session (dbpool's, which sets search_path and turns it on).
func SynchronousCommitOff(cfg *pgxpool.Config) {
	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if after != nil {
			if err := after(ctx, c); err != nil {
				return err
			}
		}
		_, err := c.Exec(ctx, "SET synchronous_commit = off")
		return err
	}
}
