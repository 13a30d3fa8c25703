package executor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/executor/executortest"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

// age moves the rows of the intent_refs matching like back by d: creation,
// update and, where set, finish.
func age(t *testing.T, e *env, like string, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	us := d.Microseconds()
	if _, err := e.pool.Exec(ctx, `UPDATE actions SET created_at = created_at - $2::bigint * interval '1 microsecond',
		updated_at = updated_at - $2::bigint * interval '1 microsecond',
		finished_at = finished_at - $2::bigint * interval '1 microsecond' WHERE intent_ref LIKE $1`, like, us); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `UPDATE intents SET created_at = created_at - $2::bigint * interval '1 microsecond',
		updated_at = updated_at - $2::bigint * interval '1 microsecond' WHERE intent_ref LIKE $1`, like, us); err != nil {
		t.Fatal(err)
	}
}

func rowCount(t *testing.T, e *env, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Purge deletes settled actions past the retention and the intents frozen
// under their keys; it leaves started and review actions, recent ones,
// intents whose current key is not purgeable, and intents with no action.
func TestPurge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	c := testutil.CPF(71)
	exec := func(ref string, i int) *executor.Outcome {
		t.Helper()
		out, err := e.ex.Execute(ctx, pixCall("t1", ref, extraction(i, c)), nil)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	var firstCharge string
	for i, ref := range []string{"old-1", "old-2", "old-3"} {
		out := exec(ref, i)
		if out.Status != executor.StatusCompleted {
			t.Fatalf("%s: %+v", ref, out)
		}
		if ref == "old-1" {
			firstCharge = chargeID(t, out.Response)
		}
	}
	e.psp.SetFault(refFault("old-rej", toolstest.Reject, func(int) bool { return true }))
	if out := exec("old-rej", 0); out.Status != executor.StatusFailed {
		t.Fatalf("old-rej: %+v", out)
	}
	e.psp.SetFault(nil)
	exec("new-1", 0)
	// Started (live lease) and review rows, claimed by hand.
	for _, ref := range []string{"old-started", "old-review"} {
		if _, err := e.store.Freeze(ctx, e.pool, extractParams("t1", ref, extraction(0, c))); err != nil {
			t.Fatal(err)
		}
		if ok, err := executortest.Claim(ctx, e.pool, "t1", ref, tools.PixChargeName, "worker-x", time.Hour); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	if _, err := e.pool.Exec(ctx, `UPDATE actions SET status = 'review', lease_owner = NULL, lease_until = NULL WHERE intent_ref = 'old-review'`); err != nil {
		t.Fatal(err)
	}
	// An intent frozen but never executed.
	if _, err := e.store.Freeze(ctx, e.pool, extractParams("t1", "old-frozen", extraction(0, c))); err != nil {
		t.Fatal(err)
	}
	// Amended intents: old-amend keeps a recent action under its new key
	// (only the tombstone of its old key goes); old-amend2 is old through
	// and through (both actions and the intent go, its revision cascades).
	for _, ref := range []string{"old-amend", "old-amend2"} {
		exec(ref, 0)
		if _, err := e.store.Amend(ctx, e.pool, intent.AmendParams{Tenant: "t1", Ref: ref, Action: tools.PixChargeName,
			Fields: extraction(0, testutil.CPF(72)), Reason: "another CPF", OverrideCompleted: true, By: "op"}); err != nil {
			t.Fatal(err)
		}
		if ref == "old-amend2" {
			exec(ref, 0)
		}
	}
	// Everything "old-" finished 8 days ago (finished_at is set on the
	// started and review rows too: status alone must protect them).
	age(t, e, "old-%", 8*24*time.Hour)
	if _, err := e.pool.Exec(ctx, `UPDATE actions SET finished_at = now() - interval '8 days' WHERE intent_ref IN ('old-started', 'old-review')`); err != nil {
		t.Fatal(err)
	}
	exec("old-amend", 0) // the amended key's action, recent

	res, err := executor.Purge(ctx, e.pool, executor.PurgeParams{Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	// old-1..3, old-rej, the old-amend tombstone, old-amend2's tombstone and action.
	if res.Actions != 7 || res.Intents != 5 || res.Batches < 4 {
		t.Fatalf("purge: %+v, want 7 actions, 5 intents, >= 4 batches", res)
	}
	wantIntents := "new-1 old-amend old-frozen old-review old-started"
	if got := refs(t, e, `SELECT intent_ref FROM intents ORDER BY 1`); got != wantIntents {
		t.Fatalf("intents left: %s, want %s", got, wantIntents)
	}
	wantActions := "new-1 old-amend old-review old-started"
	if got := refs(t, e, `SELECT intent_ref FROM actions ORDER BY 1`); got != wantActions {
		t.Fatalf("actions left: %s, want %s", got, wantActions)
	}
	if n := rowCount(t, e, `SELECT count(*) FROM intent_revisions WHERE intent_ref = 'old-amend2'`); n != 0 {
		t.Fatalf("old-amend2 revisions left: %d", n)
	}
	if n := rowCount(t, e, `SELECT count(*) FROM intent_revisions WHERE intent_ref = 'old-amend'`); n != 1 {
		t.Fatalf("old-amend revisions: %d, want 1", n)
	}

	// Nothing is left to purge.
	if again, err := executor.Purge(ctx, e.pool, executor.PurgeParams{}); err != nil || again.Actions != 0 || again.Intents != 0 {
		t.Fatalf("second purge: %+v %v", again, err)
	}

	// A redelivery past the retention freezes anew under the same key,
	// and the provider, which still knows the key, answers with the first
	// charge: the key is derived, never drawn.
	out := exec("old-1", 3)
	if !out.Created || out.Status != executor.StatusCompleted || chargeID(t, out.Response) != firstCharge {
		t.Fatalf("redelivery after purge: %+v", out)
	}
}

func refs(t *testing.T, e *env, sql string) string {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			t.Fatal(err)
		}
		if out != "" {
			out += " "
		}
		out += r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPurgeRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	for _, p := range []executor.PurgeParams{{Retention: 23 * time.Hour}, {Retention: -time.Hour}, {Batch: -1}, {Pause: -1}} {
		if _, err := executor.Purge(ctx, e.pool, p); !errors.Is(err, executor.ErrConfig) {
			t.Fatalf("%+v: %v, want ErrConfig", p, err)
		}
	}
	ages := map[string]time.Duration{"d8": 8 * 24 * time.Hour, "d6": 6 * 24 * time.Hour, "h25": 25 * time.Hour, "h3": 3 * time.Hour}
	i := 0
	for ref, d := range ages {
		if out, err := e.ex.Execute(ctx, pixCall("t1", ref, extraction(i, testutil.CPF(80+i))), nil); err != nil || out.Status != executor.StatusCompleted {
			t.Fatalf("%+v %v", out, err)
		}
		age(t, e, ref, d)
		i++
	}
	// The default keeps 7 days.
	if res, err := executor.Purge(ctx, e.pool, executor.PurgeParams{}); err != nil || res.Actions != 1 || res.Intents != 1 {
		t.Fatalf("default retention: %+v %v", res, err)
	}
	if got := refs(t, e, `SELECT intent_ref FROM intents ORDER BY 1`); got != "d6 h25 h3" {
		t.Fatalf("left after the default: %s", got)
	}
	// The minimum, 24 hours.
	if res, err := executor.Purge(ctx, e.pool, executor.PurgeParams{Retention: executor.MinRetention}); err != nil || res.Actions != 2 || res.Intents != 2 {
		t.Fatalf("24h retention: %+v %v", res, err)
	}
	if got := refs(t, e, `SELECT intent_ref FROM intents`); got != "h3" {
		t.Fatalf("left after 24h: %s", got)
	}
}

// Purge runs in short transactions beside live executions: neither gets
// in the other's way, and only expired rows go.
func TestPurgeDuringExecutions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &envOpts{poolSize: 4})
	ctx := context.Background()
	const old = 3000
	if _, err := e.pool.Exec(ctx, `INSERT INTO intents (tenant_id, intent_ref, action, rules_version, payload, idem_key, created_at, updated_at)
		SELECT 't' || (g % 7), 'bulk-' || g, 'pix.charge', 2, '{}'::jsonb, encode(sha256(('k' || g)::bytea), 'hex'),
			now() - interval '30 days', now() - interval '30 days'
		FROM generate_series(1, $1) g`, old); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `INSERT INTO actions (tenant_id, idem_key, intent_ref, action, status, attempt, response, created_at, updated_at, finished_at)
		SELECT 't' || (g % 7), encode(sha256(('k' || g)::bytea), 'hex'), 'bulk-' || g, 'pix.charge',
			CASE WHEN g % 10 = 0 THEN 'failed' ELSE 'completed' END, 1, '{}'::jsonb,
			now() - interval '30 days', now() - interval '30 days', now() - interval '30 days'
		FROM generate_series(1, $1) g`, old); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `ANALYZE actions`); err != nil {
		t.Fatal(err)
	}
	var (
		wg   sync.WaitGroup
		errs = make(chan error, 64)
		res  executor.PurgeResult
		perr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, perr = executor.Purge(ctx, e.pool, executor.PurgeParams{Batch: 97})
	}()
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				out, err := e.ex.Execute(ctx, pixCall("t1", fmt.Sprintf("live-%d-%d", w, i), extraction(i, testutil.CPF(100+w))), nil)
				if err != nil || out.Status != executor.StatusCompleted {
					errs <- fmt.Errorf("live-%d-%d: %+v %v", w, i, out, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if perr != nil {
		t.Fatal(perr)
	}
	if res.Actions != old || res.Intents != old {
		t.Fatalf("purge: %+v, want %d and %d", res, old, old)
	}
	if n := rowCount(t, e, `SELECT count(*) FROM actions WHERE status = 'completed' AND intent_ref LIKE 'live-%'`); n != 120 {
		t.Fatalf("live actions: %d", n)
	}
	if n := rowCount(t, e, `SELECT count(*) FROM intents`); n != 120 {
		t.Fatalf("intents left: %d", n)
	}
}

// Purge pauses only after a batch that deleted something: ranges with
// nothing expired follow one another at once, so a Pause of an hour over
// a table with nothing to purge ends as soon as the table is walked.
func TestPurgePausesOnlyAfterDeleting(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	// Enough recent rows for several ranges of 8 blocks.
	const recent = 2000
	if _, err := e.pool.Exec(ctx, `INSERT INTO actions (tenant_id, idem_key, intent_ref, action, status, attempt, response, finished_at)
		SELECT 't1', encode(sha256(('r' || g)::bytea), 'hex'), 'recent-' || g, 'pix.charge', 'completed', 1, '{}'::jsonb, now()
		FROM generate_series(1, $1) g`, recent); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `ANALYZE actions`); err != nil {
		t.Fatal(err)
	}
	// An hour-long pause after any batch would outlive this deadline, and
	// Purge would return its error.
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	res, err := executor.Purge(pctx, e.pool, executor.PurgeParams{Batch: 10, Pause: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.Actions != 0 || res.Batches < 2 {
		t.Fatalf("purge: %+v, want nothing deleted over several batches", res)
	}
}
