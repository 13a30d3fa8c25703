package riverschema_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/riverschema"
	"github.com/retrysafe/retrysafe/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestMigrateConcurrentAndIdempotent(t *testing.T) {
	// pgtest's schemas already carry River's tables: migrate a schema of
	// our own from nothing.
	pool, base := pgtest.Schema(t, &pgtest.Opts{MaxConns: 4})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := base + "_r"
	t.Cleanup(func() { pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	if _, err := migrations.Migrate(ctx, pool, schema); err != nil {
		t.Fatal(err)
	}
	if v, err := riverschema.Version(ctx, pool, schema); err != nil || v != 0 {
		t.Fatalf("River's version before migrating: %d, %v; want 0", v, err)
	}

	var wg sync.WaitGroup
	results := make([][]int, 4)
	errs := make([]error, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = riverschema.Migrate(ctx, pool, schema)
		}()
	}
	wg.Wait()
	// Migrators interleave version by version; together they apply each
	// version exactly once.
	seen := map[int]int{}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("migrate %d: %v", i, err)
		}
		for _, v := range results[i] {
			seen[v]++
		}
	}
	for v := 1; v <= riverschema.Latest(); v++ {
		if seen[v] != 1 {
			t.Fatalf("version %d applied %d times (all: %v)", v, seen[v], seen)
		}
	}
	again, err := riverschema.Migrate(ctx, pool, schema)
	if err != nil || len(again) != 0 {
		t.Fatalf("second migrate: applied %v, err %v", again, err)
	}
	if v, err := riverschema.Version(ctx, pool, schema); err != nil || v != riverschema.Latest() {
		t.Fatalf("River's version after migrating: %d, %v; want %d", v, err, riverschema.Latest())
	}
	// River's tables sit beside retrysafe's, in the same schema.
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables
		WHERE table_schema = $1 AND table_name IN ('river_job', 'river_migration', 'intents')`, schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("found %d of river_job, river_migration, intents in %s", n, schema)
	}
}

func TestMigrateRejectsBadSchema(t *testing.T) {
	pool := pgtest.Pool(t, nil)
	if _, err := riverschema.Migrate(context.Background(), pool, `x"; DROP`); err == nil {
		t.Fatal("bad schema name accepted")
	}
}
