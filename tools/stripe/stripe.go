package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	sg "github.com/stripe/stripe-go/v82"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/tools"
)

// Name is the tool's action name.
const Name = "stripe.payment"

// KeyMetadata is the metadata key that carries the frozen key, which
// Lookup searches.
const KeyMetadata = "retrysafe_key"

// Defaults.
const (
	DefaultBaseURL     = "https://api.stripe.com"
	DefaultOrderRefKey = "order_ref"
	// defaultIDs bounds the in-memory key → PaymentIntent id map.
	defaultIDs = 10000
)

// IDStore remembers the PaymentIntent id Stripe answered for a key, so that
// Lookup can retrieve it by id instead of searching. Implementations must
// be safe for concurrent use.
type IDStore interface {
	Get(ctx context.Context, key string) (id string, ok bool)
	Put(ctx context.Context, key, id string)
}

// Config configures the tool.
type Config struct {
	// APIKey is the secret (sk_...) or restricted (rk_...) key. Required.
	// Never logged.
	APIKey string
	// BaseURL of the API. Default DefaultBaseURL; stripe-mock's address in
	// tests.
	BaseURL string
	// HTTPClient defaults to tools.NewClient(): keep-alive with room for
	// concurrent calls, no timeout of its own (the executor's context
	// bounds each call).
	HTTPClient *http.Client
	// MaxNetworkRetries are stripe-go's own retries. Default 0: the
	// executor retries, with the same key.
	MaxNetworkRetries int64
	// OrderRefKey is the metadata key the intent_ref is written to.
	// Default DefaultOrderRefKey ("order_ref"), which the webhook's stripe
	// preset reads.
	OrderRefKey string
	// IDs remembers PaymentIntent ids by key. Default: in memory, this
	// process only, the latest 10,000.
	IDs IDStore
	// Description overrides the description shown to the model.
	Description string
}

// Tool is stripe.payment. Safe for concurrent use.
type Tool struct {
	client   *sg.Client
	orderKey string
	ids      IDStore
	desc     string
}

// New returns the stripe.payment tool.
func New(cfg Config) (*Tool, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("stripe: APIKey is required")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("stripe: BaseURL %q is not an http(s) URL", cfg.BaseURL)
	}
	if cfg.MaxNetworkRetries < 0 {
		return nil, errors.New("stripe: MaxNetworkRetries must not be negative")
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = tools.NewClient()
	}
	if cfg.OrderRefKey == "" {
		cfg.OrderRefKey = DefaultOrderRefKey
	}
	if cfg.IDs == nil {
		cfg.IDs = newMemoryIDs(defaultIDs)
	}
	if cfg.Description == "" {
		cfg.Description = "Charge the customer's saved card (or other saved payment method) through Stripe. " +
			"Use only when the customer agreed to pay the amount due."
	}
	backend := sg.GetBackendWithConfig(sg.APIBackend, &sg.BackendConfig{
		URL:               sg.String(strings.TrimRight(cfg.BaseURL, "/")),
		HTTPClient:        cfg.HTTPClient,
		MaxNetworkRetries: sg.Int64(cfg.MaxNetworkRetries),
		// stripe-go logs failed requests itself; the executor logs what
		// matters, without personal data.
		LeveledLogger: &sg.LeveledLogger{Level: sg.LevelNull},
	})
	client := sg.NewClient(cfg.APIKey, sg.WithBackends(&sg.Backends{API: backend, Connect: backend, Uploads: backend, MeterEvents: backend}))
	return &Tool{client: client, orderKey: cfg.OrderRefKey, ids: cfg.IDs, desc: cfg.Description}, nil
}

// Schema is stripe.payment's field schema (rule version 2).
func Schema() derive.Schema {
	return derive.Schema{Action: Name, Version: 2, Fields: []derive.Field{
		{Name: "customer", Rule: derive.RuleRef, Description: "the Stripe customer id (cus_...)"},
		{Name: "payment_method", Rule: derive.RuleRef, Description: "the customer's saved payment method id (pm_...)"},
		{Name: "amount", Rule: derive.RuleMoney, Description: `amount in the currency's major unit, e.g. "180,00" or 180.00`},
		{Name: "currency", Rule: derive.RuleTemplate, Description: `ISO currency code, e.g. "brl"`},
		{Name: tools.RefField, Rule: derive.RuleRef, Description: "intent reference (filled in by the system)"},
	}}
}

// Name implements tools.Tool.
func (t *Tool) Name() string { return Name }

// Description implements tools.Tool.
func (t *Tool) Description() string { return t.desc }

// Schema implements tools.Tool.
func (t *Tool) Schema() derive.Schema { return Schema() }

// SystemFields implements tools.Tool.
func (t *Tool) SystemFields() []string { return []string{tools.RefField} }

// Parameters implements tools.Tool.
func (t *Tool) Parameters() json.RawMessage {
	return tools.ParametersFromSchema(t.Schema(), tools.RefField)
}

// Idempotent implements tools.Tool: Stripe honours Idempotency-Key.
func (t *Tool) Idempotent() bool { return true }

// Response is what Execute and Lookup return, and the executor stores.
type Response struct {
	ID             string `json:"id"`
	Object         string `json:"object"`
	PaymentIntent  string `json:"payment_intent"`
	LatestCharge   string `json:"latest_charge,omitempty"`
	Status         string `json:"status"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Livemode       bool   `json:"livemode"`
	IdempotencyKey string `json:"idempotency_key"`
}

// Execute implements tools.Tool: one PaymentIntent, created and confirmed
// under key.
func (t *Tool) Execute(ctx context.Context, key string, p derive.Payload) (json.RawMessage, error) {
	m := p.Map()
	cents, err := strconv.ParseInt(m["amount"], 10, 64)
	if err != nil || cents <= 0 {
		return nil, tools.Definitive("bad_payload", "frozen amount is not a positive integer of minor units", err)
	}
	params := &sg.PaymentIntentCreateParams{
		Amount:        sg.Int64(cents),
		Currency:      sg.String(m["currency"]),
		Customer:      sg.String(m["customer"]),
		PaymentMethod: sg.String(m["payment_method"]),
		Confirm:       sg.Bool(true),
		OffSession:    sg.Bool(true),
		AutomaticPaymentMethods: &sg.PaymentIntentCreateAutomaticPaymentMethodsParams{
			Enabled: sg.Bool(true), AllowRedirects: sg.String("never"),
		},
		Description: sg.String("retrysafe " + m[tools.RefField]),
	}
	params.AddMetadata(t.orderKey, m[tools.RefField])
	params.AddMetadata(KeyMetadata, key)
	params.SetIdempotencyKey(key)
	pi, err := t.client.V1PaymentIntents.Create(ctx, params)
	if err != nil {
		var se *sg.Error
		if errors.As(err, &se) && se.PaymentIntent != nil && se.PaymentIntent.ID != "" {
			t.ids.Put(ctx, key, se.PaymentIntent.ID)
		}
		return nil, Classify(err)
	}
	t.ids.Put(ctx, key, pi.ID)
	return response(pi, key)
}

// Lookup implements tools.Looker: the PaymentIntent made under key, by the
// id this process saw for it, else by searching its metadata.
func (t *Tool) Lookup(ctx context.Context, key string) (json.RawMessage, error) {
	var pi *sg.PaymentIntent
	if id, ok := t.ids.Get(ctx, key); ok {
		got, err := t.client.V1PaymentIntents.Retrieve(ctx, id, nil)
		if err != nil {
			return nil, lookupError(err)
		}
		pi = got
	} else {
		// The key is lowercase hex, but quote it as Stripe's search
		// language wants whatever it is.
		q := "metadata['" + KeyMetadata + "']:'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(key) + "'"
		params := &sg.PaymentIntentSearchParams{SearchParams: sg.SearchParams{Query: q, Limit: sg.Int64(10)}}
		for got, err := range t.client.V1PaymentIntents.Search(ctx, params) {
			if err != nil {
				return nil, lookupError(err)
			}
			// Trust the metadata, not the search: one key is one intent.
			if got.Metadata[KeyMetadata] == key {
				pi = got
				break
			}
		}
		if pi == nil {
			return nil, fmt.Errorf("%w (no PaymentIntent with metadata %s)", tools.ErrNotFound, KeyMetadata)
		}
		t.ids.Put(ctx, key, pi.ID)
	}
	if pi.Metadata != nil && pi.Metadata[KeyMetadata] != "" && pi.Metadata[KeyMetadata] != key {
		return nil, tools.Uncertain("key_mismatch", "the PaymentIntent saved for the key carries another key", nil)
	}
	switch pi.Status {
	case sg.PaymentIntentStatusRequiresPaymentMethod, sg.PaymentIntentStatusCanceled:
		// It did not charge: calling again with the key gets the error
		// Stripe saved for it.
		return nil, fmt.Errorf("%w (PaymentIntent %s)", tools.ErrNotFound, pi.Status)
	}
	return response(pi, key)
}

func response(pi *sg.PaymentIntent, key string) (json.RawMessage, error) {
	r := Response{ID: pi.ID, Object: "payment_intent", PaymentIntent: pi.ID, Status: string(pi.Status),
		Amount: pi.Amount, Currency: string(pi.Currency), Livemode: pi.Livemode, IdempotencyKey: key}
	if pi.LatestCharge != nil {
		r.LatestCharge = pi.LatestCharge.ID
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, tools.Uncertain("bad_response", "could not encode Stripe's answer", err)
	}
	return b, nil
}

// lookupError keeps "no such PaymentIntent" apart from "could not ask".
func lookupError(err error) error {
	var se *sg.Error
	if errors.As(err, &se) && se.HTTPStatusCode == http.StatusNotFound {
		return fmt.Errorf("%w (%s)", tools.ErrNotFound, se.Code)
	}
	return Classify(err)
}

// Classify maps a stripe-go error to a failure class (see the package
// documentation). The stored code is Stripe's type and code; the message,
// which may quote a card's details, is not kept.
func Classify(err error) *tools.Error {
	var se *sg.Error
	if !errors.As(err, &se) {
		// No response: stripe-go returns the transport's error.
		return tools.Classify(err)
	}
	code := string(se.Type)
	if se.Code != "" {
		code += ":" + string(se.Code)
	}
	if se.DeclineCode != "" {
		code += ":" + string(se.DeclineCode)
	}
	mk := func(c tools.Class, msg string) *tools.Error {
		return &tools.Error{Class: c, Code: code, Status: se.HTTPStatusCode, Message: msg, Err: err}
	}
	switch {
	case se.HTTPStatusCode == http.StatusTooManyRequests:
		return mk(tools.ClassTransient, "Stripe refused the request before acting (rate limit or lock timeout)")
	case se.Type == sg.ErrorTypeIdempotency:
		return mk(tools.ClassUncertain, "another request used the key (in flight, or with other parameters)")
	case se.Type == sg.ErrorTypeCard:
		return mk(tools.ClassDefinitive, "the payment method was declined")
	case se.Type == sg.ErrorTypeAPI || se.HTTPStatusCode >= 500:
		return mk(tools.ClassUncertain, "Stripe failed while it may have acted")
	case se.HTTPStatusCode >= 400:
		return mk(tools.ClassDefinitive, "Stripe refused the request")
	}
	return mk(tools.ClassUncertain, "unexpected answer")
}

// memoryIDs is the default IDStore: a bounded map, oldest out first.
type memoryIDs struct {
	mu    sync.Mutex
	max   int
	ids   map[string]string
	order []string
}

func newMemoryIDs(max int) *memoryIDs { return &memoryIDs{max: max, ids: map[string]string{}} }

func (m *memoryIDs) Get(_ context.Context, key string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, ok := m.ids[key]
	return id, ok
}

func (m *memoryIDs) Put(_ context.Context, key, id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.ids[key]; !ok {
		m.order = append(m.order, key)
		if len(m.order) > m.max {
			delete(m.ids, m.order[0])
			m.order = m.order[1:]
		}
	}
	m.ids[key] = id
}
