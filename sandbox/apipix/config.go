package apipix

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/retrysafe/retrysafe/sandbox/fault"
)

// Defaults.
const (
	DefaultClientID       = "retrysafe-sandbox"
	DefaultClientSecret   = "sandbox-secret"
	DefaultTokenTTL       = time.Hour
	DefaultGroupMax       = 10
	DefaultPoll           = 50 * time.Millisecond
	DefaultWebhookBackoff = 200 * time.Millisecond
	DefaultMaxBackoff     = 10 * time.Second
	DefaultMaxAttempts    = 50
	// DefaultISPB is the sandbox PSP's participant code in endToEndIds.
	DefaultISPB = "99999999"
	// DefaultReceiverCNPJ is the sandbox receiver's CNPJ (valid check digits).
	DefaultReceiverCNPJ = "11222333000181"
)

// Config configures the server. Zero fields take the defaults.
type Config struct {
	// ClientID and ClientSecret are the one receiver's OAuth2 client
	// credentials (HTTP Basic at POST /oauth/token).
	ClientID, ClientSecret string
	// TokenTTL is how long a token lives (expires_in).
	TokenTTL time.Duration
	// WebhookURL receives callbacks for chaves with no registered
	// webhook ("" for none). The PSP appends "/pix".
	WebhookURL string
	// GroupMax bounds the Pix in one callback.
	GroupMax int
	// Poll is the background loop's period (settling refunds, delivering).
	Poll time.Duration
	// WebhookBackoff is the pause after a failed delivery, doubled per
	// attempt up to MaxBackoff; after MaxAttempts a notification is dropped.
	WebhookBackoff, MaxBackoff time.Duration
	MaxAttempts                int
	// Fault applies to every PUT without an X-Sandbox-Fault header, with
	// probability FaultRate (0 means 1).
	Fault     fault.Spec
	FaultRate float64
	// ISPB is the 8-digit participant code in endToEndIds.
	ISPB string
	// ReceiverCNPJ is the receiver's CNPJ, shown with its webhooks.
	ReceiverCNPJ string
	// Clock defaults to time.Now.
	Clock  func() time.Time
	Logger *slog.Logger
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	if c.ClientSecret == "" {
		c.ClientSecret = DefaultClientSecret
	}
	if c.TokenTTL == 0 {
		c.TokenTTL = DefaultTokenTTL
	}
	if c.GroupMax == 0 {
		c.GroupMax = DefaultGroupMax
	}
	if c.Poll == 0 {
		c.Poll = DefaultPoll
	}
	if c.WebhookBackoff == 0 {
		c.WebhookBackoff = DefaultWebhookBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.ISPB == "" {
		c.ISPB = DefaultISPB
	}
	if c.ReceiverCNPJ == "" {
		c.ReceiverCNPJ = DefaultReceiverCNPJ
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate checks a configuration with defaults filled in.
func (c Config) Validate() error {
	switch {
	case c.TokenTTL < time.Second:
		return errors.New("apipix: TokenTTL must be at least 1s")
	case c.GroupMax < 1:
		return errors.New("apipix: GroupMax must be at least 1")
	case c.Poll <= 0, c.WebhookBackoff <= 0, c.MaxBackoff <= 0:
		return errors.New("apipix: Poll, WebhookBackoff and MaxBackoff must be positive")
	case c.MaxAttempts < 1:
		return errors.New("apipix: MaxAttempts must be at least 1")
	case c.FaultRate < 0 || c.FaultRate > 1:
		return errors.New("apipix: FaultRate must be within 0..1")
	case len(c.ISPB) != 8 || !allDigits(c.ISPB):
		return errors.New("apipix: ISPB must be 8 digits")
	case len(c.ReceiverCNPJ) != 14:
		return errors.New("apipix: ReceiverCNPJ must have 14 characters")
	}
	if c.WebhookURL != "" {
		if u, err := url.Parse(c.WebhookURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("apipix: WebhookURL is not an http(s) URL")
		}
	}
	return nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
