package webhook

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/pairs"
	"github.com/retrysafe/retrysafe/internal/confcheck"
	"github.com/retrysafe/retrysafe/tools"
)

// DBTX is what the data functions need: *pgxpool.Pool, *pgx.Conn and pgx.Tx
// all satisfy it. One definition (intent's) serves every package, so a
// caller's transaction fits them all.
type DBTX = intent.DBTX

// Beginner is a DBTX that opens transactions (a pool).
type Beginner = intent.Beginner

// Inserter inserts River jobs inside a caller's transaction;
// *river.Client[pgx.Tx] satisfies it (an insert-only client, with no
// Workers, is enough).
type Inserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
}

// Transition is a domain change an event announces.
type Transition string

// Transitions.
const (
	OrderPaid     Transition = "order.paid"
	OrderRefunded Transition = "order.refunded"
	OrderDisputed Transition = "order.disputed"
	// OrderPartiallyRefunded is not mapped from an event type: a refund
	// event (OrderRefunded) whose object still keeps part of its amount
	// (Object.PartialRefund) becomes it.
	OrderPartiallyRefunded Transition = "order.partially_refunded"
)

// Status is an order's payment status.
type Status string

// Order statuses.
const (
	StatusPaid              Status = "paid"
	StatusPartiallyRefunded Status = "partially_refunded"
	StatusRefunded          Status = "refunded"
	StatusDisputed          Status = "disputed"
)

// target is the status a transition leads to.
var target = map[Transition]Status{
	OrderPaid:              StatusPaid,
	OrderPartiallyRefunded: StatusPartiallyRefunded,
	OrderRefunded:          StatusRefunded,
	OrderDisputed:          StatusDisputed,
}

// Target returns the status t leads to ("" for an unknown transition).
func (t Transition) Target() Status { return target[t] }

// DefaultEvents maps the provider event types this package knows (Stripe's
// names, which the sandbox PSP uses) to transitions: the generic preset's.
// Anything else is answered 200 and ignored.
func DefaultEvents() map[string]Transition {
	return map[string]Transition{
		"payment_intent.succeeded":  OrderPaid,
		"invoice.payment_succeeded": OrderPaid,
		"charge.refunded":           OrderRefunded,
		"charge.dispute.created":    OrderDisputed,
	}
}

// StripeEvents is the stripe preset's map: DefaultEvents and the other
// events Stripe sends for the same payments (charge.succeeded beside
// payment_intent.succeeded, invoice.paid beside
// invoice.payment_succeeded), which name the same payment and so are
// duplicates of each other, never a second effect. invoice_payment.paid
// (API versions from 2025-03-31.basil) is left out: it names its invoice
// but not the invoice's metadata, so it would file the payment under the
// invoice's id rather than the order the invoice's own event names.
func StripeEvents() map[string]Transition {
	m := DefaultEvents()
	m["charge.succeeded"] = OrderPaid
	m["invoice.paid"] = OrderPaid
	return m
}

// Presets: what a Provider's zero fields default to.
const (
	// PresetGeneric: the sandbox PSP's, and any sender of Stripe's scheme
	// under retrysafe's own header: Retrysafe-Signature, DefaultEvents,
	// the order in metadata.order_ref.
	PresetGeneric = "generic"
	// PresetStripe: Stripe itself: Stripe-Signature, StripeEvents, the
	// order in metadata.order_ref or metadata.order_id (then in the
	// records of the payment, see the package documentation).
	PresetStripe = "stripe"
)

// Defaults.
const (
	DefaultSignatureHeader = "Retrysafe-Signature"
	StripeSignatureHeader  = "Stripe-Signature"
	DefaultTolerance       = 5 * time.Minute
	DefaultOrderRefKey     = "order_ref"
	DefaultMaxBodyBytes    = 256 << 10
	DefaultStoreTimeout    = 10 * time.Second
	// DefaultPurgeRetention and DefaultPurgeBatch are PurgeParams' zero
	// fields.
	DefaultPurgeRetention = 30 * 24 * time.Hour
	DefaultPurgeBatch     = 1000
)

// StripeOrderRefKeys are the stripe preset's metadata keys, in the order
// they are read.
func StripeOrderRefKeys() []string { return []string{"order_ref", "order_id"} }

// Provider configures one payment provider, mounted at
// /webhooks/payments/{name}.
type Provider struct {
	// Preset fills the zero fields below: PresetGeneric (the default) or
	// PresetStripe.
	Preset string
	// Secret signs the provider's events. Required.
	Secret string
	// Tolerance is how far the signature's timestamp may be from the
	// clock, either way. Default DefaultTolerance (5m).
	Tolerance time.Duration
	// SignatureHeader carries "t=<unix>,v1=<hex>". Default: the
	// preset's, DefaultSignatureHeader ("Retrysafe-Signature") or
	// StripeSignatureHeader ("Stripe-Signature"), the same scheme.
	SignatureHeader string
	// Events maps the provider's event types to transitions. Nil: the
	// preset's, DefaultEvents() or StripeEvents(). Types not in the map
	// are ignored (200).
	Events map[string]Transition
	// Tenant owns every event of this provider (one account per tenant).
	// When empty, the event's top-level "account" is looked up in
	// Accounts (platforms with connected accounts).
	Tenant string
	// Accounts maps a connected account id to its tenant.
	Accounts map[string]string
	// OrderRefKeys are the metadata keys that name the order, read in
	// order. Nil: the preset's, [order_ref] or StripeOrderRefKeys().
	OrderRefKeys []string
	// OrderRefKey, when set, is read before OrderRefKeys.
	OrderRefKey string
}

var providerNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

func (p Provider) validate(name string) (Provider, error) {
	bad := func(format string, args ...any) (Provider, error) {
		return p, fmt.Errorf("%w: provider %q: "+format, append([]any{ErrConfig, name}, args...)...)
	}
	if !providerNameRe.MatchString(name) {
		return bad("name must match %s", providerNameRe)
	}
	switch p.Preset {
	case "", PresetGeneric:
		p.Preset = PresetGeneric
	case PresetStripe:
	default:
		return bad("unknown preset %q (want %s or %s)", p.Preset, PresetGeneric, PresetStripe)
	}
	stripe := p.Preset == PresetStripe
	if p.Secret == "" {
		return bad("Secret is required")
	}
	if p.Tolerance == 0 {
		p.Tolerance = DefaultTolerance
	}
	if p.Tolerance < 0 {
		return bad("Tolerance must be positive")
	}
	if p.SignatureHeader == "" {
		p.SignatureHeader = DefaultSignatureHeader
		if stripe {
			p.SignatureHeader = StripeSignatureHeader
		}
	}
	if !headerNameRe.MatchString(p.SignatureHeader) {
		return bad("SignatureHeader %q is not a header name", p.SignatureHeader)
	}
	if p.Events == nil {
		p.Events = DefaultEvents()
		if stripe {
			p.Events = StripeEvents()
		}
	}
	p.Events = maps.Clone(p.Events)
	for typ, t := range p.Events {
		if typ == "" || t.Target() == "" {
			return bad("event %q maps to unknown transition %q", typ, t)
		}
	}
	if p.Tenant == "" && len(p.Accounts) == 0 {
		return bad("set Tenant, or Accounts to map connected accounts to tenants")
	}
	p.Accounts = maps.Clone(p.Accounts)
	for acct, tenant := range p.Accounts {
		if acct == "" || tenant == "" {
			return bad("Accounts: empty account or tenant")
		}
	}
	if p.OrderRefKeys == nil {
		p.OrderRefKeys = []string{DefaultOrderRefKey}
		if stripe {
			p.OrderRefKeys = StripeOrderRefKeys()
		}
	}
	keys := make([]string, 0, len(p.OrderRefKeys)+1)
	if p.OrderRefKey != "" {
		keys = append(keys, p.OrderRefKey)
	}
	for _, k := range p.OrderRefKeys {
		if strings.TrimSpace(k) == "" {
			return bad("OrderRefKeys: empty key")
		}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	p.OrderRefKeys = keys
	return p, nil
}

// headerNameRe is an HTTP token, which a header name must be.
var headerNameRe = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")

// Config configures the handler. Zero fields take the documented defaults;
// New validates the result.
type Config struct {
	// DB is the pool. Required. Each delivery holds one connection, for
	// one transaction.
	DB Beginner `required:"true"`
	// Queue inserts the notification jobs inside the effect's
	// transaction. Required.
	Queue Inserter `required:"true"`
	// Intents freezes the notification intents (its deriver must know the
	// notification tools). Required.
	Intents *intent.Store `required:"true"`
	// Providers by name (the {provider} path segment). At least one.
	Providers map[string]Provider
	// Notify decides the customer notification of an applied transition.
	// Default DefaultNotifier(NotifyConfig{}), which needs
	// whatsapp.send_template or email.send in the intents' deriver.
	Notify Notifier
	// MaxBodyBytes bounds a delivery. Default DefaultMaxBodyBytes (256 KiB).
	MaxBodyBytes int64
	// StoreTimeout bounds storing one delivery. Default 10s.
	StoreTimeout time.Duration
	// Clock checks signature timestamps. Default time.Now. Every time
	// stored comes from the database or the event, never from it.
	Clock func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Validate fills defaults into a copy of c and checks it.
func (c Config) Validate() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return c, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	if err := confcheck.Required(ErrConfig, c); err != nil {
		return c, err
	}
	switch {
	case len(c.Providers) == 0:
		return bad("at least one provider is required")
	case isTx(c.DB):
		return bad("DB must be a pool: each delivery commits its own transaction")
	}
	providers := make(map[string]Provider, len(c.Providers))
	for name, p := range c.Providers {
		v, err := p.validate(name)
		if err != nil {
			return c, err
		}
		providers[name] = v
	}
	c.Providers = providers
	if c.Notify == nil {
		// Fail at start-up, not on every payment: the default notifier's
		// messages could not be frozen without one of its tools.
		d := c.Intents.Deriver()
		_, wa := d.DefaultVersion(tools.WhatsAppName)
		_, mail := d.DefaultVersion(tools.EmailSendName)
		if !wa && !mail {
			return bad("the intents' deriver knows neither %s nor %s: register one, or set Notify (NotifyNone sends nothing)",
				tools.WhatsAppName, tools.EmailSendName)
		}
		c.Notify = DefaultNotifier(NotifyConfig{})
	}
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.StoreTimeout = cmp.Or(c.StoreTimeout, DefaultStoreTimeout)
	if c.MaxBodyBytes < 0 || c.StoreTimeout < 0 {
		return bad("MaxBodyBytes and StoreTimeout must be positive")
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c, nil
}

// isTx reports a transaction passed where a pool is needed.
func isTx(db Beginner) bool {
	_, ok := db.(pgx.Tx)
	return ok
}

// ParseProviders builds Providers from two "name=value,..." lists, as
// serve reads them from RETRYSAFE_PAYMENT_WEBHOOK_SECRETS
// ("sandbox=whsec_1,stripe=whsec_2") and RETRYSAFE_PAYMENT_WEBHOOK_TENANTS
// ("sandbox=acme,stripe=acme"). Every provider needs both. The other fields
// keep their preset's defaults (see ParseProviderLists).
func ParseProviders(secrets, tenants string) (map[string]Provider, error) {
	return ParseProviderLists(ProviderLists{Secrets: secrets, Tenants: tenants})
}

// ProviderLists are "name=value,..." lists, one per Provider field, as
// serve reads them from its flags and environment.
type ProviderLists struct {
	// Secrets and Tenants: every provider needs both.
	Secrets, Tenants string
	// Presets: "stripe=stripe,psp=generic". A provider not listed takes
	// PresetStripe when it is named "stripe", else PresetGeneric.
	Presets string
	// Headers: the signature header, "psp=X-Psp-Signature".
	Headers string
	// OrderKeys: the metadata keys naming the order, separated by "|":
	// "stripe=order_ref|order_id|pedido".
	OrderKeys string
}

// ParseProviderLists builds Providers from l. An entry of an optional list
// that names a provider without a secret is an error (a typo would
// otherwise pass unnoticed).
func ParseProviderLists(l ProviderLists) (map[string]Provider, error) {
	sec, err := parsePairs("secrets", l.Secrets)
	if err != nil {
		return nil, err
	}
	ten, err := parsePairs("tenants", l.Tenants)
	if err != nil {
		return nil, err
	}
	optional := map[string]map[string]string{}
	for what, list := range map[string]string{"presets": l.Presets, "headers": l.Headers, "order keys": l.OrderKeys} {
		if strings.TrimSpace(list) == "" {
			continue
		}
		m, err := parsePairs(what, list)
		if err != nil {
			return nil, err
		}
		for name := range m {
			if _, ok := sec[name]; !ok {
				return nil, fmt.Errorf("%w: %s: provider %q has no secret", ErrConfig, what, name)
			}
		}
		optional[what] = m
	}
	out := make(map[string]Provider, len(sec))
	for name, s := range sec {
		t, ok := ten[name]
		if !ok {
			return nil, fmt.Errorf("%w: provider %q has a secret but no tenant", ErrConfig, name)
		}
		p := Provider{Secret: s, Tenant: t, Preset: optional["presets"][name], SignatureHeader: optional["headers"][name]}
		if p.Preset == "" && name == PresetStripe {
			p.Preset = PresetStripe
		}
		if keys := optional["order keys"][name]; keys != "" {
			for k := range strings.SplitSeq(keys, "|") {
				p.OrderRefKeys = append(p.OrderRefKeys, strings.TrimSpace(k))
			}
		}
		p, err := p.validate(name)
		if err != nil {
			return nil, err
		}
		out[name] = p
	}
	for name := range ten {
		if _, ok := sec[name]; !ok {
			return nil, fmt.Errorf("%w: provider %q has a tenant but no secret", ErrConfig, name)
		}
	}
	return out, nil
}

func parsePairs(what, s string) (map[string]string, error) {
	m, err := pairs.Map(s, "provider=value")
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrConfig, what, err)
	}
	return m, nil
}
