package tokens

import (
	"fmt"
	"strings"

	"github.com/govalues/decimal"
)

// Locale decides separators and how currency is written.
type Locale struct {
	Name      string
	Decimal   string
	Thousands string
	// PercentSpace puts a space before "%", as pt-BR typography does.
	PercentSpace bool
}

// Locales supported by --locale.
var Locales = map[string]Locale{
	"pt-BR": {Name: "pt-BR", Decimal: ",", Thousands: ".", PercentSpace: true},
	"en-US": {Name: "en-US", Decimal: ".", Thousands: ","},
}

var symbols = map[string]string{"BRL": "R$", "USD": "US$", "EUR": "€", "GBP": "£"}

// Money formats an amount rounded half-up to cents: "R$ 1.782,00".
func (l Locale) Money(currency string, d decimal.Decimal) string {
	sym := symbols[currency]
	if sym == "" {
		sym = currency
	}
	return sym + " " + l.Number(d, 2)
}

// MoneyExact formats an amount with at least two decimals and as many more
// (up to six) as it needs: a per-call cost of 0.165 is not 0.17.
func (l Locale) MoneyExact(currency string, d decimal.Decimal) string {
	scale := min(max(2, d.Trim(0).Scale()), 6)
	sym := symbols[currency]
	if sym == "" {
		sym = currency
	}
	return sym + " " + l.Number(d, scale)
}

// Number formats d with exactly scale decimals, rounding half away from
// zero (what people expect of a price; decimal's Round is half-even).
func (l Locale) Number(d decimal.Decimal, scale int) string {
	r := roundHalfUp(d, scale)
	s := r.Pad(scale).String()
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteString(l.Thousands)
		}
		b.WriteRune(c)
	}
	if scale > 0 {
		b.WriteString(l.Decimal)
		b.WriteString(frac)
	}
	return b.String()
}

// Percent formats a percentage with two decimals: "0,41 %".
func (l Locale) Percent(d decimal.Decimal) string {
	if l.PercentSpace {
		return l.Number(d, 2) + " %"
	}
	return l.Number(d, 2) + "%"
}

// Int formats a whole number with thousands separators.
func (l Locale) Int(n int64) string {
	return l.Number(decimal.MustNew(n, 0), 0)
}

func roundHalfUp(d decimal.Decimal, scale int) decimal.Decimal {
	if d.Scale() <= scale {
		return d
	}
	// Add (or subtract) half a unit of the last kept place, then truncate.
	half, err := decimal.New(5, scale+1)
	if err != nil {
		return d.Round(scale)
	}
	if d.IsNeg() {
		half = half.Neg()
	}
	s, err := d.Add(half)
	if err != nil {
		return d.Round(scale)
	}
	return s.Trunc(scale)
}

// ParseLocale accepts pt-BR / en-US (and pt, en, case-insensitive).
func ParseLocale(s string) (Locale, error) {
	switch strings.ToLower(strings.ReplaceAll(s, "_", "-")) {
	case "pt-br", "pt":
		return Locales["pt-BR"], nil
	case "en-us", "en":
		return Locales["en-US"], nil
	}
	return Locale{}, fmt.Errorf("unknown locale %q (want pt-BR or en-US)", s)
}
