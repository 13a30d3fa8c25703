package psp

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/sandbox/fault"
)

// DefaultSchema is where the PSP keeps its tables unless told otherwise.
const DefaultSchema = "retrysafe_psp"

// Defaults for zero Config fields.
const (
	DefaultWebhookPoll        = 250 * time.Millisecond
	DefaultWebhookBackoff     = time.Second
	DefaultWebhookMaxBackoff  = 10 * time.Minute
	DefaultWebhookMaxAttempts = 12
	DefaultWebhookTimeout     = 5 * time.Second
	DefaultWebhookBatch       = 16
)

// Config configures a Server. Zero fields take their defaults.
type Config struct {
	// Idempotency configures the middleware in front of POST
	// /v1/pix/charges. Its Tenant is set by the PSP (the bearer token).
	Idempotency idempotency.Config
	// IdempotencyWait lets a duplicate of an unfinished charge wait this
	// long for its answer instead of getting 409 at once.
	IdempotencyWait time.Duration

	// Fault applies to POST requests that carry no X-Sandbox-Fault header,
	// with probability FaultRate (0 means 1).
	Fault     fault.Spec
	FaultRate float64

	// WebhookURL receives an event after each charge; empty sends none.
	WebhookURL string
	// WebhookSecret signs events; required with WebhookURL.
	WebhookSecret string
	// WebhookBackoff is the pause after the first failed delivery; it
	// doubles per attempt up to WebhookMaxBackoff (with ±20% jitter).
	WebhookBackoff     time.Duration
	WebhookMaxBackoff  time.Duration
	WebhookMaxAttempts int
	WebhookTimeout     time.Duration // per delivery attempt
	WebhookPoll        time.Duration // how often the loop looks for due deliveries
	WebhookBatch       int           // deliveries claimed per statement
	HTTPClient         *http.Client  // default: one with WebhookTimeout

	Logger *slog.Logger
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Idempotency.Tenant = merchantOf
	c.Idempotency = c.Idempotency.WithDefaults()
	if c.WebhookBackoff == 0 {
		c.WebhookBackoff = DefaultWebhookBackoff
	}
	if c.WebhookMaxBackoff == 0 {
		c.WebhookMaxBackoff = max(DefaultWebhookMaxBackoff, c.WebhookBackoff)
	}
	if c.WebhookMaxAttempts == 0 {
		c.WebhookMaxAttempts = DefaultWebhookMaxAttempts
	}
	if c.WebhookTimeout == 0 {
		c.WebhookTimeout = DefaultWebhookTimeout
	}
	if c.WebhookPoll == 0 {
		c.WebhookPoll = DefaultWebhookPoll
	}
	if c.WebhookBatch == 0 {
		c.WebhookBatch = DefaultWebhookBatch
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: c.WebhookTimeout}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Idempotency.Logger == nil || c.Idempotency.Logger == slog.Default() {
		c.Idempotency.Logger = c.Logger
	}
	return c
}

// Validate reports the first invalid field (after defaults).
func (c Config) Validate() error {
	if err := c.Idempotency.Validate(); err != nil {
		return err
	}
	if c.IdempotencyWait < 0 {
		return errors.New("psp: IdempotencyWait must not be negative")
	}
	if c.FaultRate < 0 || c.FaultRate > 1 {
		return fmt.Errorf("psp: FaultRate %v outside 0..1", c.FaultRate)
	}
	if c.WebhookURL != "" {
		u, err := url.Parse(c.WebhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("psp: WebhookURL %q is not an http(s) URL", c.WebhookURL)
		}
		if c.WebhookSecret == "" {
			return errors.New("psp: WebhookSecret is required with WebhookURL")
		}
	}
	if c.WebhookBackoff <= 0 || c.WebhookMaxBackoff < c.WebhookBackoff {
		return errors.New("psp: WebhookBackoff must be positive and at most WebhookMaxBackoff")
	}
	if c.WebhookMaxAttempts < 1 || c.WebhookTimeout <= 0 || c.WebhookPoll <= 0 || c.WebhookBatch < 1 {
		return errors.New("psp: webhook attempts, timeout, poll and batch must be positive")
	}
	return nil
}
