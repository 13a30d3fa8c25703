package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
)

// PathPrefix is where the handler expects to be mounted, with the provider
// name after it: mux.Handle("POST "+webhook.Pattern, h).
const (
	PathPrefix = "/webhooks/payments/"
	Pattern    = PathPrefix + "{provider}"
)

// Verdict is what became of one delivery.
type Verdict string

// Verdicts.
const (
	// VerdictProcessed: the effect was new and the order moved; the
	// notification (if any) is queued.
	VerdictProcessed Verdict = "processed"
	// VerdictDuplicate: the effect was already decided, by this event or
	// another announcing the same payment. Nothing changed.
	VerdictDuplicate Verdict = "duplicate"
	// VerdictStale: the effect is new but the order has moved past it (an
	// older event, or a transition its status does not allow). Recorded in
	// stale_events; nothing changed.
	VerdictStale Verdict = "stale"
	// VerdictIgnored: the event type maps to no transition.
	VerdictIgnored Verdict = "ignored"
	// VerdictRejected: the event is authentic but not one this package
	// understands (its shape, or an order it names nowhere). Recorded in
	// the delivery log with its reason and answered 200: a 4xx would make
	// the provider redeliver, for days, an event nothing will act on.
	VerdictRejected Verdict = "rejected"
)

// Stale reasons.
const (
	ReasonOlder      = "older"
	ReasonNotAllowed = "not_allowed"
)

// Result describes one delivery.
type Result struct {
	Verdict    Verdict
	Provider   string
	Tenant     string
	EventID    string
	EventType  string
	EffectKey  string // "" for ignored and rejected deliveries
	Transition Transition
	OrderRef   string
	// Status is the order's status after the delivery (processed, stale).
	Status Status
	// OrderCreated: this delivery created the order row.
	OrderCreated bool
	// Reason: stale (older, not_allowed), ignored (unmapped_type),
	// rejected (the *MalformedError's code: json, no_order_ref, ...).
	Reason string
	// OrderVia says where the order was found: metadata, invoice,
	// idempotency_key, payment (an earlier effect of the payment), action
	// (the charge retrysafe made).
	OrderVia string
	// Notification is the queued notification's key ("" when none).
	NotificationKey string
}

// Handler receives payment webhooks. Safe for concurrent use.
type Handler struct {
	cfg Config
	log *slog.Logger
}

// New validates cfg.
func New(cfg Config) (*Handler, error) {
	cfg, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	return &Handler{cfg: cfg, log: cfg.Logger}, nil
}

// Config returns the validated configuration (defaults filled in).
func (h *Handler) Config() Config { return h.cfg }

// ServeHTTP implements http.Handler for POST /webhooks/payments/{provider}.
// The provider comes from the mux's {provider} wildcard, or else from the
// path after PathPrefix.
//
//	200 {"status":"processed"|"duplicate"|"stale"|"ignored"|"rejected","reason":...}
//	    (anything else makes the provider redeliver)
//	401 bad or expired signature, 404 unknown provider, 405 not POST,
//	413 too large, 500 storage failed (the provider redelivers)
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	provider := r.PathValue("provider")
	if provider == "" {
		provider = strings.TrimPrefix(r.URL.Path, PathPrefix)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			h.log.Warn("webhook: payload too large", "provider", safeName(provider), "limit", h.cfg.MaxBodyBytes)
			writeJSON(w, http.StatusRequestEntityTooLarge, "payload too large")
			return
		}
		writeJSON(w, http.StatusBadRequest, "could not read the payload")
		return
	}
	var header string
	if p, ok := h.cfg.Providers[provider]; ok {
		header = r.Header.Get(p.SignatureHeader)
	}
	// Not the request's context alone: a provider that hangs up must not
	// roll back a delivery half way; the bound keeps a stuck database from
	// pinning handlers.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.cfg.StoreTimeout)
	defer cancel()
	res, err := h.Deliver(ctx, provider, header, body)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, string(res.Verdict), res.Reason)
	case errors.Is(err, ErrUnknownProvider):
		writeJSON(w, http.StatusNotFound, "unknown provider")
	case errors.Is(err, ErrSignature), errors.Is(err, ErrSignatureExpired):
		writeJSON(w, http.StatusUnauthorized, "bad signature")
	case errors.Is(err, ErrTooLarge):
		writeJSON(w, http.StatusRequestEntityTooLarge, "payload too large")
	default:
		writeJSON(w, http.StatusInternalServerError, "could not store the event")
	}
}

// Deliver handles one delivery's raw body and signature header: verify,
// parse, then decide and store in one transaction. err is nil for every
// verdict a provider must get 200 for, rejected included (Result.Reason is
// the code of the *MalformedError); otherwise it matches
// ErrUnknownProvider, ErrSignature, ErrSignatureExpired, ErrTooLarge, or is
// a storage failure.
func (h *Handler) Deliver(ctx context.Context, provider, signature string, body []byte) (*Result, error) {
	p, ok := h.cfg.Providers[provider]
	if !ok {
		h.log.Warn("webhook: unknown provider", "provider", safeName(provider))
		return nil, ErrUnknownProvider
	}
	if int64(len(body)) > h.cfg.MaxBodyBytes {
		return nil, ErrTooLarge
	}
	if err := Verify(p.Secret, signature, body, p.Tolerance, h.cfg.Clock()); err != nil {
		// Not stored: an unauthenticated request must not cost a write.
		h.log.Warn("webhook: delivery refused", "provider", provider, "reason", reasonOf(err), "bytes", len(body))
		return nil, err
	}
	res := &Result{Provider: provider}
	ev, raw, err := ParseEvent(body)
	if err != nil {
		return h.reject(ctx, p, res, nil, err)
	}
	res.EventID, res.EventType = ev.ID, ev.Type
	tenant, terr := tenantOf(p, ev)
	res.Tenant = tenant
	t, mapped := p.Events[ev.Type]
	if !mapped {
		// Whatever its tenant or shape: anything but 200 would make the
		// provider redeliver an event nobody will act on.
		res.Verdict, res.Reason = VerdictIgnored, "unmapped_type"
		if terr == nil {
			if err := logResult(ctx, h.cfg.DB, res); err != nil {
				return nil, h.failed(res, "log", err)
			}
		}
		h.log.Info("webhook: event ignored", "provider", provider, "tenant", tenant, "event_id", ev.ID, "type", ev.Type)
		return res, nil
	}
	if terr != nil {
		return h.reject(ctx, p, res, ev, terr)
	}
	if err := ParseObject(ev, raw); err != nil {
		return h.reject(ctx, p, res, ev, err)
	}
	if t == OrderRefunded && ev.Object.PartialRefund() {
		t = OrderPartiallyRefunded
	}
	res.Transition = t
	return h.apply(ctx, p, res, ev)
}

// reject records an authentic event this package does not understand and
// answers it 200 (verdict rejected, Reason its code). The log row is
// written under the tenant when it is known, else under "" (an unknown
// connected account). A storage failure is returned: the provider
// redelivers, and the row is written then.
func (h *Handler) reject(ctx context.Context, p Provider, res *Result, ev *Event, err error) (*Result, error) {
	var me *MalformedError
	if !errors.As(err, &me) {
		return nil, err
	}
	tenant := res.Tenant
	if tenant == "" && ev != nil {
		tenant, _ = tenantOf(p, ev)
	}
	if tenant == "" {
		tenant = p.Tenant
	}
	res.Tenant, res.Verdict, res.Reason, res.EffectKey, res.OrderRef = tenant, VerdictRejected, me.Code, "", ""
	h.log.Warn("webhook: event not understood; recorded and answered 200", "provider", res.Provider, "tenant", tenant,
		"event_id", res.EventID, "type", res.EventType, "code", me.Code)
	if lerr := logResult(ctx, h.cfg.DB, res); lerr != nil {
		return nil, h.failed(res, "log", lerr)
	}
	return res, nil
}

func (h *Handler) failed(res *Result, step string, err error) error {
	h.log.Error("webhook: store failed; the provider will redeliver", "provider", res.Provider, "tenant", res.Tenant,
		"event_id", res.EventID, "step", step, "error", err)
	return err
}

func tenantOf(p Provider, ev *Event) (string, error) {
	if p.Tenant != "" {
		return p.Tenant, nil
	}
	if t, ok := p.Accounts[ev.Account]; ok && ev.Account != "" {
		return t, nil
	}
	return "", malformed("unknown_tenant", "no tenant for the event's account")
}

func reasonOf(err error) string {
	if errors.Is(err, ErrSignatureExpired) {
		return "expired"
	}
	return "signature"
}

// safeName keeps an unconfigured provider name fit for a log line.
func safeName(s string) string {
	if providerNameRe.MatchString(s) {
		return s
	}
	return "(invalid)"
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func writeJSON(w http.ResponseWriter, status int, msg string, reason ...string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	body := map[string]string{"status": msg}
	if len(reason) > 0 && reason[0] != "" {
		body["reason"] = reason[0]
	}
	_ = json.NewEncoder(w).Encode(body)
}
