package idempotency

import (
	"context"
	"testing"

	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// Each statement's generic plan, made on a table no ANALYZE has seen (a
// new deployment, or any time on a server with autovacuum off), must look
// its row up by key: that plan is what a pooled connection keeps.
func TestGenericPlansReadWhatTheyName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := pgtest.Schema(t, &pgtest.Opts{MaxConns: 1})
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn := c.Hijack() // it keeps plan_cache_mode forced: not back to the pool
	defer conn.Close(ctx)
	for _, s := range []struct{ name, sql string }{
		{"requestReserveSQL", requestReserveSQL},
		{"requestTakeOverSQL", requestTakeOverSQL},
		{"requestGetSQL", requestGetSQL},
		{"requestCompleteSQL", requestCompleteSQL},
		{"requestReleaseSQL", requestReleaseSQL},
	} {
		problems, err := pgtest.GenericPlanProblems(ctx, conn, s.sql, []string{"idempotency_requests"})
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", s.name, p)
		}
	}
}
