package cli

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/dbpool"
	"github.com/retrysafe/retrysafe/internal/pgembed"
	"github.com/retrysafe/retrysafe/internal/riverschema"
	"github.com/retrysafe/retrysafe/migrations"
)

// DBFlags are the database settings every command that needs PostgreSQL
// shares. Flags override the environment.
type DBFlags struct {
	URL      string
	Schema   string
	maxConns int
}

func (d *DBFlags) Register(fs *flag.FlagSet, e *Env) {
	schema := e.Getenv("RETRYSAFE_SCHEMA")
	if schema == "" {
		schema = migrations.DefaultSchema
	}
	fs.StringVar(&d.URL, "database-url", e.Getenv("DATABASE_URL"),
		"PostgreSQL URL (env DATABASE_URL). Empty: start a private throwaway cluster from the local PostgreSQL binaries")
	fs.StringVar(&d.Schema, "schema", schema, "schema that holds retrysafe's tables (env RETRYSAFE_SCHEMA)")
	fs.IntVar(&d.maxConns, "max-conns", 8, "maximum connections in the pool")
}

// check is what Open refuses before it connects: a UsageError.
func (d *DBFlags) check() error {
	if err := migrations.ValidateSchema(d.Schema); err != nil {
		return usageErr(fmt.Errorf("--schema: %w", err))
	}
	if d.maxConns < 1 {
		return usageErr(fmt.Errorf("--max-conns must be at least 1, got %d", d.maxConns))
	}
	return nil
}

// database is an open pool plus whatever must be torn down with it.
type database struct {
	Pool    *pgxpool.Pool
	URL     string
	Schema  string
	cluster *pgembed.Cluster
}

func (d *database) Close() {
	d.Pool.Close()
	if d.cluster != nil {
		d.cluster.Stop() //nolint:errcheck // best effort on exit
	}
}

// migrateAll applies retrysafe's migrations and River's (the agent's inbox
// and outbox queues live in the same schema). applied, when not nil, gets a
// line per migration applied.
func migrateAll(ctx context.Context, pool *pgxpool.Pool, schema string, applied func(string)) error {
	res, err := migrations.Migrate(ctx, pool, schema)
	if err != nil {
		return err
	}
	river, err := riverschema.Migrate(ctx, pool, schema)
	if err != nil {
		return err
	}
	if applied != nil {
		for _, m := range res.Applied {
			applied(fmt.Sprintf("%03d_%s", m.Version, m.Name))
		}
		for _, v := range river {
			applied(fmt.Sprintf("river %03d", v))
		}
	}
	return nil
}

// openExisting opens the database an operator command works on: one that
// exists already (a private throwaway cluster would hold nothing to work
// on), not migrated by the command.
func (d *DBFlags) openExisting(ctx context.Context, e *Env, command string) (*database, error) {
	if d.URL == "" {
		return nil, usageErr(fmt.Errorf("%s needs a database: set DATABASE_URL or --database-url", command))
	}
	return d.Open(ctx, e, false)
}

// Open connects to the configured database, or starts a private cluster when
// none is configured (saying so in one line). With migrate, the schema is
// brought up to date first.
func (d *DBFlags) Open(ctx context.Context, e *Env, migrate bool) (*database, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	db := &database{URL: d.URL, Schema: d.Schema}
	if db.URL == "" {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		c, err := pgembed.Start(sctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("no DATABASE_URL given and no private cluster could be started: %w", err)
		}
		fmt.Fprintf(e.Stderr, "retrysafe: no DATABASE_URL; started a private throwaway PostgreSQL on 127.0.0.1:%d (removed on exit)\n", c.Port)
		db.cluster, db.URL = c, c.URL
		migrate = true // a fresh cluster is empty
	}
	pool, err := dbpool.Open(ctx, db.URL, d.Schema, int32(d.maxConns))
	if err != nil {
		if db.cluster != nil {
			db.cluster.Stop() //nolint:errcheck
		}
		return nil, err
	}
	db.Pool = pool
	if migrate {
		if err := migrateAll(ctx, pool, d.Schema, nil); err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}

// checkRiver refuses a schema without River's tables, which user (the
// worker, the webhooks) works or queues into.
func checkRiver(ctx context.Context, d *database, user string) error {
	v, err := riverschema.Version(ctx, d.Pool, d.Schema)
	if err != nil {
		return err
	}
	if v == 0 {
		return fmt.Errorf("schema %s has no River tables, which %s: pass --migrate (it installs them beside retrysafe's)", d.Schema, user)
	}
	return nil
}
