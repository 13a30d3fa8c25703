package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/dbpool"
	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/internal/ledger"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/tools"
)

// tracer counts what reaches the server: each traced query or batch is one
// round trip (statements are prepared and cached by a warm-up first) and,
// outside an explicit transaction, one implicit transaction.
type tracer struct {
	queries, batches atomic.Int64

	mu  sync.Mutex
	sql map[string]int // ledger statements sent in batches, by name
}

func (t *tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.queries.Add(1)
	return ctx
}
func (t *tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (t *tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	t.batches.Add(1)
	return ctx
}
func (t *tracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sql == nil {
		t.sql = map[string]int{}
	}
	t.sql[ledger.Name(d.SQL)]++
}
func (t *tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (t *tracer) take() (q, b int64) {
	t.mu.Lock()
	t.sql = nil
	t.mu.Unlock()
	return t.queries.Swap(0), t.batches.Swap(0)
}

// sent is how many times the ledger's statement name went out in a batch
// since take.
func (t *tracer) sent(name string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sql[name]
}

// envPool is another pool on e's schema, of at most conns connections,
// with tr (when not nil) tracing every statement.
func envPool(t testing.TB, e *env, conns int32, tr pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	var schema string
	if err := e.pool.QueryRow(context.Background(), `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	cfg, err := dbpool.ParseConfig(pgtest.URL(t), schema)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = conns
	if tr != nil {
		cfg.ConnConfig.Tracer = tr
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// The floors: a first execution is two round trips and two commits
// (freeze+claim, completion), each a batch (a group of one: nothing else is
// running); a replay writes nothing, and among replays is one round trip.
func TestRoundTripsAndCommits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	tr := &tracer{}
	pool := envPool(t, e, 4, tr)
	ex := e.another(t, "traced", func(c *executor.Config) { c.DB = pool })
	ctx := context.Background()

	// Warm the statement cache of every connection the pool may use.
	for i := range 8 {
		if _, err := ex.Execute(ctx, pixCall("t1", "warm-"+string(rune('a'+i)), extraction(i, testutil.CPF(60+i))), nil); err != nil {
			t.Fatal(err)
		}
	}
	conns := pool.AcquireAllIdle(ctx)
	for _, c := range conns {
		c.Release()
	}
	tr.take()

	out, err := ex.Execute(ctx, pixCall("t1", "inv-rt", extraction(0, testutil.CPF(70))), nil)
	if err != nil || out.Status != executor.StatusCompleted || out.Replayed {
		t.Fatal(out, err)
	}
	q, b := tr.take()
	t.Logf("first execution: %d batch + %d statements = %d round trips", b, q, b+q)
	if b != 2 || q != 0 {
		t.Fatalf("first execution took %d batches and %d queries, want 2 and 0", b, q)
	}
	out, err = ex.Execute(ctx, pixCall("t1", "inv-rt", extraction(1, testutil.CPF(70))), nil)
	if err != nil || !out.Replayed {
		t.Fatal(out, err)
	}
	q, b = tr.take()
	t.Logf("replay among first executions: %d batch + %d statements = %d round trips", b, q, b+q)
	if b != 2 || q != 0 {
		t.Fatalf("replay among first executions took %d batches and %d queries, want 2 (the fresh claim finds the intent, the freeze and claim read it) and 0", b, q)
	}
	// Once the latest claims wrote nothing, a replay reads first: one
	// round trip.
	for i := range 32 {
		if _, err := ex.Execute(ctx, pixCall("t1", "inv-rt", extraction(2+i, testutil.CPF(70))), nil); err != nil {
			t.Fatal(err)
		}
	}
	tr.take()
	if out, err = ex.Execute(ctx, pixCall("t1", "inv-rt", extraction(40, testutil.CPF(70))), nil); err != nil || !out.Replayed {
		t.Fatal(out, err)
	}
	q, b = tr.take()
	t.Logf("replay among replays: %d batch + %d statements = %d round trips", b, q, b+q)
	if b != 1 || q != 0 {
		t.Fatalf("replay among replays took %d batches and %d queries, want 1 and 0", b, q)
	}

	// The replay's inserts (the fresh claim's and the freeze and claim's)
	// conflict before writing: no transaction id is assigned, so its
	// commit is read-only (no WAL flush).
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	x, err := e.store.Extract(extractParams("t1", "inv-rt", extraction(2, testutil.CPF(70))))
	if err != nil {
		t.Fatal(err)
	}
	bt := &pgx.Batch{}
	id := ledger.ID{Tenant: x.Tenant, Ref: x.Ref, Action: x.Action}
	row := &ledger.NewIntent{ID: id, Version: x.Result.Version, Payload: x.Result.Payload, Key: x.Result.Key}
	fresh := ledger.QueueFreshClaims(bt, []*ledger.NewIntent{row}, []string{"someone"}, time.Second)
	fz := ledger.QueueFreeze(bt, id, row)
	lc := ledger.QueueClaim(bt, id, "someone", time.Second)
	if err := tx.SendBatch(ctx, bt).Close(); err != nil {
		t.Fatal(err)
	}
	if fresh[0].Inserted || fz.Inserted || fz.Intent == nil || lc.Claimed {
		t.Fatal(fresh, fz, lc)
	}
	var xid *int64
	if err := tx.QueryRow(ctx, `SELECT txid_current_if_assigned()`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	if xid != nil {
		t.Fatalf("the replay path assigned transaction id %d: it writes", *xid)
	}
}

// sqlTracer remembers the text of every statement sent, in batches or not.
type sqlTracer struct {
	mu  sync.Mutex
	sql []string
}

func (t *sqlTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.mu.Lock()
	t.sql = append(t.sql, d.SQL)
	t.mu.Unlock()
	return ctx
}
func (t *sqlTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (t *sqlTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (t *sqlTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	t.mu.Lock()
	t.sql = append(t.sql, d.SQL)
	t.mu.Unlock()
}
func (t *sqlTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (t *sqlTracer) take() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.sql
	t.sql = nil
	return s
}

// Only the claim waits for its WAL flush when the provider can tell the
// outcome again by the key; the completion of a tool that cannot (no key,
// no lookup), and every completion under SyncCompletion, waits too. The
// asynchronous setting lives and dies with the completion's own
// transaction: the pooled session keeps synchronous_commit on.
func TestCompletionCommit(t *testing.T) {
	t.Parallel()
	sms := &tools.Func{ToolName: "sms.send", Fields: simpleSchema("sms.send"),
		Exec: func(context.Context, string, derive.Payload) (json.RawMessage, error) {
			return json.RawMessage(`{}`), nil
		}}
	e := newEnv(t, &envOpts{extra: []tools.Tool{sms}})
	ctx := context.Background()
	tr := &sqlTracer{}
	pool := envPool(t, e, 1, tr) // every statement on one session, to see what it keeps

	for i, tc := range []struct {
		name string
		call executor.Call
		sync bool
		want string
	}{
		{"pix, default", pixCall("t1", "inv-cc-1", extraction(0, testutil.CPF(81))), false, "actionCompleteAsync"},
		{"pix, SyncCompletion", pixCall("t1", "inv-cc-2", extraction(1, testutil.CPF(82))), true, "actionComplete"},
		{"no key, no lookup", executor.Call{Tenant: "t1", Ref: "sms-1", Action: "sms.send", Fields: map[string]any{"to": "ana"}}, false, "actionComplete"},
	} {
		ex := e.another(t, "cc-"+string(rune('a'+i)), func(c *executor.Config) { c.DB = pool; c.SyncCompletion = tc.sync })
		tr.take()
		out, err := ex.Execute(ctx, tc.call, nil)
		if err != nil || out.Status != executor.StatusCompleted {
			t.Fatalf("%s: %+v %v", tc.name, out, err)
		}
		var sent []string
		for _, q := range tr.take() {
			if n := ledger.Name(q); strings.HasPrefix(n, "actionComplete") {
				sent = append(sent, n)
			}
		}
		if len(sent) != 1 || sent[0] != tc.want {
			t.Fatalf("%s: completion sent %q, want %q", tc.name, sent, tc.want)
		}
		var setting string
		if err := pool.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&setting); err != nil || setting != "on" {
			t.Fatalf("%s: the session's synchronous_commit is %q after the completion (%v), want on", tc.name, setting, err)
		}
	}

	// Inside one transaction the statement does turn the flush off: put
	// the first action back to started and complete it again.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var key string
	var attempt int
	if err := tx.QueryRow(ctx, `UPDATE actions SET status = 'started', lease_owner = 'again', lease_until = now() + interval '1 minute'
		WHERE tenant_id = 't1' AND intent_ref = 'inv-cc-1' RETURNING idem_key, attempt`).Scan(&key, &attempt); err != nil {
		t.Fatal(err)
	}
	b := &pgx.Batch{}
	resp := `{}`
	c := &ledger.Completion{Tenant: "t1", Key: key, Owner: "again", Attempt: int32(attempt), Status: executor.RowCompleted, Response: &resp}
	ledger.QueueComplete(b, c, true)
	if err := tx.SendBatch(ctx, b).Close(); err != nil || !c.Matched {
		t.Fatal(c, err)
	}
	var inTx string
	if err := tx.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&inTx); err != nil || inTx != "off" {
		t.Fatalf("synchronous_commit inside the completion's transaction: %q (%v), want off", inTx, err)
	}
}

// A reconciler pass reads the intents of all the leases it took in one
// statement, not one per lease, and settles them all.
func TestReconcilerReadsIntentsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	tr := &tracer{}
	ex := e.another(t, "reconciler", func(c *executor.Config) { c.DB = envPool(t, e, 4, tr) })
	ctx := context.Background()
	const n = 6
	for i := range n {
		call := pixCall("t1", fmt.Sprintf("rec-%d", i), extraction(i, testutil.CPF(80+i)))
		if out, err := e.ex.Execute(ctx, call, nil); err != nil || out.Status != executor.StatusCompleted {
			t.Fatal(out, err)
		}
	}
	// The worker that claimed them died in the provider call.
	if _, err := e.pool.Exec(ctx, `UPDATE actions SET status = 'started', lease_owner = 'dead', lease_until = now() - interval '1 second', finished_at = NULL
		WHERE intent_ref LIKE 'rec-%'`); err != nil {
		t.Fatal(err)
	}
	tr.take()
	res, err := ex.ReconcileOnce(ctx)
	if err != nil || res.TakenOver != n || res.Completed != n {
		t.Fatalf("%+v %v", res, err)
	}
	if got := tr.sent("intentGetByKeyMany"); got != 1 {
		t.Fatalf("the intents of %d leases took %d batch reads, want 1", n, got)
	}
	if got := tr.sent("intentGetByKey"); got != 0 {
		t.Fatalf("%d reads of one intent by key", got)
	}
	if c := countStatus(t, e.pool, "completed"); c != n {
		t.Fatalf("%d completed, want %d", c, n)
	}
	if recs := e.psp.Records(""); len(recs) != n {
		t.Fatalf("%d charges, want %d: the same key again must not charge again", len(recs), n)
	}
}
