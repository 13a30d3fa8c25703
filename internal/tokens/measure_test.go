package tokens

import (
	"context"
	"errors"
	"testing"
	"time"
)

// rowsLedger is a Ledger of fixed rows (agent.Ledger's are tested against
// PostgreSQL in package agent).
type rowsLedger []Row

func (l rowsLedger) Usage(_ context.Context, since, until time.Time, tenant string) ([]Row, error) {
	var out []Row
	for _, r := range l {
		if !r.Day.Before(since) && r.Day.Before(until) && (tenant == "" || r.Tenant == tenant) {
			out = append(out, r)
		}
	}
	return out, nil
}

// The ledger of agent's TestLedgerUsageOfKnownCalls, summed by hand:
// Measure prices it, totals it per tenant and day and scales it to a
// month.
func TestMeasurePricesUsage(t *testing.T) {
	t.Parallel()
	day1 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	day2 := day1.Add(24 * time.Hour)
	ledger := rowsLedger{
		{Tenant: "a", Model: "big", Day: day1, Made: Usage{1, 1000, 1000}},
		{Tenant: "a", Model: "big", Day: day2, Avoided: Usage{1, 1000, 1000}},
		{Tenant: "a", Model: "small", Day: day1, Made: Usage{3, 4000, 400}, Duplicate: Usage{1, 1000, 100}},
		{Tenant: "a", Model: "small", Day: day2, Made: Usage{1, 1000, 100}, Duplicate: Usage{1, 1000, 100}},
		{Tenant: "b", Model: "big", Day: day1, Made: Usage{2, 1000, 1000}, Duplicate: Usage{1, 500, 500}},
	}
	prices := map[string]Price{
		"small": {InputPer1K: d("0.01"), OutputPer1K: d("0.10")},
		"big":   {InputPer1K: d("1"), OutputPer1K: d("2")},
	}
	rep, err := Measure(context.Background(), ledger, MeasureParams{Since: day1, Until: day1.Add(30 * 24 * time.Hour), Prices: prices})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tenants) != 2 {
		t.Fatalf("tenants = %+v", rep.Tenants)
	}
	a, b := rep.Tenants[0], rep.Tenants[1]
	if a.Made != (Usage{5, 6000, 1500}) || a.Duplicate != (Usage{2, 2000, 200}) || a.Avoided != (Usage{1, 1000, 1000}) || b.Duplicate != (Usage{1, 500, 500}) {
		t.Errorf("usage: a %+v, b %+v", a, b)
	}
	for name, c := range map[string][2]string{
		"a.cost":      {a.Cost.Trim(2).String(), "3.10"},
		"a.dupCost":   {a.DuplicateCost.Trim(2).String(), "0.04"},
		"a.avoided":   {a.AvoidedCost.Trim(0).String(), "3"},
		"b.dupCost":   {b.DuplicateCost.Trim(1).String(), "1.5"},
		"total.dup":   {rep.Total.DuplicateCost.Trim(2).String(), "1.54"},
		"total.month": {rep.Total.DuplicateCostPerMonth.Trim(2).String(), "1.54"},
	} {
		if c[0] != c[1] {
			t.Errorf("%s = %s, want %s", name, c[0], c[1])
		}
	}
	if len(rep.Days) != 2 || rep.Days[0].Cost.Trim(2).String() != "1.52" || rep.Days[1].Cost.Trim(2).String() != "0.02" {
		t.Errorf("days = %+v", rep.Days)
	}
	_, err = Measure(context.Background(), ledger, MeasureParams{Since: day1, Until: day2.Add(time.Hour), Prices: map[string]Price{"small": prices["small"]}})
	if !errors.Is(err, ErrNoPrice) {
		t.Fatalf("missing price: %v, want ErrNoPrice", err)
	}
}
