package executor_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

// A database whose default isolation is serializable (or repeatable read),
// as some teams make their rule: retrysafe's sessions run read committed
// anyway (dbpool), so 200 concurrent callers on one intent, five times
// over, get one charge each time and no error. With the sessions left at
// the database's default, the test failed in each of three runs: a caller
// got "could not serialize access due to concurrent update" from its
// freeze and claim (retryable, and no second charge, but an error).
func TestSerializableDatabaseDefault(t *testing.T) {
	t.Parallel()
	for _, iso := range []string{"serializable", "repeatable read"} {
		t.Run(iso, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, &envOpts{poolSize: 4})
			cfg := e.pool.Config() // dbpool's, as every retrysafe command opens it
			cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = iso
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			ex := e.another(t, "worker-iso", func(c *executor.Config) { c.DB = pool })
			c := testutil.CPF(123456789)
			for round := range 5 {
				ref := "inv-iso-" + string(rune('a'+round))
				for i, r := range runConcurrent(200, func(i int) executor.Call { return pixCall("t1", ref, extraction(i, c)) }, ex) {
					checkErr(t, i, r)
				}
				if n := e.psp.Count(""); n != round+1 {
					t.Fatalf("round %d: %d charges in all, want %d", round, n, round+1)
				}
			}
		})
	}
}
