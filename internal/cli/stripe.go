package cli

import (
	"flag"
	"fmt"

	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/stripe"
)

// stripeFlags configure the stripe.payment tool: PaymentIntents created
// and confirmed with the frozen key as Idempotency-Key.
type stripeFlags struct {
	apiKey, baseURL string
}

func (f *stripeFlags) register(fs *flag.FlagSet, e *Env) {
	fs.StringVar(&f.apiKey, "stripe-api-key", e.Getenv("RETRYSAFE_STRIPE_API_KEY"),
		"Stripe secret or restricted key for stripe.payment (env RETRYSAFE_STRIPE_API_KEY; prefer the env; empty: tool off)")
	fs.StringVar(&f.baseURL, "stripe-url", e.Getenv("RETRYSAFE_STRIPE_URL"),
		"Stripe API base URL (env RETRYSAFE_STRIPE_URL; empty: "+stripe.DefaultBaseURL+"; stripe-mock's address in tests)")
}

// add registers stripe.payment when a key is set.
func (f *stripeFlags) add(reg *tools.Registry) error {
	if f.apiKey == "" {
		if f.baseURL != "" {
			return fmt.Errorf("RETRYSAFE_STRIPE_URL is set without RETRYSAFE_STRIPE_API_KEY: stripe.payment needs the key")
		}
		return nil
	}
	if f.baseURL != "" {
		if err := checkURL(f.baseURL); err != nil {
			return fmt.Errorf("RETRYSAFE_STRIPE_URL: %w", err)
		}
	}
	t, err := stripe.New(stripe.Config{APIKey: f.apiKey, BaseURL: f.baseURL})
	if err != nil {
		return fmt.Errorf("RETRYSAFE_STRIPE_API_KEY: %w", err)
	}
	return reg.Register(t)
}
