package dbpool_test

import (
	"context"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/dbpool"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

// An application's own pool for the executor: its configuration stays its
// own (sizes, hooks, tracer), and Configure makes each session what
// retrysafe's statements assume, here against a database whose default
// isolation is serializable.
func ExampleConfigure() {
	ctx := context.Background()
	databaseURL := pgtest.URL(testutil.ExampleTB{}) // in production: from your configuration

	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		log.Fatal(err)
	}
	cfg.MaxConns = 8
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "serializable" // as ALTER DATABASE ... SET would
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		return nil // the application's own session setup (types, settings) runs after retrysafe's
	}
	if err := dbpool.Configure(cfg, "retrysafe"); err != nil { // the schema migrations.Migrate was given
		log.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	// executor.New(executor.Config{DB: pool, ...})

	var path, iso string
	if err := pool.QueryRow(ctx, `SELECT current_setting('search_path'), current_setting('transaction_isolation')`).Scan(&path, &iso); err != nil {
		log.Fatal(err)
	}
	fmt.Println(path, "/", iso)
	// Output: retrysafe,public / read committed
}
