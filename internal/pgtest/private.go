package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/dbpool"
	"github.com/retrysafe/retrysafe/internal/pgembed"
	"github.com/retrysafe/retrysafe/migrations"
)

// PrivateOpts tunes Private. A nil *PrivateOpts means the defaults.
type PrivateOpts struct {
	// Settings are the cluster's own (pgembed.Options.Settings), such as
	// "synchronous_standby_names=nobody".
	Settings []string
	// MaxConns is the pool's (default 2).
	MaxConns int32
	// Pool, when set, changes the pool's configuration (dbpool's, on the
	// default schema) before it connects.
	Pool func(*pgxpool.Config)
}

// Private starts a cluster of the test's own (pgembed), for a test that
// crashes, restarts or reconfigures its server, which the shared one must
// never be; returns it and a pool on its default schema, migrated with
// retrysafe's and River's migrations. Both are stopped when the test ends.
func Private(tb testing.TB, opts *PrivateOpts) (*pgembed.Cluster, *pgxpool.Pool) {
	tb.Helper()
	if opts == nil {
		opts = &PrivateOpts{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster, err := pgembed.StartWith(ctx, pgembed.Options{Settings: opts.Settings})
	if err != nil {
		tb.Fatalf("pgtest: private cluster: %v", err)
	}
	tb.Cleanup(func() { _ = cluster.Stop() })
	cfg, err := dbpool.ParseConfig(cluster.URL, migrations.DefaultSchema)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	cfg.MaxConns = 2
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.Pool != nil {
		opts.Pool(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(pool.Close)
	if err := migrateAll(ctx, pool, migrations.DefaultSchema); err != nil {
		tb.Fatalf("pgtest: migrate the private cluster: %v", err)
	}
	return cluster, pool
}
