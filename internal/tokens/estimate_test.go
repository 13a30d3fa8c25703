package tokens

import (
	"testing"

	"github.com/govalues/decimal"
)

// The defaults, checked against the figures computed by hand:
// cost per call = 8 × 0.015 + 0.6 × 0.075 = 0.165; 3 % of 30,000 = 900
// repeats; 900 × 0.165 = 148.50 a month, 1,782.00 a year; 148.50 / 36,000 =
// 0.4125 %; 148.50 / 1.20 = 123.75, so 124 conversations.
func TestEstimateDefaults(t *testing.T) {
	t.Parallel()
	e, err := Compute(DefaultEstimateInput())
	if err != nil {
		t.Fatal(err)
	}
	pt := Locales["pt-BR"]
	checks := map[string][2]string{
		"cost per call": {pt.Money("BRL", e.CostPerCall), "R$ 0,17"},
		"revenue":       {pt.Money("BRL", e.RevenuePerMonth), "R$ 36.000,00"},
		"repeats":       {pt.Number(e.RepeatedPerMonth, 0), "900"},
		"burned/month":  {pt.Money("BRL", e.BurnedPerMonth), "R$ 148,50"},
		"burned/year":   {pt.Money("BRL", e.BurnedPerYear), "R$ 1.782,00"},
		"share":         {pt.Percent(e.SharePercent), "0,41 %"},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", name, c[0], c[1])
		}
	}
	if e.CostPerCall.String() != "0.165" {
		t.Errorf("exact cost per call = %s", e.CostPerCall)
	}
	if e.BreakEvenConversions != 124 {
		t.Errorf("break-even = %d, want 124", e.BreakEvenConversions)
	}
}

// Other inputs, computed by hand.
func TestEstimateOtherInputs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in                 EstimateInput
		month, year, share string
		breakEven          int64
	}{
		// 1,000 conv; 1,000 in at 0.01 + 1,000 out at 0.03 = 0.04/call;
		// 10 % = 100 repeats = 4.00/month, 48.00/year; revenue 2,000 → 0.20 %;
		// 4 / 2 = 2 conversations.
		{EstimateInput{1000, 1000, 1000, d("0.01"), d("0.03"), d("2"), d("10")}, "4.00", "48.00", "0.20", 2},
		// 0 % repeats burns nothing and needs no conversation.
		{EstimateInput{30000, 8000, 600, d("0.015"), d("0.075"), d("1.20"), d("0")}, "0.00", "0.00", "0.00", 0},
		// 7 conv, 333 in at 0.003, 0 out; 1/3 rounding must stay exact:
		// cost = 0.000999; 50 % = 3.5 repeats; 0.0034965/month; revenue 7;
		// share 0.04995 % → 0.05; break-even ceil(0.0034965/1) = 1.
		{EstimateInput{7, 333, 0, d("0.003"), d("0"), d("1"), d("50")}, "0.00", "0.04", "0.05", 1},
	}
	en := Locales["en-US"]
	for i, c := range cases {
		e, err := Compute(c.in)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if got := en.Number(e.BurnedPerMonth, 2); got != c.month {
			t.Errorf("case %d month = %s, want %s", i, got, c.month)
		}
		if got := en.Number(e.BurnedPerYear, 2); got != c.year {
			t.Errorf("case %d year = %s, want %s", i, got, c.year)
		}
		if got := en.Number(e.SharePercent, 2); got != c.share {
			t.Errorf("case %d share = %s, want %s", i, got, c.share)
		}
		if e.BreakEvenConversions != c.breakEven {
			t.Errorf("case %d break-even = %d, want %d", i, e.BreakEvenConversions, c.breakEven)
		}
	}
}

func TestEstimateRejectsNonsense(t *testing.T) {
	t.Parallel()
	bad := DefaultEstimateInput()
	bad.Conversations = 0
	bad.RepeatPercent = d("101")
	bad.Ticket = d("0")
	if _, err := Compute(bad); err == nil {
		t.Fatal("accepted zero conversations, 101 % and a zero ticket")
	}
}

func TestLocaleFormatting(t *testing.T) {
	t.Parallel()
	pt, en := Locales["pt-BR"], Locales["en-US"]
	if got := pt.Money("BRL", d("1234567.895")); got != "R$ 1.234.567,90" {
		t.Errorf("pt money = %s", got)
	}
	if got := en.Money("USD", d("-0.005")); got != "US$ -0.01" {
		t.Errorf("en money = %s", got)
	}
	if got := en.Percent(d("12.345")); got != "12.35%" {
		t.Errorf("en percent = %s", got)
	}
	if got := pt.Int(1000000); got != "1.000.000" {
		t.Errorf("pt int = %s", got)
	}
}

func d(s string) decimal.Decimal { return decimal.MustParse(s) }
