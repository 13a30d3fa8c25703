package agent_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/govalues/decimal"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/tokens"
)

type ledgerRow struct {
	tenant, msg string
	step        int
	model       string
	in, out     int
	replayed    bool
	at          time.Time
}

func insertCalls(t testing.TB, pool *pgxpool.Pool, calls []ledgerRow) {
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

// A ledger with known calls, duplicates and journal hits, summed by
// agent.Ledger: the rows internal/tokens' TestMeasurePricesUsage prices.
func TestLedgerUsageOfKnownCalls(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t, nil)
	day1 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	day2 := day1.Add(24 * time.Hour)
	insertCalls(t, pool, []ledgerRow{
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
	d1, d2 := day1.Truncate(24*time.Hour), day2.Truncate(24*time.Hour)
	ctx := context.Background()
	got, err := agent.Ledger(pool).Usage(ctx, d1, d1.Add(30*24*time.Hour), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []tokens.Row{
		{Tenant: "a", Model: "big", Day: d1, Made: tokens.Usage{Calls: 1, PromptTokens: 1000, CompletionTokens: 1000}},
		{Tenant: "a", Model: "big", Day: d2, Avoided: tokens.Usage{Calls: 1, PromptTokens: 1000, CompletionTokens: 1000}},
		{Tenant: "a", Model: "small", Day: d1, Made: tokens.Usage{Calls: 3, PromptTokens: 4000, CompletionTokens: 400},
			Duplicate: tokens.Usage{Calls: 1, PromptTokens: 1000, CompletionTokens: 100}},
		{Tenant: "a", Model: "small", Day: d2, Made: tokens.Usage{Calls: 1, PromptTokens: 1000, CompletionTokens: 100},
			Duplicate: tokens.Usage{Calls: 1, PromptTokens: 1000, CompletionTokens: 100}},
		{Tenant: "b", Model: "big", Day: d1, Made: tokens.Usage{Calls: 2, PromptTokens: 1000, CompletionTokens: 1000},
			Duplicate: tokens.Usage{Calls: 1, PromptTokens: 500, CompletionTokens: 500}},
	}
	if !slices.Equal(got, want) {
		t.Errorf("usage:\n got %+v\nwant %+v", got, want)
	}

	// One tenant and one day: on day 2 alone, a's m1 step 0 has a single
	// real call in the window, so no duplicate.
	got, err = agent.Ledger(pool).Usage(ctx, d2, d2.Add(24*time.Hour), "a")
	if err != nil {
		t.Fatal(err)
	}
	want = []tokens.Row{
		{Tenant: "a", Model: "big", Day: d2, Avoided: tokens.Usage{Calls: 1, PromptTokens: 1000, CompletionTokens: 1000}},
		{Tenant: "a", Model: "small", Day: d2, Made: tokens.Usage{Calls: 1, PromptTokens: 1000, CompletionTokens: 100}},
	}
	if !slices.Equal(got, want) {
		t.Errorf("day-2 usage of a:\n got %+v\nwant %+v", got, want)
	}
}

// BenchmarkLedgerMeasure1M measures a month of 1,000,000 ledger rows (20 % of
// them duplicates, 10 % journal hits) for all tenants.
func BenchmarkLedgerMeasure1M(b *testing.B) {
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
	p := tokens.MeasureParams{Since: start, Until: start.Add(30 * 24 * time.Hour),
		Prices: map[string]tokens.Price{"gpt-4o-mini": {InputPer1K: d("0.015"), OutputPer1K: d("0.075")}}}
	b.ResetTimer()
	for b.Loop() {
		rep, err := tokens.Measure(ctx, agent.Ledger(pool), p)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Total.Made.Calls+rep.Total.Avoided.Calls != 1000000 {
			b.Fatalf("counted %d rows", rep.Total.Made.Calls+rep.Total.Avoided.Calls)
		}
	}
}

func d(s string) decimal.Decimal { return decimal.MustParse(s) }
