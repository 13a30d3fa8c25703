package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/dbpool"
	"github.com/retrysafe/retrysafe/migrations"
)

// server is the PostgreSQL server the benchmarks create their databases on.
type server struct {
	url string // administrative connection (any existing database)
	// session is the settings every session on a benchmark database
	// starts with (--session-settings).
	session map[string]string
}

// database is one benchmark's own fresh database.
type database struct {
	srv  *server
	name string
	url  string
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *server) admin(ctx context.Context) (*pgx.Conn, error) {
	c, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", dbpool.Redact(s.url), err)
	}
	return c, nil
}

// describe returns the server's version and the settings that decide the
// commit rate.
func (s *server) describe(ctx context.Context) (map[string]string, error) {
	c, err := s.admin(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close(ctx)
	out := map[string]string{}
	for _, name := range []string{"server_version", "fsync", "synchronous_commit", "wal_sync_method", "shared_buffers", "max_connections", "commit_delay",
		"max_wal_size", "checkpoint_timeout", "wal_compression"} {
		var v string
		if err := c.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			return nil, err
		}
		out[name] = v
	}
	return out, nil
}

// create makes a fresh database named bench_<kind>_<random>.
func (s *server) create(ctx context.Context, kind string) (*database, error) {
	return s.createNamed(ctx, "bench_"+kind+"_"+randHex(4))
}

// createNamed makes a fresh database called name.
func (s *server) createNamed(ctx context.Context, name string) (*database, error) {
	c, err := s.admin(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close(ctx)
	// UTF8 whatever the cluster's default: retrysafe refuses any other
	// encoding (dbpool.ErrEncoding).
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" ENCODING 'UTF8' TEMPLATE template0"); err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	return s.existing(name)
}

// existing is the database called name, which must exist.
func (s *server) existing(name string) (*database, error) {
	u, err := withDatabase(s.url, name)
	if err != nil {
		return nil, err
	}
	return &database{srv: s, name: name, url: u}, nil
}

// exists reports whether the server has a database called name.
func (s *server) exists(ctx context.Context, name string) (bool, error) {
	c, err := s.admin(ctx)
	if err != nil {
		return false, err
	}
	defer c.Close(ctx)
	var ok bool
	err = c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&ok)
	return ok, err
}

// drop removes the database (closing whatever still holds it).
func (d *database) drop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := d.srv.admin(ctx)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{d.name}.Sanitize()+" WITH (FORCE)")
	return err
}

// pool opens a pool of size conns on the database, with search_path on
// retrysafe's schema.
func (d *database) pool(ctx context.Context, conns int) (*pgxpool.Pool, error) {
	return d.poolNamed(ctx, conns, "retrysafe-bench")
}

// poolNamed is pool with its connections' application_name.
func (d *database) poolNamed(ctx context.Context, conns int, app string) (*pgxpool.Pool, error) {
	cfg, err := dbpool.ParseConfig(d.url, migrations.DefaultSchema)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(conns)
	cfg.MinConns = int32(conns)
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	for k, v := range d.srv.session {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := p.Ping(ctx); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// counters are the database's commit count and the server's WAL position.
type counters struct {
	commits int64
	wal     int64 // bytes since 0/0 (cluster-wide)
	fpi     int64 // full-page images written to the WAL (cluster-wide)
	// blksRead and blksHit are the database's blocks read from outside
	// shared buffers and found in them.
	blksRead, blksHit int64
}

// counters reads xact_commit, blks_read and blks_hit of the database, the
// WAL insert position and the count of full-page images.
// Backends flush their statistics when they exit, so read after closing the
// pools that ran the work.
func (d *database) counters(ctx context.Context) (counters, error) {
	c, err := d.srv.admin(ctx)
	if err != nil {
		return counters{}, err
	}
	defer c.Close(ctx)
	var k counters
	err = c.QueryRow(ctx, `SELECT coalesce(d.xact_commit, 0), coalesce(d.blks_read, 0), coalesce(d.blks_hit, 0),
		pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint,
		(SELECT wal_fpi FROM pg_stat_wal)
		FROM (SELECT 1) one LEFT JOIN pg_stat_database d ON d.datname = $1`, d.name).Scan(&k.commits, &k.blksRead, &k.blksHit, &k.wal, &k.fpi)
	return k, err
}

func withDatabase(raw, name string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		if strings.Contains(raw, "=") {
			return raw + " dbname=" + name, nil
		}
		return "", fmt.Errorf("database url %q: not a postgres URL", raw)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// migrate creates retrysafe's tables (the executor needs no River tables).
func migrate(ctx context.Context, p *pgxpool.Pool) error {
	_, err := migrations.Migrate(ctx, p, migrations.DefaultSchema)
	return err
}
