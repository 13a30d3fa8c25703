package harness

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Two failovers in a row through one URL: what was committed survives
// each (the standby is synchronous), the database's own settings come
// along, the rebuilt standby is synchronous again, and the URL the
// processes were given at the start still finds the writable host.
func TestFailoverTwice(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s := &Stack{Cfg: StackConfig{Database: DatabaseConfig{Standby: "sync", SynchronousCommit: "off"}}}
	defer s.stopClusters()
	if err := s.startClusters(ctx); err != nil {
		t.Fatal(err)
	}
	url := s.URL // as every process got it
	if err := execOn(ctx, url, "CREATE TABLE t (v int)"); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		// SET LOCAL: this commit waits for the standby whatever the
		// database's default says, as a claim must.
		if err := execOn(ctx, url, "BEGIN", "SET LOCAL synchronous_commit = on", "INSERT INTO t VALUES (1)", "COMMIT"); err != nil {
			t.Fatal(err)
		}
		ft, err := s.Failover(ctx)
		if err != nil {
			t.Fatalf("failover %d: %v", i, err)
		}
		t.Logf("failover %d: down %s, new standby in %s", i, ft.Down, ft.Rebuild)
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatalf("after failover %d, the first URL: %v", i, err)
		}
		var n int
		var sc, standbys string
		err = conn.QueryRow(ctx, "SELECT (SELECT count(*) FROM t), current_setting('synchronous_commit'), current_setting('synchronous_standby_names')").Scan(&n, &sc, &standbys)
		conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n != i || sc != "off" || standbys != standbyName {
			t.Fatalf("after failover %d: %d rows (want %d), synchronous_commit %s (want the database's off), synchronous_standby_names %q", i, n, i, sc, standbys)
		}
	}
	if err := s.Cluster.Crash(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Failover(ctx); err == nil {
		t.Error("failover of a crashed primary accepted")
	}
}
