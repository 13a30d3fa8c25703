package dbpool

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/migrations"
)

// ParseConfig parses url as pgxpool.ParseConfig does, names the
// connections "retrysafe" when the URL names no application_name, and
// Configures the result for schema.
func ParseConfig(url, schema string) (*pgxpool.Config, error) {
	if err := migrations.ValidateSchema(schema); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "retrysafe"
	}
	configure(cfg, schema)
	return cfg, nil
}

// Configure makes every connection of a pool built from cfg start its
// session as retrysafe's statements assume, with one statement run before
// the connection is handed out (cfg.AfterConnect; one the caller set
// already runs after it, on the configured session). It is for a pool
// the caller builds itself: its tracer, TLS, sizes and hooks stay as
// they are.
//
// search_path is set to schema, then public, by that statement, not sent
// as a startup parameter: PgBouncer refuses a startup parameter it does
// not track ("unsupported startup parameter: search_path"), and tracks
// search_path only when configured to. In its session pooling mode a
// client keeps one server session, so what the first statement sets
// holds (TestServeThroughPgBouncer); in transaction or statement mode
// nothing a session sets holds, so retrysafe does not run there. Being a
// session setting, it is undone by RESET ALL or DISCARD ALL: code that
// changes a setting on these connections puts its old value back instead.
//
// A connection that finds synchronous_commit off (ALTER DATABASE or ALTER
// ROLE ... SET synchronous_commit = off, a usual throughput tuning) turns
// it on for its session. The claims force it for themselves anyway
// (executor), but everything else a crash must not lose is written on the
// same connections: a turn recorded, a reply's status, a River job's
// completion, which River keeps in memory and retries after the database
// is back, so a job whose handler's commits were lost is marked completed
// and never runs again (the restart test's pg-crash under
// --db-synchronous-commit off lost turns that way). Any other value
// (local, remote_write, on, remote_apply) already survives a crash of
// the primary and is left alone. The completions that are allowed not to
// wait still say so for themselves (set_config(..., true)).
//
// A connection that finds another default isolation than read committed
// (ALTER DATABASE ... SET default_transaction_isolation = 'serializable',
// which some teams make their rule) sets read committed for its session:
// retrysafe's batches are written for a snapshot per statement (a claim's
// read of the action sees the row a concurrent claimer committed while
// the claim waited; a group's statements read what committed before each
// began), and under repeatable read or serializable those reads fail with
// serialization errors or read nothing (TestSessionsReadCommitted).
//
// A database whose encoding is not UTF8 fails the connection with
// ErrEncoding, before anything is written to it.
//
// The TLS configuration is left as it is: pgx reads sslcert and sslkey
// again at every handshake only while TLSConfig is its own, so a client
// certificate renewed over those files reaches the next connection
// without a restart (TestClientCertificateRenewedInPlace).
func Configure(cfg *pgxpool.Config, schema string) error {
	if cfg == nil {
		return errors.New("dbpool: Configure of a nil *pgxpool.Config")
	}
	if err := migrations.ValidateSchema(schema); err != nil {
		return err
	}
	configure(cfg, schema)
	return nil
}

// configure is Configure on a configuration and a schema name already
// checked (ParseConfig checks the name before it parses the URL).
func configure(cfg *pgxpool.Config, schema string) {
	path := schema + ",public"
	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if err := startSession(ctx, c, path); err != nil {
			return err
		}
		if after != nil {
			return after(ctx, c)
		}
		return nil
	}
}

// startSession is Configure's first statement on a new connection: it
// sets search_path, turns synchronous_commit on when the session starts
// with it off, makes read committed the session's isolation when it
// starts with another, and refuses a database whose encoding is not UTF8.
// One statement, one round trip.
func startSession(ctx context.Context, c *pgx.Conn, path string) error {
	var encoding string
	if err := c.QueryRow(ctx, startSessionSQL, path).Scan(&encoding, nil, nil, nil, nil); err != nil {
		return fmt.Errorf("start the session (search_path, synchronous_commit, isolation): %w", err)
	}
	if encoding != "UTF8" {
		return fmt.Errorf("%w: %q is %s, and what retrysafe stores (WhatsApp messages, model replies, payloads) "+
			"holds characters only UTF8 has, an emoji for one; create the database with ENCODING 'UTF8'",
			ErrEncoding, c.Config().Database, encoding)
	}
	return nil
}

// ErrEncoding: the database's encoding is not UTF8. On a LATIN1 database
// (older Brazilian ones are LATIN1 or WIN1252) retrysafe worked without an
// error and stored its jsonb as UTF-8 bytes read as LATIN1: a customer
// "joão" became "joÃ£o" to every other client, an emoji four characters
// (PostgreSQL 15, pgx v5.13: jsonb goes in binary and is not converted).
// In SQL_ASCII nothing is ever checked or converted.
var ErrEncoding = errors.New("database encoding is not UTF8")

const startSessionSQL = `SELECT current_setting('server_encoding'),
	set_config('search_path', $1, false),
	CASE WHEN current_setting('synchronous_commit') = 'off'
		THEN set_config('synchronous_commit', 'on', false) END,
	CASE WHEN current_setting('default_transaction_isolation') <> 'read committed'
		THEN set_config('default_transaction_isolation', 'read committed', false) END,
	` + allocatorWarmup

// allocatorWarmup makes the backend allocate and free one 1 MB block, which
// on a glibc server (Debian's, Ubuntu's, RHEL's, the official Docker image)
// raises that backend's malloc thresholds for the rest of its life: glibc
// serves a block past its mmap threshold (128 kB at start) with mmap, and
// when it unmaps one, it moves the mmap threshold up to the block's size
// and the trim threshold (how much free memory at the top of the heap it
// keeps instead of handing it back to the kernel) to twice that.
//
// Without it, a backend whose blocks never passed 128 kB keeps a 128 kB
// trim threshold, and a statement whose memory adds up past it (the claims
// group's: its unnest, CTE tuplestores, hash join and per-index scan
// descriptors, none large alone) shrinks the heap at its end (brk) and
// faults it in again at the next one: on the 10M-row benchmark, a brk and
// 1.5 minor page faults per execution, a quarter of the backends' CPU per
// execution, on whichever side's backends had fallen into it
// (docs/benchmarks.md, 2026-12-06).
//
// lpad reserves the encoding's longest character (4 bytes in UTF8) for
// each of the 262,144 it pads to and writes one byte of each, so the block
// is 1 MB and a quarter of it is touched; octet_length does not read it.
// The cost is once per connection: the backend's page faults over the
// statement, read from /proc, were 153 (537 with repeat(' ', 1048576),
// which writes the whole block; 0 for SELECT 1). Each backend may then
// keep up to 2 MB of freed heap instead of 128 kB. Other allocators (musl,
// BSD libc) just allocate and free the block. TestSessionKeepsFreedMemory
// checks the effect through /proc.
const allocatorWarmup = `octet_length(lpad('', 262144, ' '))`

// Open connects a pool with ParseConfig and checks that the server answers.
// maxConns <= 0 keeps pgx's default.
func Open(ctx context.Context, url, schema string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := ParseConfig(url, schema)
	if err != nil {
		return nil, err
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to %s: %w", Redact(url), err)
	}
	return pool, nil
}

// Redact removes the password from a connection URL for messages.
func Redact(url string) string {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return "(unparseable url)"
	}
	c := cfg.ConnConfig
	return fmt.Sprintf("postgres://%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}
