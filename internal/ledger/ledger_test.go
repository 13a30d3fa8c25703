package ledger

import (
	"context"
	"crypto/sha256"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// row is an intent to freeze under ref, with a key of its own (64 hex
// digits, as derive's).
func row(tenant, ref, action string, p derive.Payload, source string) *NewIntent {
	return &NewIntent{
		ID: ID{Tenant: tenant, Ref: ref, Action: action}, Version: 2, Payload: p,
		Key: fmt.Sprintf("%x", sha256.Sum256([]byte(tenant+"\x00"+ref+"\x00"+action))), SourceRef: source,
	}
}

// The pitfall the two-statement read-back exists for: a CTE that inserts
// ON CONFLICT DO NOTHING and selects in one statement does not see a row a
// concurrent transaction committed while it waited. QueueFreeze does.
func TestCTEPitfall(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t, &pgtest.Opts{MaxConns: 4})
	p := derive.Payload{{Name: "amount", Value: "18000"}}
	found := race(t, pool, p, "WITH ins AS", func(ctx context.Context, r *NewIntent) (bool, error) {
		rows, err := pool.Query(ctx, `WITH ins AS (`+intentFreeze+` RETURNING idem_key)
			SELECT idem_key FROM ins UNION ALL
			SELECT idem_key FROM intents WHERE tenant_id = $1 AND intent_ref = $2 AND action = $3`,
			r.Tenant, r.Ref, r.Action, r.Version, encodePayload(r.Payload), r.Key, "")
		if err != nil {
			return false, err
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			n++
		}
		return n > 0, rows.Err()
	})
	if found {
		t.Fatal("the single-statement CTE saw the concurrent row: the pitfall did not reproduce")
	}
	found = race(t, pool, p, "INSERT INTO intents", func(ctx context.Context, r *NewIntent) (bool, error) {
		b := &pgx.Batch{}
		f := QueueFreeze(b, r.ID, r)
		if err := pool.SendBatch(ctx, b).Close(); err != nil {
			return false, err
		}
		return !f.Inserted && f.Intent != nil, nil
	})
	if !found {
		t.Fatal("QueueFreeze did not read back the row a concurrent transaction committed")
	}
}

// race holds an uncommitted freeze of a fresh ref in one transaction, runs
// second on the same intent (which must block on it), commits, and
// returns what second saw.
func race(t *testing.T, pool *pgxpool.Pool, p derive.Payload, waiting string, second func(context.Context, *NewIntent) (bool, error)) bool {
	t.Helper()
	ctx := context.Background()
	r := row("t1", fmt.Sprintf("inv-%d", time.Now().UnixNano()), "pix.charge", p, "")
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, intentFreeze, r.Tenant, r.Ref, r.Action, r.Version, encodePayload(r.Payload), r.Key, ""); err != nil {
		t.Fatal(err)
	}
	type res struct {
		found bool
		err   error
	}
	done := make(chan res, 1)
	go func() {
		found, err := second(ctx, r)
		done <- res{found, err}
	}()
	// Poll from another connection: inside tx, pg_stat_activity is a
	// snapshot frozen at its first read.
	waitForLockWait(t, pool, waiting, func() {
		select {
		case r := <-done:
			t.Fatalf("second statement did not wait: found %v, err %v", r.found, r.err)
		default:
		}
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	return got.found
}

// waitForLockWait polls until a backend runs a statement containing substr
// and waits on a lock.
func waitForLockWait(t *testing.T, db DBTX, substr string, check func()) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		check()
		var n int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND position($1 in query) > 0`, substr).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no statement containing %q waited on the lock", substr)
}

// The fresh claim builds, from what it sent, the intent its insert reads
// back as: the statement returns only created_at.
func TestFreshClaimBuildsTheReadBack(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t, nil)
	ctx := context.Background()
	rows := []*NewIntent{
		row("t1", "ins-1", "pix.charge", derive.Payload{{Name: "amount", Value: "18000"}, {Name: "pix_key", Value: "k"}, {Name: "pix_key_type", Value: "CPF"}}, "wamid.1"),
		row("t1", "ins-2", "pix.charge", derive.Payload{{Name: "amount", Value: "18000"}}, ""), // no source ref
		// Out of name order: the read-back's is.
		row("t2", "ins-3", "note.send", derive.Payload{{Name: "text", Value: "olá"}, {Name: "a", Value: "1"}}, "s"),
	}
	b := &pgx.Batch{}
	owners := []string{"me/1", "me/2", "me/3"}
	fs := QueueFreshClaims(b, rows, owners, time.Minute)
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		f := fs[i]
		if !f.Inserted || f.Attempt != 1 || f.Intent == nil {
			t.Fatalf("%s: %+v", r.Ref, f)
		}
		want, err := IntentGet(ctx, pool, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(f.Intent, want) {
			t.Fatalf("%s: built\n%+v\nread back\n%+v", r.Ref, f.Intent, want)
		}
	}
	// Again: every insert conflicts, nothing is claimed.
	b = &pgx.Batch{}
	fs = QueueFreshClaims(b, rows, owners, time.Minute)
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	for i, f := range fs {
		if f != (FreshClaim{}) {
			t.Fatalf("%s again: %+v", rows[i].Ref, f)
		}
	}
}

// fragments are constants of sql.go that are parts of statements, not
// statements.
var fragments = map[string]bool{
	"syncCommitOn": true, "intentColumns": true, "actionColumns": true, "actionPrefixed": true,
	"intentFreezeInsert": true, "actionClaimNewInsert": true, "actionClaimNewTail": true, "actionAge": true, "SupersededClass": true,
}

// Every statement has its name, so that tracers can tell them apart.
func TestEveryStatementIsNamed(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "sql.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, name := range statements {
		named[name] = true
	}
	seen := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			for _, n := range s.(*ast.ValueSpec).Names {
				if fragments[n.Name] {
					continue
				}
				seen++
				if !named[n.Name] {
					t.Errorf("statement %s has no name in names.go", n.Name)
				}
				if ast.IsExported(n.Name) {
					t.Errorf("statement %s is exported", n.Name)
				}
			}
		}
	}
	if seen != len(statements) {
		t.Errorf("sql.go has %d statements, names.go names %d", seen, len(statements))
	}
	for sql, name := range statements {
		if Name(sql) != name || !strings.Contains(sql, " ") {
			t.Errorf("Name of %s", name)
		}
	}
}
