package tokens

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type call struct {
	tenant, msg string
	step        int
	model       string
	in, out     int
	replayed    bool
	at          time.Time
}

func insertCalls(t testing.TB, pool *pgxpool.Pool, calls []call) {
	t.Helper()
	for _, c := range calls {
		_, err := pool.Exec(context.Background(), `INSERT INTO model_calls
			(tenant_id, source_ref, step, model, prompt_tokens, completion_tokens, replayed, created_at)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8)`, c.tenant, c.msg, c.step, c.model, c.in, c.out, c.replayed, c.at)
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A ledger with known calls, duplicates and journal hits, checked against
// figures computed by hand.
func TestMeasureKnownLedger(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t, nil)
	day1 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	day2 := day1.Add(24 * time.Hour)
	insertCalls(t, pool, []call{
		// tenant a, message m1: step 0 answered, then repeated twice
		// (redeliveries with the journal off), step 1 answered once.
		{"a", "m1", 0, "small", 1000, 100, false, day1},
		{"a", "m1", 0, "small", 1000, 100, false, day1.Add(time.Minute)},
		{"a", "m1", 0, "small", 1000, 100, false, day2},
		{"a", "m1", 1, "small", 2000, 200, false, day1.Add(time.Second)},
		// tenant a, message m2: answered once, then a journal hit.
		{"a", "m2", 0, "big", 1000, 1000, false, day1},
		{"a", "m2", 0, "big", 1000, 1000, true, day2},
		// tenant b: one call, one duplicate on the big model.
		{"b", "m1", 0, "big", 500, 500, false, day1},
		{"b", "m1", 0, "big", 500, 500, false, day1.Add(time.Hour)},
		// outside the window: ignored.
		{"a", "m9", 0, "small", 9999, 9999, false, day1.Add(-48 * time.Hour)},
	})
	prices := map[string]Price{
		"small": {InputPer1K: d("0.01"), OutputPer1K: d("0.10")}, // 1000/100 → 0.01 + 0.01 = 0.02
		"big":   {InputPer1K: d("1"), OutputPer1K: d("2")},       // 1000/1000 → 3; 500/500 → 1.5
	}
	rep, err := Measure(context.Background(), pool, MeasureParams{
		Since: day1.Truncate(24 * time.Hour), Until: day1.Truncate(24 * time.Hour).Add(30 * 24 * time.Hour), Prices: prices,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tenants) != 2 {
		t.Fatalf("tenants = %+v", rep.Tenants)
	}
	a, b := rep.Tenants[0], rep.Tenants[1]
	// a: made = 3×small(0.02) + small 2000/200 (0.04) + big(3) = 3.10
	//    dup = 2×small = 0.04; avoided = big 3.
	check := func(name string, got Usage, calls, in, out int64) {
		t.Helper()
		if got != (Usage{calls, in, out}) {
			t.Errorf("%s = %+v, want {%d %d %d}", name, got, calls, in, out)
		}
	}
	check("a.made", a.Made, 5, 6000, 1500)
	check("a.dup", a.Duplicate, 2, 2000, 200)
	check("a.avoided", a.Avoided, 1, 1000, 1000)
	check("b.made", b.Made, 2, 1000, 1000)
	check("b.dup", b.Duplicate, 1, 500, 500)
	for name, c := range map[string][2]string{
		"a.cost":      {a.Cost.Trim(2).String(), "3.10"},
		"a.dupCost":   {a.DuplicateCost.Trim(2).String(), "0.04"},
		"a.avoided":   {a.AvoidedCost.Trim(0).String(), "3"},
		"b.dupCost":   {b.DuplicateCost.Trim(1).String(), "1.5"},
		"total.dup":   {rep.Total.DuplicateCost.Trim(2).String(), "1.54"},
		"total.month": {rep.Total.DuplicateCostPerMonth.Trim(2).String(), "1.54"}, // the window is 30 days
	} {
		if c[0] != c[1] {
			t.Errorf("%s = %s, want %s", name, c[0], c[1])
		}
	}
	if len(rep.Days) != 2 || rep.Days[0].Cost.Trim(2).String() != "1.52" || rep.Days[1].Cost.Trim(2).String() != "0.02" {
		t.Errorf("days = %+v", rep.Days)
	}

	// One tenant only, and a one-day window (extrapolated ×30).
	rep, err = Measure(context.Background(), pool, MeasureParams{Since: day2.Truncate(24 * time.Hour), Until: day2.Truncate(24 * time.Hour).Add(24 * time.Hour), Tenant: "a", Prices: prices})
	if err != nil {
		t.Fatal(err)
	}
	// On day 2 alone, a's m1 step 0 has a single real call in the window.
	if rep.Total.Duplicate.Calls != 0 || rep.Total.Avoided.Calls != 1 || rep.Total.AvoidedCostPerMonth.Trim(0).String() != "90" {
		t.Errorf("day-2 report = %+v", rep.Total)
	}

	// A model without a price is an error, not a zero.
	_, err = Measure(context.Background(), pool, MeasureParams{Since: day1.Add(-time.Hour), Until: day2.Add(time.Hour), Prices: map[string]Price{"small": prices["small"]}})
	if err == nil {
		t.Fatal("missing price accepted")
	}
}

// BenchmarkMeasure1M measures a month of 1,000,000 ledger rows (20 % of
// them duplicates, 10 % journal hits) for all tenants.
func BenchmarkMeasure1M(b *testing.B) {
	pool, _ := pgtest.Schema(b, nil)
	ctx := context.Background()
	start := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	_, err := pool.Exec(ctx, `INSERT INTO model_calls
		(tenant_id, source_ref, step, model, prompt_tokens, completion_tokens, replayed, created_at)
		SELECT 'tenant-' || (i % 50), 'wamid.' || (i / 5 * 5 + CASE WHEN i % 5 = 4 THEN 0 ELSE i % 5 END), i % 3, 'gpt-4o-mini',
		       8000, 600, i % 10 = 7, $1::timestamptz + ((i - 1) * interval '2.592 seconds')
		FROM generate_series(1, 1000000) AS i`, start)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE model_calls`); err != nil {
		b.Fatal(err)
	}
	p := MeasureParams{Since: start, Until: start.Add(30 * 24 * time.Hour),
		Prices: map[string]Price{"gpt-4o-mini": {InputPer1K: d("0.015"), OutputPer1K: d("0.075")}}}
	b.ResetTimer()
	for b.Loop() {
		rep, err := Measure(ctx, pool, p)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Total.Made.Calls+rep.Total.Avoided.Calls != 1000000 {
			b.Fatalf("counted %d rows", rep.Total.Made.Calls+rep.Total.Avoided.Calls)
		}
	}
}
