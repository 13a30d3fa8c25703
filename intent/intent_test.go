package intent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var secret = []byte("0123456789abcdef0123456789abcdef")

const action = "pix.charge"

func schemas() []derive.Schema {
	return []derive.Schema{
		{Action: action, Version: 2, Fields: []derive.Field{
			{Name: "customer_id", Rule: derive.RuleText},
			{Name: "amount", Rule: derive.RuleMoney},
			{Name: "pix_key", Rule: derive.RulePixKey, TypeField: "pix_key_type"},
			{Name: "pix_key_type", Rule: derive.RulePixKeyType, Optional: true},
			{Name: "intent_ref", Rule: derive.RuleRef},
		}},
		// No reference field: two refs with equal fields share a key.
		{Action: "note.send", Version: 1, Fields: []derive.Field{{Name: "text", Rule: derive.RuleText}}},
	}
}

func newStore(t testing.TB) *intent.Store {
	t.Helper()
	d, err := derive.New(derive.Config{Secret: secret, Schemas: schemas()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := intent.New(intent.Config{Deriver: d, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Spellings of one extraction that derive must treat as equal.
func equivalent(i int, c string) map[string]any {
	amounts := []any{"180,00", "180.00", 180, json.Number("180"), "R$ 180,00", 180.0}
	keys := []string{c, testutil.PunctuatedCPF(c), " " + testutil.PunctuatedCPF(c) + " "}
	f := map[string]any{"customer_id": " cust-1 ", "amount": amounts[i%len(amounts)], "pix_key": keys[i%len(keys)]}
	if i%4 == 0 {
		f["pix_key_type"] = "CPF"
	}
	return f
}

func freeze(t testing.TB, s *intent.Store, db intent.DBTX, tenant, ref string, f map[string]any) *intent.FreezeResult {
	t.Helper()
	r, err := s.Freeze(context.Background(), db, intent.FreezeParams{Tenant: tenant, Ref: ref, Action: action, Fields: f, SourceRef: "msg-1"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestFreezeFirstWins(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t, nil)
	s := newStore(t)
	c := testutil.CPF(123456789)
	first := freeze(t, s, pool, "t1", "inv-1", equivalent(0, c))
	if !first.Created || len(first.Divergent) != 0 || first.Intent.Version != 2 || len(first.Intent.Key) != 64 {
		t.Fatalf("first: %+v", first)
	}
	if v, _ := first.Intent.Payload.Get("amount"); v != "18000" {
		t.Fatalf("amount %q", v)
	}
	if v, _ := first.Intent.Payload.Get("intent_ref"); v != "inv-1" {
		t.Fatalf("intent_ref %q", v)
	}
	for i := 1; i < 12; i++ {
		r := freeze(t, s, pool, "t1", "inv-1", equivalent(i, c))
		if r.Created || len(r.Divergent) != 0 || r.Intent.Key != first.Intent.Key {
			t.Fatalf("spelling %d: %+v", i, r)
		}
	}
	// A different amount: the frozen one wins, the divergence is named.
	f := equivalent(1, c)
	f["amount"] = "190,00"
	f["note"] = "model chatter"
	r := freeze(t, s, pool, "t1", "inv-1", f)
	if r.Created || r.Intent.Key != first.Intent.Key || fmt.Sprint(r.Divergent) != "[amount]" || fmt.Sprint(r.Ignored) != "[note]" {
		t.Fatalf("divergent: %+v", r)
	}
	if v, _ := r.Intent.Payload.Get("amount"); v != "18000" {
		t.Fatalf("frozen amount changed to %q", v)
	}
}

// The model never chooses the intent_ref: a value it sends is overridden.
func TestFreezeRefComesFromSystem(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t, nil)
	s := newStore(t)
	f := equivalent(0, testutil.CPF(1))
	f["intent_ref"] = "made-up-by-model"
	a := freeze(t, s, pool, "t1", "inv-9", f)
	delete(f, "intent_ref")
	b := freeze(t, s, pool, "t1", "inv-9", f)
	if v, _ := a.Intent.Payload.Get("intent_ref"); v != "inv-9" || a.Intent.Key != b.Intent.Key || len(b.Divergent) != 0 {
		t.Fatalf("a %+v b %+v", a.Intent, b)
	}
}

func TestFreezeBadExtraction(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t, nil)
	s := newStore(t)
	ctx := context.Background()
	bad := map[string]any{"customer_id": "c", "amount": "0.001", "pix_key": testutil.CPF(2)}
	_, err := s.Freeze(ctx, pool, intent.FreezeParams{Tenant: "t1", Ref: "inv-1", Action: action, Fields: bad})
	var fe *derive.FieldError
	if !errors.As(err, &fe) || fe.Field != "amount" || !errors.Is(err, derive.ErrInvalidField) {
		t.Fatalf("no frozen intent: err %v", err)
	}
	good := freeze(t, s, pool, "t1", "inv-1", equivalent(0, testutil.CPF(2)))
	// A redelivery whose extraction is garbage still finds the frozen intent.
	r, err := s.Freeze(ctx, pool, intent.FreezeParams{Tenant: "t1", Ref: "inv-1", Action: action, Fields: bad})
	if err != nil {
		t.Fatal(err)
	}
	if r.Intent.Key != good.Intent.Key || r.ExtractionErr == nil || fmt.Sprint(r.Divergent) != "[amount]" {
		t.Fatalf("got %+v", r)
	}
	// One with two broken fields names both.
	worse := map[string]any{"amount": "0.001", "pix_key": testutil.CPF(2)}
	r, err = s.Freeze(ctx, pool, intent.FreezeParams{Tenant: "t1", Ref: "inv-1", Action: action, Fields: worse})
	if err != nil || r.Intent.Key != good.Intent.Key || fmt.Sprint(r.Divergent) != "[amount customer_id]" {
		t.Fatalf("two broken fields: %+v, %v", r, err)
	}
	if _, err := s.Freeze(ctx, pool, intent.FreezeParams{Tenant: "t1", Ref: "inv-1", Action: "nope", Fields: bad}); !errors.Is(err, derive.ErrUnknownAction) {
		t.Fatalf("unknown action: %v", err)
	}
	if _, err := s.Freeze(ctx, pool, intent.FreezeParams{Tenant: "", Ref: "inv-1", Action: action}); !errors.Is(err, intent.ErrInvalid) {
		t.Fatalf("empty tenant: %v", err)
	}
}

func TestFreezeKeyInUse(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t, nil)
	s := newStore(t)
	ctx := context.Background()
	p := intent.FreezeParams{Tenant: "t1", Ref: "a", Action: "note.send", Fields: map[string]any{"text": "hi"}}
	if _, err := s.Freeze(ctx, pool, p); err != nil {
		t.Fatal(err)
	}
	p.Ref = "b"
	if _, err := s.Freeze(ctx, pool, p); !errors.Is(err, intent.ErrKeyInUse) {
		t.Fatalf("got %v", err)
	}
}

// Hundreds of concurrent freezes of one (tenant, ref, action) with a pool
// of 4: one creates, all see its key, and only the extractions that really
// differ report divergence.
func TestFreezeConcurrent(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t, &pgtest.Opts{MaxConns: 4})
	s := newStore(t)
	c := testutil.CPF(987654321)
	const n = 200
	results := make([]*intent.FreezeResult, n)
	errs := make([]error, n)
	testutil.TogetherPrepared(n, func(i int) func() {
		f := equivalent(i, c)
		if i%7 == 3 {
			f["amount"] = "199,90"
		}
		return func() {
			results[i], errs[i] = s.Freeze(context.Background(), pool, intent.FreezeParams{Tenant: "t1", Ref: "inv-c", Action: action, Fields: f})
		}
	})
	created := 0
	var key, frozenAmount string
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if r.Created {
			created++
		}
		if key == "" {
			key = r.Intent.Key
			frozenAmount, _ = r.Intent.Payload.Get("amount")
		}
		if r.Intent.Key != key {
			t.Fatalf("caller %d saw key %s, another saw %s", i, r.Intent.Key, key)
		}
		mine := "18000"
		if i%7 == 3 {
			mine = "19990"
		}
		wantDiv := mine != frozenAmount
		if (len(r.Divergent) > 0) != wantDiv || (wantDiv && fmt.Sprint(r.Divergent) != "[amount]") {
			t.Fatalf("caller %d (amount %s, frozen %s): divergent %v", i, mine, frozenAmount, r.Divergent)
		}
	}
	if created != 1 {
		t.Fatalf("%d callers created the intent", created)
	}
}
