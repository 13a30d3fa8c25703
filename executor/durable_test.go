package executor_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/internal/ledger"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

// walProbe is a DBTX that appends to every batch a statement reading, inside
// the batch's own transaction, the synchronous_commit in force and the WAL
// insert position after the batch's writes; once the batch committed, it
// asks the server whether the WAL is flushed that far. A commit that waited
// for its flush always is; an asynchronous one (wal_writer_delay is 200ms
// by default) is, right after, only by chance.
type walProbe struct {
	pool *pgxpool.Pool

	mu      sync.Mutex
	batches []probed
}

type probed struct {
	sql     []string
	setting string
	wrote   bool
	flushed bool
}

func (p *walProbe) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return p.pool.Exec(ctx, sql, args...)
}

func (p *walProbe) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return p.pool.Query(ctx, sql, args...)
}

func (p *walProbe) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return p.pool.QueryRow(ctx, sql, args...)
}

func (p *walProbe) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	var rec probed
	for _, q := range b.QueuedQueries {
		rec.sql = append(rec.sql, q.SQL)
	}
	var lsn string
	// A batch whose inserts all conflicted wrote nothing, has no
	// transaction id and commits nothing: it has nothing to flush.
	b.Queue(`SELECT current_setting('synchronous_commit'), pg_current_wal_insert_lsn()::text,
		pg_current_xact_id_if_assigned() IS NOT NULL`).QueryRow(func(row pgx.Row) error {
		return row.Scan(&rec.setting, &lsn, &rec.wrote)
	})
	return &probeResults{BatchResults: p.pool.SendBatch(ctx, b), done: func(err error) {
		if err != nil {
			return
		}
		if qerr := p.pool.QueryRow(context.WithoutCancel(ctx), `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, lsn).Scan(&rec.flushed); qerr != nil {
			rec.setting = "probe failed: " + qerr.Error()
		}
		p.mu.Lock()
		p.batches = append(p.batches, rec)
		p.mu.Unlock()
	}}
}

type probeResults struct {
	pgx.BatchResults
	done func(error)
}

func (r *probeResults) Close() error {
	err := r.BatchResults.Close()
	r.done(err)
	return err
}

// writes reports whether a batch of these statements writes the ledger.
func writes(sql []string) bool {
	for _, s := range sql {
		if strings.Contains(s, "INSERT INTO") || strings.Contains(s, "UPDATE actions") {
			return true
		}
	}
	return false
}

func asyncCompletion(sql []string) bool {
	for _, s := range sql {
		if n := ledger.Name(s); n == "actionCompleteAsync" || n == "actionCompleteManyAsync" {
			return true
		}
	}
	return false
}

// Every batch that freezes or claims commits synchronously on a session
// whose synchronous_commit is off (as ALTER DATABASE/ROLE ... SET would
// make it), with no statement added: a fresh claim, a claims group, a
// retake after a transient failure, a takeover of an expired lease, the
// reconciler's take, ExecuteKey's claim and the intent store's Freeze.
// The asynchronous completions keep their documented exception.
func TestClaimsCommitSynchronouslyWhateverTheSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	pool := envPool(t, e, 4, nil)
	// The same pool's configuration, with the session setting turned off
	// after dbpool's start of the session turned it on: the executor must
	// protect its claims on any pool a user gives it.
	cfg := pool.Config()
	pgtest.SynchronousCommitOff(cfg)
	off, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(off.Close)
	var sc string
	if err := off.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&sc); err != nil || sc != "off" {
		t.Fatalf("session synchronous_commit %q (%v), want off", sc, err)
	}
	probe := &walProbe{pool: off}
	ex := e.another(t, "durable", func(c *executor.Config) { c.DB = probe })

	// Faults: the first request of inv-d-retake and of inv-d-take* fails
	// before acting.
	e.psp.SetFault(func(r toolstest.Request) toolstest.Fault {
		d, _ := r.Body["description"].(string)
		if r.N == 1 && (strings.HasSuffix(d, " inv-d-retake") || strings.Contains(d, " inv-d-take")) {
			return toolstest.FailBefore
		}
		return toolstest.None
	})

	// A fresh claim alone, then a group of them.
	if out, err := ex.Execute(ctx, pixCall("t1", "inv-d-0", extraction(0, testutil.CPF(700))), nil); err != nil || out.Status != executor.StatusCompleted {
		t.Fatal(out, err)
	}
	var wg sync.WaitGroup
	for i := 1; i <= 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, err := ex.Execute(ctx, pixCall("t1", fmt.Sprintf("inv-d-%d", i), extraction(i, testutil.CPF(700+i))), nil); err != nil || out.Status != executor.StatusCompleted {
				t.Errorf("call %d: %+v %v", i, out, err)
			}
		}()
	}
	wg.Wait()
	// Released after a 500, retaken at the end of the backoff.
	if out, err := ex.Execute(ctx, pixCall("t1", "inv-d-retake", extraction(1, testutil.CPF(750))), nil); err != nil || out.Status != executor.StatusCompleted || out.Attempt != 2 {
		t.Fatal(out, err)
	}
	// Released with NoWait, then taken over by the next caller and by the
	// reconciler.
	for _, ref := range []string{"inv-d-take", "inv-d-take-r"} {
		out, err := ex.Execute(ctx, pixCall("t1", ref, extraction(2, testutil.CPF(760+len(ref)))), &executor.Opts{NoWait: true})
		if err != nil || out.Status != executor.StatusInFlight {
			t.Fatal(out, err)
		}
		waitExpired(t, e.pool, "t1", out.Key)
	}
	if out, err := ex.Execute(ctx, pixCall("t1", "inv-d-take", extraction(2, testutil.CPF(770))), nil); err != nil || out.Status != executor.StatusCompleted || out.Attempt != 2 {
		t.Fatal(out, err)
	}
	if res, err := ex.ReconcileOnce(ctx); err != nil || res.Completed != 1 {
		t.Fatal(res, err)
	}
	// Frozen by the intent store, claimed by key.
	fr, err := e.store.Freeze(ctx, probe, extractParams("t1", "inv-d-key", extraction(3, testutil.CPF(780))))
	if err != nil || !fr.Created {
		t.Fatal(fr, err)
	}
	if out, err := ex.ExecuteKey(ctx, "t1", fr.Intent.Key, nil); err != nil || out.Status != executor.StatusCompleted {
		t.Fatal(out, err)
	}

	probe.mu.Lock()
	defer probe.mu.Unlock()
	var sync, async int
	for _, b := range probe.batches {
		switch {
		case !writes(b.sql) || !b.wrote:
		case asyncCompletion(b.sql):
			async++
			if b.setting != "off" {
				t.Errorf("asynchronous completion committed with synchronous_commit %q: %q", b.setting, b.sql)
			}
		default:
			sync++
			if b.setting != "on" || !b.flushed {
				t.Errorf("write committed with synchronous_commit %q, flushed %v: %q", b.setting, b.flushed, b.sql)
			}
		}
	}
	if sync < 8 || async < 2 {
		t.Fatalf("%d synchronous and %d asynchronous write batches seen: the test did not run the paths", sync, async)
	}
	// Nothing leaks into the pooled sessions.
	if err := off.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&sc); err != nil || sc != "off" {
		t.Fatalf("session synchronous_commit %q after the calls (%v), want off", sc, err)
	}
}
