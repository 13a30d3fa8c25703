package migrations_test

import (
	"context"
	"sync"
	"testing"

	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestMigrateTwiceIsNoop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, schema := pgtest.Schema(t, nil)
	res, err := migrations.Migrate(ctx, pool, schema)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) != 0 || res.Current != migrations.Latest() {
		t.Fatalf("second run applied %d, current %d, want 0 and %d", len(res.Applied), res.Current, migrations.Latest())
	}
	v, err := migrations.Version(ctx, pool, schema)
	if err != nil || v != migrations.Latest() {
		t.Fatalf("Version = %d, %v", v, err)
	}
}

// Several processes migrating one fresh schema at once: the advisory lock
// must serialize them so that exactly one applies each file.
func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.Schema(t, &pgtest.Opts{MaxConns: 8})
	schema := "concurrent_" + t.Name()[len(t.Name())-4:]
	t.Cleanup(func() { pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })

	const n = 8
	var wg sync.WaitGroup
	applied := make([]int, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := migrations.Migrate(ctx, pool, schema)
			applied[i], errs[i] = len(res.Applied), err
		}()
	}
	wg.Wait()
	total := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("migrator %d: %v", i, errs[i])
		}
		total += applied[i]
	}
	all, _ := migrations.All()
	if total != len(all) {
		t.Fatalf("applied %d migrations in total across %d migrators, want %d", total, n, len(all))
	}
}

func TestValidateSchema(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "Retry", "1abc", "a-b", `x"; drop table y; --`} {
		if migrations.ValidateSchema(bad) == nil {
			t.Errorf("ValidateSchema(%q) accepted", bad)
		}
	}
	if err := migrations.ValidateSchema("retrysafe"); err != nil {
		t.Error(err)
	}
}
