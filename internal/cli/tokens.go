package cli

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/govalues/decimal"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/internal/tokens"
)

func init() {
	Register(&Command{Name: "tokens", Summary: "estimate or measure what duplicate model calls cost", Run: runTokens})
}

func runTokens(ctx context.Context, e *Env, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "estimate":
			return runTokensEstimate(e, args[1:])
		case "measure":
			return runTokensMeasure(ctx, e, args[1:])
		}
	}
	w := e.Stderr
	if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "-help") {
		w = e.Stdout
	}
	fmt.Fprint(w, `Usage: retrysafe tokens <estimate|measure> [flags]

A duplicated Pix can be refunded; a duplicated model call cannot.

  estimate   the cost of repeated model calls from business inputs
  measure    the cost measured from the model_calls ledger

retrysafe tokens <subcommand> --help for its flags.
`)
	if w == e.Stdout {
		return nil
	}
	return ErrUsage
}

// decimalFlag parses exact decimals for money flags (never float64).
type decimalFlag struct{ d *decimal.Decimal }

func (f decimalFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f decimalFlag) Set(s string) error {
	v, err := decimal.Parse(strings.TrimSuffix(strings.TrimSpace(s), "%"))
	if err != nil {
		return fmt.Errorf("not a decimal number: %q", s)
	}
	*f.d = v
	return nil
}

type outputFlags struct {
	format   string
	locale   string
	currency string
	chart    string
}

func (o *outputFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&o.format, "format", "table", "output format: table, json or csv")
	fs.StringVar(&o.locale, "locale", "pt-BR", "number formatting of the table: pt-BR or en-US")
	fs.StringVar(&o.currency, "currency", "BRL", "currency code of the prices (BRL, USD, EUR, ...)")
	fs.StringVar(&o.chart, "chart", "", "also draw a chart to this .svg file")
}

func (o *outputFlags) validate() (tokens.Locale, error) {
	switch o.format {
	case "table", "json", "csv":
	default:
		return tokens.Locale{}, fmt.Errorf("--format %q: want table, json or csv", o.format)
	}
	if o.chart != "" && !strings.HasSuffix(strings.ToLower(o.chart), ".svg") {
		return tokens.Locale{}, fmt.Errorf("--chart %q: only .svg charts are drawn", o.chart)
	}
	if o.currency == "" {
		return tokens.Locale{}, fmt.Errorf("--currency must not be empty")
	}
	return tokens.ParseLocale(o.locale)
}

func runTokensEstimate(e *Env, args []string) error {
	in := tokens.DefaultEstimateInput()
	fs := NewFlagSet(e, "tokens estimate", "tokens estimate [flags]",
		`Estimates the money burned by conversations that repeat their closing model
call (a redelivery that calls the model again). With no flags it
estimates the month the defaults below describe. All arithmetic is exact
decimal.`)
	fs.Int64Var(&in.Conversations, "conversations", in.Conversations, "resolved conversations per month")
	fs.Int64Var(&in.InputTokens, "input-tokens", in.InputTokens, "input tokens of the closing call")
	fs.Int64Var(&in.OutputTokens, "output-tokens", in.OutputTokens, "output tokens of the closing call")
	fs.Var(decimalFlag{&in.InputPricePer1K}, "input-price", "price per thousand input tokens, exact (`decimal`)")
	fs.Var(decimalFlag{&in.OutputPricePer1K}, "output-price", "price per thousand output tokens, exact (`decimal`)")
	fs.Var(decimalFlag{&in.Ticket}, "ticket", "revenue per resolved conversation, exact (`decimal`)")
	fs.Var(decimalFlag{&in.RepeatPercent}, "repeat-rate", "`percent` of conversations that repeat the call")
	var out outputFlags
	out.register(fs)
	if err := ParseNoArgs(e, fs, args); err != nil {
		return err
	}
	loc, err := out.validate()
	if err := errors.Join(err, in.Validate()); err != nil {
		return usageErr(err)
	}
	est, err := tokens.Compute(in)
	if err != nil {
		return err
	}
	cur := out.currency
	rows := [][3]string{ // metric, machine value, human value
		{"cost_per_call", est.CostPerCall.String(), loc.MoneyExact(cur, est.CostPerCall)},
		{"revenue_per_month", est.RevenuePerMonth.String(), loc.Money(cur, est.RevenuePerMonth)},
		{"conversations_repeating_per_month", est.RepeatedPerMonth.String(), loc.Number(est.RepeatedPerMonth, 0)},
		{"burned_per_month", est.BurnedPerMonth.String(), loc.Money(cur, est.BurnedPerMonth)},
		{"burned_per_year", est.BurnedPerYear.String(), loc.Money(cur, est.BurnedPerYear)},
		{"share_of_revenue_percent", est.SharePercent.String(), loc.Percent(est.SharePercent)},
		{"break_even_conversations", fmt.Sprint(est.BreakEvenConversions), loc.Int(est.BreakEvenConversions)},
	}
	labels := map[string]string{
		"cost_per_call":                     "cost per call",
		"revenue_per_month":                 "revenue per month",
		"conversations_repeating_per_month": "conversations that repeat the call, per month",
		"burned_per_month":                  "burned in duplicates per month",
		"burned_per_year":                   "burned in duplicates per year",
		"share_of_revenue_percent":          "share of revenue",
		"break_even_conversations":          "resolved conversations to break even",
	}
	if err := writeRows(e.Stdout, out.format, cur, rows, labels); err != nil {
		return err
	}
	if out.chart != "" {
		maxRate := decimal.MustNew(10, 0)
		if twice, err := in.RepeatPercent.Mul(decimal.MustNew(2, 0)); err == nil && twice.Cmp(maxRate) > 0 {
			maxRate = twice
		}
		curve, err := tokens.Curve(in, maxRate, 20)
		if err != nil {
			return err
		}
		s := tokens.Series{Title: "Money burned in duplicate model calls per month", XLabel: "conversations that repeat the call (%)", YLabel: "per month (" + cur + ")"}
		for _, p := range curve {
			s.Labels = append(s.Labels, loc.Number(p[0], 1))
			s.Values = append(s.Values, p[1])
		}
		if err := writeChart(out.chart, s, loc); err != nil {
			return err
		}
		fmt.Fprintf(e.Stderr, "chart written to %s\n", out.chart)
	}
	return nil
}

func writeRows(w io.Writer, format, currency string, rows [][3]string, labels map[string]string) error {
	switch format {
	case "json":
		m := map[string]string{"currency": currency}
		for _, r := range rows {
			m[r[0]] = r[1]
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(m)
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write([]string{"metric", "value", "currency"}) //nolint:errcheck // Flush reports it
		for _, r := range rows {
			cw.Write([]string{r[0], r[1], currency}) //nolint:errcheck
		}
		cw.Flush()
		return cw.Error()
	}
	width := 0
	for _, r := range rows {
		width = max(width, len(r[2]))
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%-48s %*s\n", labels[r[0]], width, r[2])
	}
	return nil
}

func writeChart(path string, s tokens.Series, loc tokens.Locale) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := tokens.WriteSVG(f, s, loc); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// priceFlags collects --price MODEL=IN/OUT, repeatable.
type priceFlags map[string]tokens.Price

// readFile adds the prices of the --prices JSON file, when named, for the
// models --price left out.
func (p priceFlags) readFile(name string) error {
	if name == "" {
		return nil
	}
	raw, err := os.ReadFile(name)
	if err != nil {
		return fmt.Errorf("--prices: %w", err)
	}
	var fromFile map[string]tokens.Price
	if err := json.Unmarshal(raw, &fromFile); err != nil {
		return fmt.Errorf("--prices %s: %w", name, err)
	}
	for m, price := range fromFile {
		if _, set := p[m]; !set {
			p[m] = price
		}
	}
	return nil
}

func (p priceFlags) String() string { return "" }

func (p priceFlags) Set(s string) error {
	model, rest, ok := strings.Cut(s, "=")
	in, out, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || model == "" {
		return fmt.Errorf("want MODEL=INPUT_PER_1K/OUTPUT_PER_1K, got %q", s)
	}
	pi, err1 := decimal.Parse(in)
	po, err2 := decimal.Parse(out)
	if err1 != nil || err2 != nil || pi.IsNeg() || po.IsNeg() {
		return fmt.Errorf("prices in %q must be non-negative decimals", s)
	}
	p[model] = tokens.Price{InputPer1K: pi, OutputPer1K: po}
	return nil
}

func runTokensMeasure(ctx context.Context, e *Env, args []string) error {
	fs := NewFlagSet(e, "tokens measure", "tokens measure --since DATE --until DATE [--tenant T] --price MODEL=IN/OUT ... [flags]",
		`Measures, from the model_calls ledger, the model calls made in [since, until)
per tenant and in total: calls, tokens, cost; calls that repeated a
(message, step) already answered inside the window, their tokens and cost;
calls the journal avoided and what they would have cost; and both
extrapolated to 30 days. Dates are RFC 3339 or YYYY-MM-DD (UTC).
Prices per thousand tokens come from --price (repeatable) or a --prices JSON
file {"MODEL":{"input_per_1k":"0.015","output_per_1k":"0.075"}}.`)
	var db DBFlags
	db.Register(fs, e)
	since := fs.String("since", "", "start of the window, inclusive (default: 30 days before --until)")
	until := fs.String("until", "", "end of the window, exclusive (default: now)")
	tenant := fs.String("tenant", "", "only this tenant")
	prices := priceFlags{}
	fs.Var(prices, "price", "a model's prices per thousand input and output tokens, as `MODEL=IN/OUT` (repeatable)")
	pricesFile := fs.String("prices", "", "JSON file of prices per model")
	var out outputFlags
	out.register(fs)
	if err := ParseNoArgs(e, fs, args); err != nil {
		return err
	}
	loc, locErr := out.validate()
	s, u, whenErr := measureWindow(*since, *until)
	if err := errors.Join(locErr, whenErr, prices.readFile(*pricesFile)); err != nil {
		return usageErr(err)
	}
	d, err := db.openExisting(ctx, e, "tokens measure (it reads an existing ledger)")
	if err != nil {
		return err
	}
	defer d.Close()
	rep, err := tokens.Measure(ctx, agent.Ledger(d.Pool), tokens.MeasureParams{Since: s, Until: u, Tenant: *tenant, Prices: prices})
	if err != nil {
		return err
	}
	if err := writeMeasure(e.Stdout, out.format, out.currency, loc, rep); err != nil {
		return err
	}
	if out.chart != "" {
		series := tokens.Series{Title: "Duplicate model spend per day", XLabel: "day (UTC)", YLabel: "duplicate spend (" + out.currency + ")", Bars: true}
		for _, p := range rep.Days {
			series.Labels = append(series.Labels, p.Day.Format("01-02"))
			series.Values = append(series.Values, p.Cost)
		}
		if err := writeChart(out.chart, series, loc); err != nil {
			return err
		}
		fmt.Fprintf(e.Stderr, "chart written to %s\n", out.chart)
	}
	return nil
}

// measureWindow is [since, until): until defaults to now, since to 30 days
// before until.
func measureWindow(since, until string) (s, u time.Time, err error) {
	u = time.Now().UTC()
	if until != "" {
		if u, err = parseWhen(until); err != nil {
			return s, u, fmt.Errorf("--until: %w", err)
		}
	}
	s = u.Add(-30 * 24 * time.Hour)
	if since != "" {
		if s, err = parseWhen(since); err != nil {
			return s, u, fmt.Errorf("--since: %w", err)
		}
	}
	return s, u, nil
}

func parseWhen(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	t, err := time.Parse("2006-01-02", s)
	if err != nil {
		return t, fmt.Errorf("%q is neither RFC 3339 nor YYYY-MM-DD", s)
	}
	return t, nil
}

func writeMeasure(w io.Writer, format, currency string, loc tokens.Locale, rep *tokens.Report) error {
	all := append(append([]tokens.TenantReport(nil), rep.Tenants...), rep.Total)
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Currency string `json:"currency"`
			*tokens.Report
		}{currency, rep})
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write([]string{"tenant", "calls", "prompt_tokens", "completion_tokens", "cost", "duplicate_calls", "duplicate_tokens", "duplicate_cost", "avoided_calls", "avoided_cost", "duplicate_cost_per_month", "avoided_cost_per_month", "currency"}) //nolint:errcheck
		for _, r := range all {
			cw.Write([]string{r.Tenant, fmt.Sprint(r.Made.Calls), fmt.Sprint(r.Made.PromptTokens), fmt.Sprint(r.Made.CompletionTokens), r.Cost.String(), //nolint:errcheck
				fmt.Sprint(r.Duplicate.Calls), fmt.Sprint(r.Duplicate.PromptTokens + r.Duplicate.CompletionTokens), r.DuplicateCost.String(),
				fmt.Sprint(r.Avoided.Calls), r.AvoidedCost.String(), r.DuplicateCostPerMonth.String(), r.AvoidedCostPerMonth.String(), currency})
		}
		cw.Flush()
		return cw.Error()
	}
	fmt.Fprintf(w, "model calls from %s to %s\n\n", rep.Since.Format(time.RFC3339), rep.Until.Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tenant\tcalls\ttokens\tcost\tdup calls\tdup tokens\tdup cost\tavoided\tavoided cost\tdup/month\tavoided/month\t")
	for _, r := range all {
		name := r.Tenant
		if name == "*" {
			name = "TOTAL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name,
			loc.Int(r.Made.Calls), loc.Int(r.Made.PromptTokens+r.Made.CompletionTokens), loc.Money(currency, r.Cost),
			loc.Int(r.Duplicate.Calls), loc.Int(r.Duplicate.PromptTokens+r.Duplicate.CompletionTokens), loc.Money(currency, r.DuplicateCost),
			loc.Int(r.Avoided.Calls), loc.Money(currency, r.AvoidedCost),
			loc.Money(currency, r.DuplicateCostPerMonth), loc.Money(currency, r.AvoidedCostPerMonth))
	}
	return tw.Flush()
}
