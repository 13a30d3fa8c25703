package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/govalues/decimal"
	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/tokens"
)

// Prefix is where the console is served. Mount the Handler at Prefix+"/".
const Prefix = "/console"

// ErrConfig reports an invalid Config.
var ErrConfig = errors.New("console: invalid config")

// DB is a pool: the console reads with it and settles in a transaction of
// its own (the resolution and its audit row commit together).
type DB interface {
	intent.DBTX
	Begin(ctx context.Context) (pgx.Tx, error)
}

// ProviderRequest is one request a provider received about a key, as the
// provider itself logged it.
type ProviderRequest struct {
	At     time.Time `json:"at"`
	Method string    `json:"method"`
	Path   string    `json:"path"`
	Status int       `json:"status"` // 0: dropped without an answer
}

// RequestLog finds the requests a provider received that carried a key.
// retrysafe does not log its provider calls; a provider that keeps such a
// log (the sandbox PSP's /_sandbox/requests) can be asked through this.
type RequestLog interface {
	Requests(ctx context.Context, action, key string) ([]ProviderRequest, error)
}

// The defaults of Config's zero fields that serve's flags show.
const (
	DefaultSessionTTL = 8 * time.Hour
	DefaultCurrency   = "BRL"
)

// Config configures the console. Zero fields take the documented defaults.
type Config struct {
	// DB is the pool. Required.
	DB DB
	// Tools finds an action's tool: its schema (which fields are personal
	// data, masked until revealed) and its Looker (the lookup button).
	// Required; *tools.Registry satisfies it.
	Tools executor.ToolSource
	// Logger defaults to slog.Default(). Lines carry the operator's name,
	// the tenant, the key and what was done; never a payload value, an
	// intent_ref, a reason text or a token.
	Logger *slog.Logger
	// SessionTTL is how long a sign-in lasts. Default 8h.
	SessionTTL time.Duration
	// LookupTimeout bounds one provider lookup. Default 10s.
	LookupTimeout time.Duration
	// FreshLookup: showing the queue asks the provider about each action
	// (that it can ask) whose latest lookup is older than this, or that
	// was never looked up, so that the queue says what the provider says
	// now; at most 8 per page, 4 at a time, each within 3s (the button
	// asks again with LookupTimeout). Default 5m; negative turns it off.
	FreshLookup time.Duration
	// QueueLimit is the most actions in review shown per tenant. Default 200.
	QueueLimit int
	// Prices price the model ledger's tokens for the spend chart, per
	// model; a model without one is priced at DefaultPrice and the page
	// says so.
	Prices map[string]tokens.Price
	// DefaultPrice defaults to 0.015 input / 0.075 output per thousand
	// tokens (the defaults of `retrysafe tokens estimate`).
	DefaultPrice *tokens.Price
	// Currency of the prices. Default BRL.
	Currency string
	// Requests, when set, shows the provider requests that carried an
	// intent's key. Nil: the page says they are not recorded.
	Requests RequestLog
	// ChartDays is how many days the spend chart covers. Default 14.
	ChartDays int
}

func (c Config) validate() (Config, error) {
	if c.DB == nil {
		return c, fmt.Errorf("%w: DB is required", ErrConfig)
	}
	if c.Tools == nil {
		return c, fmt.Errorf("%w: Tools is required", ErrConfig)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.LookupTimeout == 0 {
		c.LookupTimeout = 10 * time.Second
	}
	if c.FreshLookup == 0 {
		c.FreshLookup = 5 * time.Minute
	}
	if c.QueueLimit == 0 {
		c.QueueLimit = 200
	}
	if c.DefaultPrice == nil {
		c.DefaultPrice = &tokens.Price{InputPer1K: decimal.MustParse("0.015"), OutputPer1K: decimal.MustParse("0.075")}
	}
	if c.Currency == "" {
		c.Currency = DefaultCurrency
	}
	if c.ChartDays == 0 {
		c.ChartDays = 14
	}
	for m, p := range c.Prices {
		if p.InputPer1K.IsNeg() || p.OutputPer1K.IsNeg() {
			return c, fmt.Errorf("%w: the price of %s is negative", ErrConfig, m)
		}
	}
	switch {
	case c.SessionTTL < time.Minute || c.SessionTTL > 7*24*time.Hour:
		return c, fmt.Errorf("%w: SessionTTL must be between 1m and 7 days", ErrConfig)
	case c.LookupTimeout < 0:
		return c, fmt.Errorf("%w: LookupTimeout must be positive", ErrConfig)
	case c.QueueLimit < 1 || c.ChartDays < 1 || c.ChartDays > 90:
		return c, fmt.Errorf("%w: QueueLimit must be at least 1 and ChartDays 1..90", ErrConfig)
	}
	return c, nil
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Handler is the console. Safe for concurrent use.
type Handler struct {
	cfg  Config
	tmpl *template.Template
	mux  *http.ServeMux
	cop  *http.CrossOriginProtection
}

// New validates cfg and builds the console.
func New(cfg Config) (*Handler, error) {
	c, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	t, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	h := &Handler{cfg: c, tmpl: t, mux: http.NewServeMux(), cop: http.NewCrossOriginProtection()}
	h.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.cfg.Logger.Warn("console: cross-origin request refused", "method", r.Method, "path", r.URL.Path)
		h.fail(w, r, nil, http.StatusForbidden, "Cross-site request refused.")
	}))
	static, _ := fs.Sub(staticFS, "static")
	h.mux.Handle("GET "+Prefix+"/static/", http.StripPrefix(Prefix+"/static/", cacheStatic(http.FileServerFS(static))))
	h.mux.HandleFunc("GET "+Prefix+"/signin", h.signinPage)
	h.mux.HandleFunc("POST "+Prefix+"/signin", h.signin)
	h.mux.HandleFunc("POST "+Prefix+"/signout", h.authed(h.signout))
	h.mux.HandleFunc("GET "+Prefix+"/{$}", h.authed(h.queue))
	h.mux.HandleFunc("GET "+Prefix+"/queue", h.authed(h.queue))
	h.mux.HandleFunc("GET "+Prefix+"/intent", h.authed(h.story))
	h.mux.HandleFunc("GET "+Prefix+"/search", h.authed(h.search))
	h.mux.HandleFunc("GET "+Prefix+"/now", h.authed(h.now))
	h.mux.HandleFunc("POST "+Prefix+"/lookup", h.authed(h.lookup))
	h.mux.HandleFunc("POST "+Prefix+"/settle", h.authed(h.settle))
	h.mux.HandleFunc("POST "+Prefix+"/reveal", h.authed(h.reveal))
	h.mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		op, _ := h.session(r)
		h.fail(w, r, op, http.StatusNotFound, "No such page.")
	})
	return h, nil
}

// ServeHTTP implements http.Handler. Every state-changing request passes
// net/http's cross-origin protection (Sec-Fetch-Site, then Origin against
// Host) before anything else; the per-session token is checked after.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "same-origin")
	hdr.Set("X-Frame-Options", "DENY")
	h.cop.Handler(h.mux).ServeHTTP(w, r)
}

func cacheStatic(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		next.ServeHTTP(w, r)
	})
}
