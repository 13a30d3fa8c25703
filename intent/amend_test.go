package intent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

func setAction(t *testing.T, db intent.DBTX, tenant, key, status string) {
	t.Helper()
	lease := "NULL"
	if status == "started" {
		lease = "now() + interval '1 minute'"
	}
	_, err := db.Exec(context.Background(), `INSERT INTO actions (tenant_id, idem_key, intent_ref, action, status, lease_until)
		VALUES ($1, $2, 'x', 'x', $3, `+lease+`)
		ON CONFLICT (tenant_id, idem_key) DO UPDATE SET status = excluded.status, lease_until = excluded.lease_until`, tenant, key, status)
	if err != nil {
		t.Fatal(err)
	}
}

func TestAmend(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t, nil)
	s := newStore(t)
	ctx := context.Background()
	c := testutil.CPF(42)
	first := freeze(t, s, pool, "t1", "inv-1", equivalent(0, c))
	oldKey := first.Intent.Key

	amend := func(f map[string]any) (*intent.AmendResult, error) {
		return s.Amend(ctx, pool, intent.AmendParams{Tenant: "t1", Ref: "inv-1", Action: action, Fields: f, Reason: "wrong Pix key", By: "op-1"})
	}
	fixed := equivalent(0, c)
	fixed["pix_key"] = "ana@example.com"
	delete(fixed, "pix_key_type")

	for _, st := range []string{"started", "review"} {
		setAction(t, pool, "t1", oldKey, st)
		if _, err := amend(fixed); !errors.Is(err, intent.ErrActionActive) {
			t.Fatalf("amend with action %s: %v", st, err)
		}
	}
	if _, err := amend(equivalent(3, c)); !errors.Is(err, intent.ErrNoChange) {
		t.Fatalf("equivalent amendment: %v", err)
	}
	if _, err := s.Amend(ctx, pool, intent.AmendParams{Tenant: "t1", Ref: "inv-1", Action: action, Fields: fixed}); !errors.Is(err, intent.ErrInvalid) {
		t.Fatalf("amend without reason: %v", err)
	}
	// Another tenant cannot amend it.
	if _, err := s.Amend(ctx, pool, intent.AmendParams{Tenant: "t2", Ref: "inv-1", Action: action, Fields: fixed, Reason: "x"}); !errors.Is(err, intent.ErrNotFound) {
		t.Fatalf("cross-tenant amend: %v", err)
	}

	setAction(t, pool, "t1", oldKey, "failed")
	res, err := amend(fixed)
	if err != nil {
		t.Fatal(err)
	}
	if res.OldKey != oldKey || res.Intent.Key == oldKey || res.Intent.Revision != 1 || fmt.Sprint(res.Changed) != "[pix_key pix_key_type]" {
		t.Fatalf("amend: %+v", res)
	}
	got, err := intent.Get(ctx, pool, "t1", "inv-1", action)
	if err != nil || got.Key != res.Intent.Key {
		t.Fatalf("get after amend: %+v %v", got, err)
	}
	// A redelivery of the old extraction now diverges from the amended intent.
	r := freeze(t, s, pool, "t1", "inv-1", equivalent(0, c))
	if r.Intent.Key != res.Intent.Key || fmt.Sprint(r.Divergent) != "[pix_key pix_key_type]" {
		t.Fatalf("after amend: %+v", r)
	}
	revs, err := intent.Revisions(ctx, pool, "t1", "inv-1", action)
	if err != nil || len(revs) != 1 || revs[0].OldKey != oldKey || revs[0].NewKey != res.Intent.Key || revs[0].Reason != "wrong Pix key" || revs[0].AmendedBy != "op-1" {
		t.Fatalf("revisions: %+v %v", revs, err)
	}
	if v, _ := revs[0].OldPayload.Get("pix_key"); v != c {
		t.Fatal("old payload not kept")
	}

	// Amending back to the first payload lifts the tombstone it left? The
	// old key has a real (failed) action, which stays.
	if _, err := amend(equivalent(0, c)); err != nil {
		t.Fatal(err)
	}
	var st string
	if err := pool.QueryRow(ctx, `SELECT status FROM actions WHERE tenant_id = 't1' AND idem_key = $1`, oldKey).Scan(&st); err != nil || st != "failed" {
		t.Fatalf("old action: %q %v", st, err)
	}
}

// An amendment of an intent that never ran leaves a tombstone under the old
// key, so a claim that read the old key just before cannot act on it.
func TestAmendTombstone(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t, nil)
	s := newStore(t)
	ctx := context.Background()
	first := freeze(t, s, pool, "t1", "inv-2", equivalent(0, testutil.CPF(77)))
	f := equivalent(0, testutil.CPF(77))
	f["amount"] = "1,00"
	res, err := s.Amend(ctx, pool, intent.AmendParams{Tenant: "t1", Ref: "inv-2", Action: action, Fields: f, Reason: "typo"})
	if err != nil {
		t.Fatal(err)
	}
	var (
		st  string
		raw []byte
	)
	if err := pool.QueryRow(ctx, `SELECT status, error FROM actions WHERE tenant_id = 't1' AND idem_key = $1`, first.Intent.Key).Scan(&st, &raw); err != nil {
		t.Fatal(err)
	}
	var e struct{ Class string }
	_ = json.Unmarshal(raw, &e)
	if st != "failed" || e.Class != intent.SupersededClass {
		t.Fatalf("tombstone: %s %s", st, raw)
	}
	// Amending back to the first payload lifts the tombstone.
	if _, err := s.Amend(ctx, pool, intent.AmendParams{Tenant: "t1", Ref: "inv-2", Action: action, Fields: equivalent(0, testutil.CPF(77)), Reason: "undo"}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM actions WHERE tenant_id = 't1' AND idem_key = $1`, first.Intent.Key).Scan(&n); err != nil || n != 0 {
		t.Fatalf("tombstone still there: %d %v", n, err)
	}
	// The second key now carries the tombstone.
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM actions WHERE tenant_id = 't1' AND idem_key = $1`, res.Intent.Key).Scan(&n); err != nil || n != 1 {
		t.Fatalf("second tombstone: %d %v", n, err)
	}
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t, nil)
	s := newStore(t)
	ctx := context.Background()
	a := freeze(t, s, pool, "tenant-a", "inv-1", equivalent(0, testutil.CPF(9)))
	if _, err := intent.GetByKey(ctx, pool, "tenant-b", a.Intent.Key); !errors.Is(err, intent.ErrNotFound) {
		t.Fatalf("B read A's intent by key: %v", err)
	}
	if _, err := intent.Get(ctx, pool, "tenant-b", "inv-1", action); !errors.Is(err, intent.ErrNotFound) {
		t.Fatalf("B read A's intent by ref: %v", err)
	}
	// B freezing the same ref and fields gets its own intent and key: the
	// tenant is in the key.
	b := freeze(t, s, pool, "tenant-b", "inv-1", equivalent(0, testutil.CPF(9)))
	if !b.Created || b.Intent.Key == a.Intent.Key {
		t.Fatalf("B: %+v", b)
	}
	got, err := intent.GetByKey(ctx, pool, "tenant-a", a.Intent.Key)
	if err != nil || got.Tenant != "tenant-a" || got.SourceRef != "msg-1" {
		t.Fatalf("A: %+v %v", got, err)
	}
}

// Extraction never panics, and a payload it accepts is a fixed point:
// extracting the normalized payload again (amount written back in reais)
// yields the same key, so an operator re-entering a frozen payload, or a
// redelivery echoing it, never moves the key.
func FuzzExtract(f *testing.F) {
	d, err := derive.New(derive.Config{Secret: secret, Schemas: schemas()})
	if err != nil {
		f.Fatal(err)
	}
	s, err := intent.New(intent.Config{Deriver: d})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("cust-1", "180,00", "529.982.247-25", "", "inv-1")
	f.Add(" c ", "R$ 1.800,00", "ana@example.com", "email", "inv 2")
	f.Add("c", "0.1", "+55 11 98765-4321", "phone", "x")
	f.Add("c", "1e2", "123e4567-e89b-12d3-a456-426614174000", "evp", "é")
	f.Fuzz(func(t *testing.T, cust, amount, key, typ, ref string) {
		fields := map[string]any{"customer_id": cust, "amount": amount, "pix_key": key, "pix_key_type": typ}
		x, err := s.Extract(intent.FreezeParams{Tenant: "t", Ref: ref, Action: action, Fields: fields})
		if err != nil || x.Err != nil {
			return
		}
		again := map[string]any{}
		for _, v := range x.Result.Payload {
			again[v.Name] = v.Value
		}
		// The payload holds cents; an extraction holds reais.
		cents := again["amount"].(string)
		for len(cents) < 3 {
			cents = "0" + cents
		}
		again["amount"] = cents[:len(cents)-2] + "." + cents[len(cents)-2:]
		y, err := s.Extract(intent.FreezeParams{Tenant: "t", Ref: ref, Action: action, Fields: again})
		if err != nil || y.Err != nil {
			t.Fatalf("normalized payload rejected: %v %v", err, y.Err)
		}
		if y.Result.Key != x.Result.Key {
			t.Fatalf("not a fixed point:\n%s\n%s", x.Result.Canonical, y.Result.Canonical)
		}
	})
}

// A completed money action is not amended: the new key would be charged
// again. The refusal is typed and says what to do; an operator's override
// needs who, and the revision records it.
func TestAmendCompletedMoney(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t, nil)
	s := newStore(t)
	ctx := context.Background()
	first := freeze(t, s, pool, "t1", "inv-c", equivalent(0, testutil.CPF(78)))
	setAction(t, pool, "t1", first.Intent.Key, "completed")
	f := equivalent(0, testutil.CPF(78))
	f["amount"] = "190,00"
	p := intent.AmendParams{Tenant: "t1", Ref: "inv-c", Action: action, Fields: f, Reason: "customer says 190"}
	_, err := s.Amend(ctx, pool, p)
	var ce *intent.CompletedError
	if !errors.Is(err, intent.ErrCompleted) || !errors.As(err, &ce) || ce.Key != first.Intent.Key {
		t.Fatalf("amend of a completed charge: %v", err)
	}
	p.OverrideCompleted = true
	if _, err := s.Amend(ctx, pool, p); !errors.Is(err, intent.ErrInvalid) {
		t.Fatalf("override without who: %v", err)
	}
	if in, err := intent.Get(ctx, pool, "t1", "inv-c", action); err != nil || in.Key != first.Intent.Key || in.Revision != 0 {
		t.Fatalf("refused amendments changed the intent: %+v %v", in, err)
	}
	p.By = "op-9"
	res, err := s.Amend(ctx, pool, p)
	if err != nil {
		t.Fatal(err)
	}
	revs, err := intent.Revisions(ctx, pool, "t1", "inv-c", action)
	if err != nil || len(revs) != 1 || revs[0].Overrode != "completed" || revs[0].AmendedBy != "op-9" || revs[0].NewKey != res.Intent.Key {
		t.Fatalf("revisions %+v %v", revs, err)
	}
	// The completed action under the old key stays as it was (no
	// tombstone over it).
	var st string
	if err := pool.QueryRow(ctx, `SELECT status FROM actions WHERE tenant_id = 't1' AND idem_key = $1`, first.Intent.Key).Scan(&st); err != nil || st != "completed" {
		t.Fatalf("old action %q %v", st, err)
	}
}
