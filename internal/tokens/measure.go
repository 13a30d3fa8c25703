package tokens

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/govalues/decimal"
)

// Price is what one model costs per thousand tokens.
type Price struct {
	InputPer1K  decimal.Decimal `json:"input_per_1k"`
	OutputPer1K decimal.Decimal `json:"output_per_1k"`
}

// Cost prices a token count.
func (p Price) Cost(prompt, completion int64) (decimal.Decimal, error) {
	a, err := perThousand(prompt, p.InputPer1K)
	if err != nil {
		return a, err
	}
	b, err := perThousand(completion, p.OutputPer1K)
	if err != nil {
		return b, err
	}
	return a.Add(b)
}

// MeasureParams select the ledger rows to measure.
type MeasureParams struct {
	Since, Until time.Time // [Since, Until)
	Tenant       string    // "" for all tenants
	Prices       map[string]Price
}

// Usage is a count of calls and their tokens.
type Usage struct {
	Calls            int64 `json:"calls"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

func (u *Usage) add(v Usage) {
	u.Calls += v.Calls
	u.PromptTokens += v.PromptTokens
	u.CompletionTokens += v.CompletionTokens
}

// TenantReport is one tenant's figures (or the total, Tenant "*").
type TenantReport struct {
	Tenant        string          `json:"tenant"`
	Made          Usage           `json:"made"`      // every call actually made
	Duplicate     Usage           `json:"duplicate"` // made for a (message, step) already answered
	Avoided       Usage           `json:"avoided"`   // replayed by the journal instead
	Cost          decimal.Decimal `json:"cost"`
	DuplicateCost decimal.Decimal `json:"duplicate_cost"`
	AvoidedCost   decimal.Decimal `json:"avoided_cost"`
	// Per month: the window's figures scaled to 30 days.
	DuplicateCostPerMonth decimal.Decimal `json:"duplicate_cost_per_month"`
	AvoidedCostPerMonth   decimal.Decimal `json:"avoided_cost_per_month"`
}

// DayPoint is duplicate spend on one day (UTC), for the chart.
type DayPoint struct {
	Day  time.Time       `json:"day"`
	Cost decimal.Decimal `json:"duplicate_cost"`
}

// Report is a whole measurement.
type Report struct {
	Since   time.Time      `json:"since"`
	Until   time.Time      `json:"until"`
	Tenants []TenantReport `json:"tenants"`
	Total   TenantReport   `json:"total"`
	Days    []DayPoint     `json:"days"`
}

// ErrNoPrice names a model found in the ledger without a configured price.
var ErrNoPrice = errors.New("no price configured")

// Row is one (tenant, model, UTC day) of the model ledger.
type Row struct {
	Tenant, Model string
	Day           time.Time // midnight UTC
	Made          Usage     // every call actually made
	Duplicate     Usage     // made for a (message, step) already answered in the window
	Avoided       Usage     // replayed by the journal instead
}

// Ledger reads the model ledger; agent.Ledger is retrysafe's (the
// model_calls table, whose owner holds the SQL).
type Ledger interface {
	// Usage sums the rows written in [since, until) of tenant ("" for
	// all) per tenant, model and UTC day, ordered so. A real call is a
	// duplicate when an earlier real call in the window answered its
	// (tenant, message, step).
	Usage(ctx context.Context, since, until time.Time, tenant string) ([]Row, error)
}

// Measure reads the ledger and prices it.
func Measure(ctx context.Context, l Ledger, p MeasureParams) (*Report, error) {
	if !p.Until.After(p.Since) {
		return nil, errors.New("measure: --until must be after --since")
	}
	rows, err := l.Usage(ctx, p.Since, p.Until, p.Tenant)
	if err != nil {
		return nil, fmt.Errorf("measure: %w", err)
	}
	byTenant := map[string]*TenantReport{}
	byDay := map[time.Time]decimal.Decimal{}
	total := &TenantReport{Tenant: "*"}
	var missing []string
	for _, row := range rows {
		tenant, model, day := row.Tenant, row.Model, row.Day
		made, dup, avoided := row.Made, row.Duplicate, row.Avoided
		price, ok := p.Prices[model]
		if !ok {
			missing = append(missing, model)
			continue
		}
		tr := byTenant[tenant]
		if tr == nil {
			tr = &TenantReport{Tenant: tenant}
			byTenant[tenant] = tr
		}
		cost, err1 := price.Cost(made.PromptTokens, made.CompletionTokens)
		dupCost, err2 := price.Cost(dup.PromptTokens, dup.CompletionTokens)
		avCost, err3 := price.Cost(avoided.PromptTokens, avoided.CompletionTokens)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("measure: %w", err)
		}
		for _, r := range []*TenantReport{tr, total} {
			r.Made.add(made)
			r.Duplicate.add(dup)
			r.Avoided.add(avoided)
			r.Cost = mustAdd(r.Cost, cost)
			r.DuplicateCost = mustAdd(r.DuplicateCost, dupCost)
			r.AvoidedCost = mustAdd(r.AvoidedCost, avCost)
		}
		byDay[day.UTC()] = mustAdd(byDay[day.UTC()], dupCost)
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("%w for %s (pass --price MODEL=IN/OUT or a --prices file)", ErrNoPrice, strings.Join(dedupe(missing), ", "))
	}
	rep := &Report{Since: p.Since, Until: p.Until, Total: *total}
	scale, err := monthScale(p.Since, p.Until)
	if err != nil {
		return nil, err
	}
	for _, tr := range byTenant {
		rep.Tenants = append(rep.Tenants, *tr)
	}
	sort.Slice(rep.Tenants, func(i, j int) bool { return rep.Tenants[i].Tenant < rep.Tenants[j].Tenant })
	for i := range rep.Tenants {
		extrapolate(&rep.Tenants[i], scale)
	}
	extrapolate(&rep.Total, scale)
	for day, c := range byDay {
		rep.Days = append(rep.Days, DayPoint{Day: day, Cost: c})
	}
	sort.Slice(rep.Days, func(i, j int) bool { return rep.Days[i].Day.Before(rep.Days[j].Day) })
	return rep, nil
}

// monthScale is 30 days divided by the window's length.
func monthScale(since, until time.Time) (decimal.Decimal, error) {
	window, err := decimal.New(int64(until.Sub(since)/time.Second), 0)
	if err != nil {
		return window, err
	}
	month := decimal.MustNew(30*24*3600, 0)
	return month.Quo(window)
}

func extrapolate(r *TenantReport, scale decimal.Decimal) {
	r.DuplicateCostPerMonth, _ = r.DuplicateCost.Mul(scale)
	r.AvoidedCostPerMonth, _ = r.AvoidedCost.Mul(scale)
}

func mustAdd(a, b decimal.Decimal) decimal.Decimal {
	s, err := a.Add(b)
	if err != nil {
		panic(fmt.Sprintf("tokens: decimal overflow adding %s and %s", a, b))
	}
	return s
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
