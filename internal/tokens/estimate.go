package tokens

import (
	"errors"
	"fmt"

	"github.com/govalues/decimal"
)

// EstimateInput are the business inputs of the estimate.
type EstimateInput struct {
	Conversations    int64           // resolved conversations per month
	InputTokens      int64           // input tokens of the closing call
	OutputTokens     int64           // output tokens of the closing call
	InputPricePer1K  decimal.Decimal // price per thousand input tokens
	OutputPricePer1K decimal.Decimal // price per thousand output tokens
	Ticket           decimal.Decimal // revenue per resolved conversation
	RepeatPercent    decimal.Decimal // share of conversations that repeat the call, in percent
}

// DefaultEstimateInput is the documented default scenario.
func DefaultEstimateInput() EstimateInput {
	return EstimateInput{
		Conversations:    30000,
		InputTokens:      8000,
		OutputTokens:     600,
		InputPricePer1K:  decimal.MustParse("0.015"),
		OutputPricePer1K: decimal.MustParse("0.075"),
		Ticket:           decimal.MustParse("1.20"),
		RepeatPercent:    decimal.MustParse("3"),
	}
}

// Validate refuses inputs that make no sense rather than printing nonsense.
func (in EstimateInput) Validate() error {
	var errs []error
	if in.Conversations <= 0 {
		errs = append(errs, errors.New("conversations per month must be positive"))
	}
	if in.InputTokens < 0 || in.OutputTokens < 0 {
		errs = append(errs, errors.New("token counts cannot be negative"))
	}
	if in.InputPricePer1K.IsNeg() || in.OutputPricePer1K.IsNeg() {
		errs = append(errs, errors.New("prices cannot be negative"))
	}
	if !in.Ticket.IsPos() {
		errs = append(errs, errors.New("ticket per conversation must be positive"))
	}
	if in.RepeatPercent.IsNeg() || in.RepeatPercent.Cmp(decimal.Hundred) > 0 {
		errs = append(errs, errors.New("repeat rate must be between 0 and 100 percent"))
	}
	return errors.Join(errs...)
}

// Estimate is the computed table. Values are exact; round only to print.
type Estimate struct {
	Input                EstimateInput
	CostPerCall          decimal.Decimal
	RevenuePerMonth      decimal.Decimal
	RepeatedPerMonth     decimal.Decimal // conversations that repeat the call
	BurnedPerMonth       decimal.Decimal
	BurnedPerYear        decimal.Decimal
	SharePercent         decimal.Decimal // burned / revenue × 100
	BreakEvenConversions int64           // resolved conversations that pay for the burn
}

var thousand = decimal.MustNew(1000, 0)

// Compute runs the estimate.
func Compute(in EstimateInput) (Estimate, error) {
	if err := in.Validate(); err != nil {
		return Estimate{}, err
	}
	e := Estimate{Input: in}
	var err error
	step := func(f func() (decimal.Decimal, error), into *decimal.Decimal) {
		if err != nil {
			return
		}
		*into, err = f()
	}
	conv := decimal.MustNew(in.Conversations, 0)
	var inCost, outCost decimal.Decimal
	step(func() (decimal.Decimal, error) { return perThousand(in.InputTokens, in.InputPricePer1K) }, &inCost)
	step(func() (decimal.Decimal, error) { return perThousand(in.OutputTokens, in.OutputPricePer1K) }, &outCost)
	step(func() (decimal.Decimal, error) { return inCost.Add(outCost) }, &e.CostPerCall)
	step(func() (decimal.Decimal, error) { return conv.Mul(in.Ticket) }, &e.RevenuePerMonth)
	step(func() (decimal.Decimal, error) {
		p, err := conv.Mul(in.RepeatPercent)
		if err != nil {
			return p, err
		}
		return p.Quo(decimal.Hundred)
	}, &e.RepeatedPerMonth)
	step(func() (decimal.Decimal, error) { return e.RepeatedPerMonth.Mul(e.CostPerCall) }, &e.BurnedPerMonth)
	step(func() (decimal.Decimal, error) { return e.BurnedPerMonth.Mul(decimal.MustNew(12, 0)) }, &e.BurnedPerYear)
	step(func() (decimal.Decimal, error) {
		s, err := e.BurnedPerMonth.Mul(decimal.Hundred)
		if err != nil {
			return s, err
		}
		return s.Quo(e.RevenuePerMonth)
	}, &e.SharePercent)
	var be decimal.Decimal
	step(func() (decimal.Decimal, error) { return e.BurnedPerMonth.Quo(in.Ticket) }, &be)
	if err != nil {
		return Estimate{}, fmt.Errorf("estimate: %w", err)
	}
	whole, _, ok := be.Ceil(0).Int64(0)
	if !ok {
		return Estimate{}, errors.New("estimate: break-even out of range")
	}
	e.BreakEvenConversions = whole
	return e, nil
}

func perThousand(tokens int64, price decimal.Decimal) (decimal.Decimal, error) {
	t, err := decimal.New(tokens, 0)
	if err != nil {
		return t, err
	}
	c, err := t.Mul(price)
	if err != nil {
		return c, err
	}
	return c.Quo(thousand)
}

// Curve returns burned-per-month at repeat rates 0..max percent in n steps,
// for the spend-against-repeat-rate chart.
func Curve(in EstimateInput, maxPercent decimal.Decimal, n int) ([][2]decimal.Decimal, error) {
	out := make([][2]decimal.Decimal, 0, n+1)
	for i := 0; i <= n; i++ {
		p, err := maxPercent.Mul(decimal.MustNew(int64(i), 0))
		if err == nil {
			p, err = p.Quo(decimal.MustNew(int64(n), 0))
		}
		if err != nil {
			return nil, err
		}
		in2 := in
		in2.RepeatPercent = p
		e, err := Compute(in2)
		if err != nil {
			return nil, err
		}
		out = append(out, [2]decimal.Decimal{p, e.BurnedPerMonth})
	}
	return out, nil
}
