package executor_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/ledger"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

// A claims group folds its calls into four statements, a read-first
// lookup and a fresh claim into one each. Whatever mix of calls they hold, each must find exactly
// what it would have found alone: the same freeze result, the same claim,
// the same action.
func TestClaimGroupMatchesAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cA, cB, cN, cO := testutil.CPF(71000), testutil.CPF(71001), testutil.CPF(71002), testutil.CPF(71003)
	calls := []executor.Call{
		pixCall("t1", "new-1", extraction(0, cN)),                                                          // new: created and claimed
		pixCall("t1", "new-1", extraction(1, cN)),                                                          // the same intent again: in flight
		pixCall("t2", "new-1", extraction(2, cN)),                                                          // the same ref in another tenant: its own
		pixCall("t1", "done-a", map[string]any{"customer_id": "cust-1", "amount": "99,00", "pix_key": cA}), // completed: divergent, replayed
		pixCall("t1", "done-a", map[string]any{"customer_id": "cust-1", "amount": "nope", "pix_key": cA}),  // completed, bad extraction
		pixCall("t1", "frozen-b", extraction(3, cB)),                                                       // frozen without an action: claimed
		pixCall("t1", "bad-c", map[string]any{"amount": "nope"}),                                           // nothing frozen, bad fields: error
		pixCall("t1", "orphan-d", extraction(4, cO)),                                                       // frozen now, but a row holds its key: not claimed
	}
	run := func(how executor.ClaimHow) []executor.ClaimSeen {
		e := newEnv(t, nil)
		// The same history in each schema: done-a completed, frozen-b
		// frozen only, an action without an intent under orphan-d's key
		// (as an amendment leaves under an intent's old key).
		if _, err := e.pool.Exec(ctx, `INSERT INTO actions (tenant_id, idem_key, intent_ref, action, status, finished_at)
			VALUES ('t1', $1, 'gone', 'pix.charge', 'completed', now())`, keyOf(t, e, "t1", "orphan-d", extraction(4, cO))); err != nil {
			t.Fatal(err)
		}
		if out, err := e.ex.Execute(ctx, pixCall("t1", "done-a", extraction(0, cA)), nil); err != nil || out.Status != executor.StatusCompleted {
			t.Fatal(out, err)
		}
		if _, err := e.store.Freeze(ctx, e.pool, extractParams("t1", "frozen-b", extraction(0, cB))); err != nil {
			t.Fatal(err)
		}
		seen, err := e.ex.ClaimAll(ctx, calls, how)
		if err != nil {
			t.Fatal(err)
		}
		return seen
	}
	alone, grouped := run(executor.ClaimAlone), run(executor.ClaimGrouped)
	readFirst, fresh := run(executor.ClaimReadFirst), run(executor.ClaimFresh)
	for i := range calls {
		if !reflect.DeepEqual(alone[i], grouped[i]) {
			t.Errorf("call %d (%s/%s):\n alone   %+v\n grouped %+v", i, calls[i].Tenant, calls[i].Ref, alone[i], grouped[i])
		}
		// The read-first lookup settles only the calls whose intent and
		// action both exist (done-a), and those as the writes would have.
		lookedUp := readFirst[i].LookedUp
		readFirst[i].LookedUp = false
		if !reflect.DeepEqual(alone[i], readFirst[i]) {
			t.Errorf("call %d (%s/%s):\n alone      %+v\n read first %+v", i, calls[i].Tenant, calls[i].Ref, alone[i], readFirst[i])
		}
		if want := calls[i].Ref == "done-a"; lookedUp != want {
			t.Errorf("call %d (%s/%s): settled by the lookup %v, want %v", i, calls[i].Tenant, calls[i].Ref, lookedUp, want)
		}
		// The fresh claim settles only the first call for each new
		// intent, and those as the writes would have.
		settled := fresh[i].LookedUp
		fresh[i].LookedUp = false
		if !reflect.DeepEqual(alone[i], fresh[i]) {
			t.Errorf("call %d (%s/%s):\n alone %+v\n fresh %+v", i, calls[i].Tenant, calls[i].Ref, alone[i], fresh[i])
		}
		if want := i == 0 || i == 2; settled != want {
			t.Errorf("call %d (%s/%s): settled by the fresh claim %v, want %v", i, calls[i].Tenant, calls[i].Ref, settled, want)
		}
	}
	// And the cases are what they claim to be.
	want := []struct {
		claimed, created, err bool
		act                   string
	}{
		{true, true, false, ""},
		{false, false, false, executor.RowStarted},
		{true, true, false, ""},
		{false, false, false, executor.RowCompleted},
		{false, false, false, executor.RowCompleted},
		{true, false, false, ""},
		{false, false, true, ""},
		{false, true, false, executor.RowCompleted},
	}
	for i, w := range want {
		g := grouped[i]
		if g.Claimed != w.claimed || g.Created != w.created || (g.Err != "") != w.err || g.ActStatus != w.act {
			t.Errorf("call %d: %+v, want claimed %v created %v error %v action %q", i, g, w.claimed, w.created, w.err, w.act)
		}
	}
	if len(grouped[3].Divergent) == 0 || grouped[4].ExtractionErr == "" {
		t.Errorf("divergence not reported: %+v %+v", grouped[3], grouped[4])
	}
}

// Hundreds of first executions on a small pool: the claims and completions
// share commits (fewer round trips than two per execution), and every
// intent is charged exactly once.
func TestGroupCommitUnderLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &envOpts{poolSize: 4})
	tr := &tracer{}
	pool := envPool(t, e, 4, tr)
	ex := e.another(t, "grouped", func(c *executor.Config) { c.DB = pool; c.GroupCommitConns = 1 })
	const n = 300
	res := runConcurrent(n, func(i int) executor.Call {
		ref := i
		if i%10 == 1 {
			ref = i - 1 // every tenth intent twice: duplicates inside groups
		}
		return pixCall("t1", fmt.Sprintf("load-%d", ref), extraction(i, testutil.CPF(72000+ref)))
	}, ex)
	completed := 0
	for i, r := range res {
		checkErr(t, i, r)
		if r.out.Status == executor.StatusCompleted {
			completed++
		}
	}
	q, b := tr.take()
	intents := 0
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM intents WHERE intent_ref LIKE 'load-%'`).Scan(&intents); err != nil {
		t.Fatal(err)
	}
	if got := e.psp.Count(""); got != intents {
		t.Fatalf("%d charges for %d intents", got, intents)
	}
	t.Logf("%d executions of %d intents: %d completed, %d batches + %d queries", n, intents, completed, b, q)
	if b+q >= 2*int64(n) {
		t.Fatalf("%d round trips for %d executions: nothing was grouped", b+q, n)
	}
}

// A group the server refuses is all-or-nothing: every unit is told to run
// alone, and nothing of the group is left behind. A unit whose caller gave
// up before its group left is not sent at all, and the rest of its group
// commits.
func TestGroupFailureAndCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `CREATE TABLE group_probe (k text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	g := executor.NewGrouper(e.pool, 16, 1)
	insert := func(k string) func(*pgx.Batch) {
		return func(b *pgx.Batch) { b.Queue(`INSERT INTO group_probe VALUES ($1)`, k) }
	}
	held, err := e.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	grouped := func(ctxs []context.Context, units []func(*pgx.Batch), beforeSend func()) []error {
		return groupTogether(t, g, held.Conn(), 7301, ctxs, units, beforeSend)()
	}
	count := func(k string) int {
		var n int
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM group_probe WHERE k = $1 OR $1 = ''`, k).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// A refused group: every unit is told to run alone, nothing is left.
	errs := grouped([]context.Context{ctx, ctx, ctx},
		[]func(*pgx.Batch){insert("a"), func(b *pgx.Batch) { b.Queue(`SELECT 1/0`) }, insert("b")}, func() {})
	for i, err := range errs {
		if !errors.Is(err, executor.ErrAlone) {
			t.Errorf("unit %d of the refused group: %v, want ErrAlone", i, err)
		}
	}
	if n := count(""); n != 0 {
		t.Fatalf("%d rows left by a refused group", n)
	}

	// A unit whose caller gave up before the group left is not sent; the
	// others commit.
	canceled, cancel := context.WithCancel(ctx)
	errs = grouped([]context.Context{ctx, canceled, ctx},
		[]func(*pgx.Batch){insert("c"), insert("gone"), insert("d")}, cancel)
	if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], context.Canceled) {
		t.Fatalf("errors %v, want nil, context.Canceled, nil", errs)
	}
	if count("c") != 1 || count("d") != 1 || count("gone") != 0 {
		t.Fatalf("rows c %d, d %d, gone %d: want 1, 1, 0", count("c"), count("d"), count("gone"))
	}

	// Alone, a unit's own error is its own.
	var pgErr *pgconn.PgError
	if err := executor.NewGrouper(e.pool, 16, 1).Do(ctx, "x", func(b *pgx.Batch) { b.Queue(`SELECT 1/0`) }); !errors.As(err, &pgErr) {
		t.Fatalf("a group of one: %v, want the server's error", err)
	}
	// Grouping off: every unit runs alone.
	if err := executor.NewGrouper(e.pool, 1, 1).Do(ctx, "x", insert("c")); !errors.Is(err, executor.ErrAlone) {
		t.Fatalf("GroupCommit 1: %v", err)
	}
}

// With grouping off, executions behave as before.
func TestGroupCommitOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &envOpts{cfg: func(c *executor.Config) { c.GroupCommit = 1 }})
	res := runConcurrent(50, func(i int) executor.Call {
		return pixCall("t1", fmt.Sprintf("off-%d", i%5), extraction(i, testutil.CPF(73000+i%5)))
	}, e.ex)
	for i, r := range res {
		checkErr(t, i, r)
	}
	if got := e.psp.Count(""); got != 5 {
		t.Fatalf("%d charges for 5 intents", got)
	}
}

// A run of claims that write nothing (redeliveries of completed actions)
// stops the claims grouper from holding calls back for fuller groups; the
// first claim that writes again restores it.
func TestGroupReadOnlyMode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	c := testutil.CPF(74000)
	if out, err := e.ex.Execute(ctx, pixCall("t1", "ro-1", extraction(0, c)), nil); err != nil || out.Status != executor.StatusCompleted {
		t.Fatal(out, err)
	}
	for i := range 40 {
		if e.ex.ClaimsReadOnly() != (i >= 32) {
			t.Fatalf("after %d replays: read-only mode %v", i, e.ex.ClaimsReadOnly())
		}
		if out, err := e.ex.Execute(ctx, pixCall("t1", "ro-1", extraction(i, c)), nil); err != nil || !out.Replayed {
			t.Fatal(out, err)
		}
	}
	if out, err := e.ex.Execute(ctx, pixCall("t1", "ro-2", extraction(0, testutil.CPF(74001))), nil); err != nil || out.Replayed {
		t.Fatal(out, err)
	}
	if e.ex.ClaimsReadOnly() {
		t.Fatal("still in read-only mode after a first execution")
	}
}

// In read-only mode a redelivery reads its intent and action in one
// statement and writes nothing; what it returns is what the freeze and
// claim would have returned. A call the lookup cannot settle (an intent
// amended to a key with no action yet, an intent never seen) falls through
// to the freeze and claim.
func TestReadFirstReplays(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	tr := &sqlTracer{}
	pool := envPool(t, e, 4, tr)
	ex := e.another(t, "read-first", func(c *executor.Config) { c.DB = pool })

	c, cf := testutil.CPF(75000), testutil.CPF(75001)
	first, err := ex.Execute(ctx, pixCall("t1", "rf-1", extraction(0, c)), nil)
	if err != nil || first.Status != executor.StatusCompleted {
		t.Fatal(first, err)
	}
	e.psp.SetFault(refFault("rf-f", toolstest.Reject, func(int) bool { return true }))
	if out, err := ex.Execute(ctx, pixCall("t1", "rf-f", extraction(0, cf)), nil); err != nil || out.Status != executor.StatusFailed {
		t.Fatal(out, err)
	}
	e.psp.SetFault(nil)
	// The same drifted extraction, replayed before and in read-only mode.
	drifted := map[string]any{"customer_id": "cust-9", "amount": "99,00", "pix_key": c}
	var before *executor.Outcome
	for i := range 40 {
		if i == 31 {
			tr.take()
		}
		call := pixCall("t1", "rf-1", extraction(i, c))
		if i == 31 || i == 39 {
			call = pixCall("t1", "rf-1", drifted)
		}
		out, err := ex.Execute(ctx, call, nil)
		if err != nil || !out.Replayed || out.Key != first.Key || chargeID(t, out.Response) != chargeID(t, first.Response) {
			t.Fatalf("replay %d: %+v %v", i, out, err)
		}
		sql := tr.take()
		switch {
		case i == 31:
			before = out
			// The fresh claim (a batch of its own, which makes its own
			// settings) finds the intent frozen; the freeze and claim,
			// behind the plan settings, read it.
			if len(sql) != 6 || ledger.Name(sql[0]) != "intentActionClaimNew" || ledger.Name(sql[1]) != "groupPlans" {
				t.Fatalf("replay %d before read-only mode sent %q, want the fresh claim, then the plan settings and the freeze and claim's 4 statements", i, sql)
			}
		case i >= 32:
			if len(sql) != 2 || ledger.Name(sql[0]) != "lookupPlans" || ledger.Name(sql[1]) != "intentActionGet" {
				t.Fatalf("replay %d in read-only mode sent %d statements: %q", i, len(sql), sql)
			}
		}
		if i == 39 && !reflect.DeepEqual(out, before) {
			t.Fatalf("read-first replay differs from the freeze and claim's:\n %+v\n %+v", out, before)
		}
	}
	if len(before.Divergent) == 0 {
		t.Fatalf("drift not reported: %+v", before)
	}
	if !ex.ClaimsReadOnly() {
		t.Fatal("not in read-only mode after 40 replays")
	}

	// Amended after failing: the intent's new key has no action, so the
	// lookup leaves the call to the freeze and claim, which executes it.
	fixed := extraction(0, testutil.CPF(75002))
	res, err := e.store.Amend(ctx, e.pool, intent.AmendParams{Tenant: "t1", Ref: "rf-f", Action: tools.PixChargeName, Fields: fixed, Reason: "another CPF"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := ex.Execute(ctx, pixCall("t1", "rf-f", extraction(1, cf)), nil)
	if err != nil || out.Status != executor.StatusCompleted || out.Replayed || out.Key != res.Intent.Key {
		t.Fatalf("amended intent: %+v %v", out, err)
	}
	if rec := e.psp.Records(""); len(rec) != 2 {
		t.Fatalf("%d charges, want rf-1 and the amended rf-f", len(rec))
	}
	if ex.ClaimsReadOnly() {
		t.Fatal("still in read-only mode after a claim that wrote")
	}
}

// A replay storm's read-first lookups go out as groups, whose statement
// (intentActionGetMany) runs its generic plan: left to choose, PostgreSQL
// planned it afresh for every group (custom plans, the arrays' lengths
// known), which took a third of the server's CPU per replay at 8 callers.
// The other group statements keep choosing (see ledger's groupPlans).
func TestLookupGroupsRunGenericPlans(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	pool := envPool(t, e, 1, nil) // one session: its prepared statements are what is read
	ex := e.another(t, "generic", func(c *executor.Config) { c.DB = pool })
	call := func(i int) executor.Call {
		return pixCall("t1", fmt.Sprintf("gen-%d", i), extraction(i, testutil.CPF(77000+i)))
	}
	// First executions, then replays: past 32 that wrote nothing the
	// claims turn read-first, and 64 callers on one connection share
	// lookups groups.
	for range 4 {
		for i, r := range runConcurrent(64, call, ex) {
			checkErr(t, i, r)
		}
	}
	if !ex.ClaimsReadOnly() {
		t.Fatal("not in read-only mode after replays")
	}
	plans := map[string][2]int64{}
	rows, err := pool.Query(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
	if err != nil {
		t.Fatal(err)
	}
	var sql string
	var generic, custom int64
	if _, err := pgx.ForEachRow(rows, []any{&sql, &generic, &custom}, func() error {
		plans[ledger.Name(sql)] = [2]int64{generic, custom}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, ok := plans["intentActionGetMany"]
	if !ok {
		t.Fatalf("no lookups group ran: prepared %v", plans)
	}
	if got[0] == 0 || got[1] != 0 {
		t.Fatalf("intentActionGetMany: %d generic and %d custom plans, want generic only", got[0], got[1])
	}
	if got, ok := plans["intentActionClaimNewMany"]; ok && got[1] == 0 {
		t.Fatalf("intentActionClaimNewMany: %d generic and %d custom plans: the fresh claims groups should keep choosing", got[0], got[1])
	}
}

// Plans made while the tables were vacuumed empty must not scan them once
// they have grown: every batch of the hot path, and every one-off of the
// failure paths and the reconciler, runs under GroupPlans, so the generic
// plans a connection caches after its first executions are index lookups.
// Without it, the read-backs' cached plans were sequential scans, which
// this test sees in pg_stat_user_tables; with it on the hot path only, the
// reconciler's read of the intent by key still scanned (8 scans).
func TestPlansSurviveEmptyTables(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	for _, q := range []string{`VACUUM ANALYZE intents`, `VACUUM ANALYZE actions`} {
		if _, err := e.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	tr := &tracer{}
	pool := envPool(t, e, 1, tr) // one session: its plan cache is what is tested
	ex := e.another(t, "plans", func(c *executor.Config) { c.DB = pool })
	// A worker whose calls outlast several heartbeats. Each heartbeat has
	// Heartbeat to finish, and the lease holds for 0.9 s without one: room
	// for a loaded machine under -race.
	hb := e.another(t, "plans-hb", func(c *executor.Config) {
		c.DB, c.Heartbeat, c.Lease, c.LeaseMargin, c.Timeout = pool, 50*time.Millisecond, time.Second, 100*time.Millisecond, 5*time.Second
	})
	e.psp.SlowDelay = 160 * time.Millisecond
	call := func(i int) executor.Call {
		return pixCall("t1", fmt.Sprintf("plan-%d", i), extraction(i, testutil.CPF(76000+i)))
	}
	// The failure paths: the provider fails the first request of
	// "plan-<i>-retry" (release, then retake after the backoff), and takes
	// its time over "plan-<i>-slow" (heartbeats).
	e.psp.SetFault(func(r toolstest.Request) toolstest.Fault {
		d, _ := r.Body["description"].(string)
		switch {
		case strings.HasSuffix(d, "-retry") && r.N == 1:
			return toolstest.FailBefore
		case strings.HasSuffix(d, "-slow"):
			return toolstest.Slow
		}
		return toolstest.None
	})
	// crash puts call's completed action back to started under an expired
	// lease of a worker that died, for a takeover or the reconciler.
	// The test's own writes go through a session of their own, apart from
	// the executor's.
	side := envPool(t, e, 1, nil)
	crash := func(c executor.Call) {
		b := &pgx.Batch{}
		ledger.QueuePlans(b)
		b.Queue(`UPDATE actions SET status = 'started', lease_owner = 'dead', lease_until = now() - interval '1 second', finished_at = NULL
			WHERE tenant_id = $1 AND idem_key = (SELECT idem_key FROM intents WHERE tenant_id = $1 AND intent_ref = $2 AND action = $3)`,
			c.Tenant, c.Ref, c.Action)
		if err := side.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
	}
	done := func(out *executor.Outcome, err error) {
		t.Helper()
		if err != nil || out.Status != executor.StatusCompleted {
			t.Fatal(out, err)
		}
	}
	// execute runs n intents from one caller (a first execution and a
	// replay each: groups of one), then 64 from 64 callers, twice (first
	// executions, then replays, which turn the read-first lookups on: the
	// group statements). Then each failure path n times: a transient
	// failure, a call long enough for heartbeats, a takeover by Execute,
	// and by the reconciler.
	execute := func(from, n int) {
		for i := from; i < from+n; i++ {
			for range 2 {
				done(ex.Execute(ctx, call(i), nil))
			}
		}
		for range 2 {
			for i, r := range runConcurrent(64, func(i int) executor.Call { return call(from + 1000 + i) }, ex) {
				checkErr(t, i, r)
			}
		}
		for i := from; i < from+n; i++ {
			retry := call(i)
			retry.Ref += "-retry"
			done(ex.Execute(ctx, retry, nil))
			slow := call(i)
			slow.Ref += "-slow"
			done(hb.Execute(ctx, slow, nil))
			crash(call(i))
			done(ex.Execute(ctx, call(i), nil))
			crash(call(i))
			if res, err := ex.ReconcileOnce(ctx); err != nil || res.TakenOver != 1 {
				t.Fatal(res, err)
			}
		}
	}
	// Past the plan cache's five custom plans: generic plans from here on.
	execute(0, 8)
	// The tables grow (no ANALYZE: nothing invalidates the cached plans).
	if _, err := e.pool.Exec(ctx, `INSERT INTO intents (tenant_id, intent_ref, action, rules_version, payload, idem_key)
		SELECT 't1', 'grown-' || g, 'pix.charge', 1, '{}', md5(g::text) FROM generate_series(1, 3000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `INSERT INTO actions (tenant_id, idem_key, intent_ref, action, status, attempt, finished_at)
		SELECT 't1', md5(g::text), 'grown-' || g, 'pix.charge', 'completed', 1, now() FROM generate_series(1, 3000) g`); err != nil {
		t.Fatal(err)
	}
	seqScans := func() int64 {
		// The session's counters reach the shared statistics at the end
		// of its next transaction.
		if _, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			t.Fatal(err)
		}
		var n int64
		if err := e.pool.QueryRow(ctx, `SELECT coalesce(sum(seq_scan), 0) FROM pg_stat_user_tables
			WHERE schemaname = current_schema() AND relname IN ('intents', 'actions')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if tr.sent("actionHeartbeat") < 8 {
		t.Fatalf("%d heartbeats in 8 slow calls", tr.sent("actionHeartbeat"))
	}
	before := seqScans()
	execute(100, 8)
	if after := seqScans(); after != before {
		t.Fatalf("%d sequential scans of intents and actions by executions on grown tables", after-before)
	}
}

// A completions group is one UPDATE over arrays. Each completion must match
// its fence (tenant, key, owner, attempt, started) exactly as it would
// alone, and leave the same row behind.
func TestCompleteGroupMatchesAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	str := func(s string) *string { return &s }
	type row struct {
		Tenant, Key, Status, Owner, Response, Error string
		Attempt                                     int
		Leased, Finished                            bool
	}
	run := func(grouped, async bool) ([]bool, []row) {
		e := newEnv(t, nil)
		me := e.ex.Config().Owner
		if _, err := e.pool.Exec(ctx, `INSERT INTO actions (tenant_id, idem_key, intent_ref, action, status, attempt, lease_owner, lease_until, finished_at)
			VALUES ('t1', 'k1', 'r1', 'a', 'started', 1, $1, now() + interval '1 minute', NULL),
			       ('t1', 'k2', 'r2', 'a', 'started', 1, 'someone-else', now() + interval '1 minute', NULL),
			       ('t1', 'k3', 'r3', 'a', 'started', 2, $1, now() + interval '1 minute', NULL),
			       ('t1', 'k4', 'r4', 'a', 'completed', 1, NULL, NULL, now()),
			       ('t1', 'k5', 'r5', 'a', 'started', 1, $1, now() + interval '1 minute', NULL),
			       ('t2', 'k1', 'r1', 'a', 'started', 3, $1, now() + interval '1 minute', NULL)`, me); err != nil {
			t.Fatal(err)
		}
		cs := []executor.CompleteArgs{
			{Tenant: "t1", Key: "k1", Attempt: 1, Status: executor.RowCompleted, Resp: str(`{"id": "ch_1"}`)}, // matches
			{Tenant: "t1", Key: "k2", Attempt: 1, Status: executor.RowCompleted, Resp: str(`{"id": "ch_2"}`)}, // another owner's lease
			{Tenant: "t1", Key: "k3", Attempt: 1, Status: executor.RowCompleted, Resp: str(`{"id": "ch_3"}`)}, // taken over since
			{Tenant: "t1", Key: "k4", Attempt: 1, Status: executor.RowCompleted, Resp: str(`{"id": "ch_4"}`)}, // already settled
			{Tenant: "t1", Key: "k5", Attempt: 1, Status: executor.RowFailed, Fail: str(`{"class": "definitive"}`)},
			{Tenant: "t2", Key: "k1", Attempt: 3, Status: executor.RowReview, Fail: str(`{"class": "uncertain"}`)},
			{Tenant: "t1", Key: "k9", Attempt: 1, Status: executor.RowCompleted, Resp: str(`{}`)}, // no such row
		}
		if async {
			cs = cs[:4] // only successes complete asynchronously
		}
		matched, err := e.ex.CompleteAll(ctx, cs, grouped, async)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := e.pool.Query(ctx, `SELECT tenant_id, idem_key, status, coalesce(lease_owner, ''), coalesce(response::text, ''),
			coalesce(error::text, ''), attempt, lease_until IS NOT NULL, finished_at IS NOT NULL FROM actions ORDER BY 1, 2`)
		if err != nil {
			t.Fatal(err)
		}
		var got []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.Tenant, &r.Key, &r.Status, &r.Owner, &r.Response, &r.Error, &r.Attempt, &r.Leased, &r.Finished); err != nil {
				t.Fatal(err)
			}
			got = append(got, r)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return matched, got
	}
	for _, async := range []bool{false, true} {
		am, arows := run(false, async)
		gm, grows := run(true, async)
		if !reflect.DeepEqual(am, gm) {
			t.Errorf("async %v: matched alone %v, grouped %v", async, am, gm)
		}
		if !reflect.DeepEqual(arows, grows) {
			t.Errorf("async %v: rows differ:\n alone   %+v\n grouped %+v", async, arows, grows)
		}
		want := []bool{true, false, false, false, true, true, false}[:len(am)]
		if !reflect.DeepEqual(gm, want) {
			t.Errorf("async %v: matched %v, want %v", async, gm, want)
		}
	}
}

// groupTogether runs units as one group of g, unit i under ctxs[i] (all
// under context.Background() when ctxs is nil): g's only slot is kept busy
// by an earlier unit waiting for advisory lock lock, which held takes
// here, until all of them wait for the next group; then beforeSend (when
// not nil) runs and held lets the lock go. It returns a function that
// waits for the units' errors.
func groupTogether(t *testing.T, g *executor.Grouper, held executor.DBTX, lock int, ctxs []context.Context, units []func(*pgx.Batch), beforeSend func()) (wait func() []error) {
	t.Helper()
	ctx := context.Background()
	if _, err := held.Exec(ctx, `SELECT pg_advisory_lock($1)`, lock); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = g.Do(ctx, "0", func(b *pgx.Batch) {
			close(started)
			b.Queue(`SELECT pg_advisory_xact_lock($1)`, lock)
		})
	})
	<-started
	errs := make([]error, len(units))
	for i, q := range units {
		uctx := ctx
		if ctxs != nil {
			uctx = ctxs[i]
		}
		wg.Go(func() { errs[i] = g.Do(uctx, fmt.Sprint(i+1), q) })
	}
	testutil.FinishWithin(t, 10*time.Second, "queueing", func() {
		for g.Pending() < len(units) {
			time.Sleep(time.Millisecond)
		}
	})
	if beforeSend != nil {
		beforeSend()
	}
	if _, err := held.Exec(ctx, `SELECT pg_advisory_unlock($1)`, lock); err != nil {
		t.Fatal(err)
	}
	return func() []error {
		testutil.FinishWithin(t, 10*time.Second, "the group", wg.Wait)
		return errs
	}
}

// statements is one unit per statement.
func statements(sqls ...string) []func(*pgx.Batch) {
	units := make([]func(*pgx.Batch), len(sqls))
	for i, sql := range sqls {
		units[i] = func(b *pgx.Batch) { b.Queue(sql) }
	}
	return units
}
