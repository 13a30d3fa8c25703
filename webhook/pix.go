package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/tools/apipix"
)

// The Pix callback of the Central Bank's API Pix (PUT /webhook/{chave}'s
// callback, POST {webhookUrl}/pix):
//
//	POST /webhooks/pix/{provider}        and, since the PSP appends "/pix" to
//	POST /webhooks/pix/{provider}/pix    the URL registered, that path too
//	     X-Webhook-Secret: <secret>      or ?hmac=<PixURLToken(secret, provider)>
//	     {"pix":[{"endToEndId","txid","valor","horario","infoPagador",
//	              "devolucoes":[{"id","rtrId","valor","horario":{"solicitacao","liquidacao"},"status"}]}]}
//	  → 200 {"status":"received","pix":[{"endToEndId","verdict",...}]}
//	    400 not a Pix callback, 401 no or a wrong secret, 404 unknown provider,
//	    405, 413, 500 storage failed (the PSP redelivers the whole call)
//
// Each Pix of a call is decided on its own, by effect, with the same
// transaction as a payment event (apply): effect, order, notification,
// log. A Pix received is the effect (order.paid, the intent behind the
// txid, endToEndId): the order is the intent_ref of the tenant's pix.cob
// intent whose key starts with the txid (tools/apipix derives the txid
// from the key). A refund that reached DEVOLVIDO is (order.refunded, the
// same order, "endToEndId/id"): while the refunds so far (DEVOLVIDO, in
// settlement order) are less than the Pix's value it is a partial refund
// (transition order.partially_refunded; the order stays paid), and the one
// that reaches it refunds the order. Refunds in progress or NAO_REALIZADO
// are logged and change nothing. The ordering guard compares the Pix's
// horario, or the refund's settlement time, with the order's last.
//
// A Pix for a txid retrysafe did not create (or with none: a plain
// transfer to the key) is logged (verdict ignored, reason unknown_txid or
// no_txid) and answered 200: a PSP must not redeliver it forever. A Pix
// item this package cannot read (no endToEndId, a horario that is not
// RFC 3339, a valor that is not an amount) is logged as rejected and
// skipped; the others are decided.
//
// # Authentication
//
// API Pix protects the callback with mutual TLS, which the deployment's TLS
// terminator does (see the README). The handler checks a shared secret as
// well, so that a proxy that lets a request through without a client
// certificate does not open the door: the raw secret in a header
// (PixProvider.SecretHeader), or PixURLToken(secret, provider) in the
// query string of the URL registered at the PSP (the "?hmac=..." some PSPs
// ask for; the secret itself never appears in a URL). Both are compared in
// constant time; a refused call is not stored.

// Pix callback paths.
const (
	PixPathPrefix      = "/webhooks/pix/"
	PixPattern         = PixPathPrefix + "{provider}"
	PixCallbackPattern = PixPattern + "/pix"
)

// Pix defaults.
const (
	DefaultPixSecretHeader = "X-Webhook-Secret"
	DefaultPixHMACParam    = "hmac"
)

// Event types logged for Pix items.
const (
	PixEventType       = "pix"
	PixRefundEventType = "pix.devolucao"
)

// Pix verdict reasons.
const (
	ReasonUnknownTxID   = "unknown_txid"
	ReasonNoTxID        = "no_txid"
	ReasonRefundPending = "refund_pending"
	ReasonNotRealized   = "refund_not_realized"
)

// PixProvider configures one PSP's Pix callback, at /webhooks/pix/{name}.
type PixProvider struct {
	// Tenant owns every Pix this PSP notifies. Required.
	Tenant string
	// Secret authenticates the PSP's calls. Required, at least 16 bytes.
	Secret string
	// SecretHeader carries the raw secret. Default DefaultPixSecretHeader.
	SecretHeader string
	// HMACParam is the query parameter carrying PixURLToken(Secret, name).
	// Default DefaultPixHMACParam ("hmac").
	HMACParam string
	// CobAction is the action whose intents the txids belong to. Default
	// apipix.CobName.
	CobAction string
}

func (p PixProvider) validate(name string) (PixProvider, error) {
	bad := func(format string, args ...any) (PixProvider, error) {
		return p, fmt.Errorf("%w: pix provider %q: "+format, append([]any{ErrConfig, name}, args...)...)
	}
	switch {
	case !providerNameRe.MatchString(name):
		return bad("name must match %s", providerNameRe)
	case p.Tenant == "":
		return bad("Tenant is required")
	case len(p.Secret) < 16:
		return bad("Secret is required, at least 16 bytes: mTLS at the proxy is not enough on its own")
	}
	if p.SecretHeader == "" {
		p.SecretHeader = DefaultPixSecretHeader
	}
	if p.HMACParam == "" {
		p.HMACParam = DefaultPixHMACParam
	}
	if p.CobAction == "" {
		p.CobAction = apipix.CobName
	}
	return p, nil
}

// PixURLToken is the value of the query parameter that authenticates a
// PSP's calls: hex HMAC-SHA256(secret, "retrysafe.pix.webhook:" +
// provider). Register the webhook URL with it, e.g.
// "https://host/webhooks/pix/efi?hmac=<token>&ignorar=" (the trailing
// parameter swallows the "/pix" the PSP appends).
func PixURLToken(secret, provider string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("retrysafe.pix.webhook:" + provider))
	return hex.EncodeToString(m.Sum(nil))
}

// PixAuth is what a call presented.
type PixAuth struct {
	Header string // the secret header's value
	Token  string // the query parameter's value
}

func (p PixProvider) authorized(name string, a PixAuth) bool {
	okHeader := a.Header != "" && subtle.ConstantTimeCompare([]byte(a.Header), []byte(p.Secret)) == 1
	okToken := a.Token != "" && subtle.ConstantTimeCompare([]byte(a.Token), []byte(PixURLToken(p.Secret, name))) == 1
	return okHeader || okToken
}

// PixHandler receives the Pix callback. Safe for concurrent use.
type PixHandler struct {
	h         *Handler
	providers map[string]PixProvider
}

// NewPix validates cfg (its Providers are ignored: providers replace
// them) and the Pix providers. A nil cfg.Notify is DefaultNotifier with
// DefaultTemplates plus "reembolso_parcial" for partial refunds.
func NewPix(cfg Config, providers map[string]PixProvider) (*PixHandler, error) {
	if len(providers) == 0 {
		return nil, fmt.Errorf("%w: at least one pix provider is required", ErrConfig)
	}
	ps := make(map[string]PixProvider, len(providers))
	cfg.Providers = make(map[string]Provider, len(providers))
	for name, p := range providers {
		v, err := p.validate(name)
		if err != nil {
			return nil, err
		}
		ps[name] = v
		// apply reads the order from the object's metadata under
		// OrderRefKey and logs under the tenant.
		cfg.Providers[name] = Provider{Secret: v.Secret, Tenant: v.Tenant}
	}
	if cfg.Notify == nil && cfg.Intents != nil {
		tpl := DefaultTemplates()
		tpl[OrderPartiallyRefunded] = "reembolso_parcial"
		cfg.Notify = DefaultNotifier(NotifyConfig{Templates: tpl})
		if err := requireNotifyTool(cfg); err != nil {
			return nil, err
		}
	}
	h, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return &PixHandler{h: h, providers: ps}, nil
}

// requireNotifyTool fails at start-up, as New does for its default, when
// the default notifier could freeze none of its messages.
func requireNotifyTool(cfg Config) error {
	d := cfg.Intents.Deriver()
	_, wa := d.DefaultVersion("whatsapp.send_template")
	_, mail := d.DefaultVersion("email.send")
	if !wa && !mail {
		return fmt.Errorf("%w: the intents' deriver knows neither whatsapp.send_template nor email.send: register one, or set Notify", ErrConfig)
	}
	return nil
}

// PixResult is what became of one item of a call: the Pix and each refund
// it reports.
type PixResult struct {
	EndToEndID string   `json:"endToEndId"`
	Verdict    Verdict  `json:"verdict"`
	Reason     string   `json:"reason,omitempty"`
	OrderRef   string   `json:"-"`
	EffectKey  string   `json:"-"`
	Refunds    []Result `json:"-"`
	// RefundVerdicts mirrors Refunds for the answer.
	RefundVerdicts []Verdict `json:"refunds,omitempty"`
}

// ServeHTTP implements http.Handler for the Pix callback.
func (ph *PixHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	provider := r.PathValue("provider")
	if provider == "" {
		provider = strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, PixPathPrefix), "/pix")
	}
	p, ok := ph.providers[provider]
	if !ok {
		ph.h.log.Warn("webhook: pix: unknown provider", "provider", safeName(provider))
		writeJSON(w, http.StatusNotFound, "unknown provider")
		return
	}
	if !p.authorized(provider, PixAuth{Header: r.Header.Get(p.SecretHeader), Token: r.URL.Query().Get(p.HMACParam)}) {
		// Not stored: an unauthenticated request must not cost a write.
		ph.h.log.Warn("webhook: pix: call refused", "provider", provider, "reason", "secret")
		writeJSON(w, http.StatusUnauthorized, "unauthorized")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, ph.h.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeJSON(w, http.StatusRequestEntityTooLarge, "payload too large")
			return
		}
		writeJSON(w, http.StatusBadRequest, "could not read the payload")
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), ph.h.cfg.StoreTimeout)
	defer cancel()
	res, err := ph.Deliver(ctx, provider, body)
	switch {
	case err == nil:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_ = json.NewEncoder(w).Encode(struct {
			Status string      `json:"status"`
			Pix    []PixResult `json:"pix"`
		}{"received", res})
	case errors.Is(err, ErrMalformed):
		var me *MalformedError
		errors.As(err, &me)
		writeJSON(w, http.StatusBadRequest, "malformed callback: "+me.Code)
	default:
		writeJSON(w, http.StatusInternalServerError, "could not store the callback")
	}
}

var e2eRe = regexp.MustCompile(`^[a-zA-Z0-9]{32}$`)
var txidRe = regexp.MustCompile(`^[a-zA-Z0-9]{26,35}$`)

type wirePixCallback struct {
	Pix *[]json.RawMessage `json:"pix"`
}

type wirePix struct {
	EndToEndID string          `json:"endToEndId"`
	TxID       string          `json:"txid"`
	Valor      string          `json:"valor"`
	Horario    string          `json:"horario"`
	Devolucoes []wireDevolucao `json:"devolucoes"`
}

type wireDevolucao struct {
	ID      string `json:"id"`
	Valor   string `json:"valor"`
	Status  string `json:"status"`
	Horario struct {
		Solicitacao string `json:"solicitacao"`
		Liquidacao  string `json:"liquidacao"`
	} `json:"horario"`
}

// PixItem is one Pix of a callback, as this package reads it.
type PixItem struct {
	EndToEndID string
	TxID       string // "" when absent or not a txid
	Cents      int64
	Horario    time.Time
	// Refunds in settlement order (liquidacao, else solicitacao; then id).
	Refunds []PixRefund
	// Problem is why the item cannot be read ("" when it can): pix_json,
	// no_end_to_end_id, horario, valor. Nothing of it is then decided.
	Problem string
}

// PixRefund is one devolução of a PixItem.
type PixRefund struct {
	ID     string
	Cents  int64
	Status string // EM_PROCESSAMENTO, DEVOLVIDO, NAO_REALIZADO
	At     time.Time
	// Problem: "devolucao" when its id, valor or times cannot be read.
	Problem string
}

// ParsePixCallback reads a callback body: {"pix":[...]}. An error (an
// ErrMalformed) means the body is not a callback at all; an item that
// cannot be read is returned with its Problem.
func ParsePixCallback(body []byte) ([]PixItem, error) {
	var cb wirePixCallback
	if err := json.Unmarshal(body, &cb); err != nil || cb.Pix == nil {
		return nil, malformed("pix", "not an API Pix callback: want {\"pix\":[...]}")
	}
	out := make([]PixItem, 0, len(*cb.Pix))
	for _, raw := range *cb.Pix {
		out = append(out, parsePixItem(raw))
	}
	return out, nil
}

func parsePixItem(raw json.RawMessage) PixItem {
	var w wirePix
	if err := json.Unmarshal(raw, &w); err != nil {
		return PixItem{Problem: "pix_json"}
	}
	it := PixItem{EndToEndID: w.EndToEndID}
	var okTime, okValor bool
	it.Horario, okTime = parseTime(w.Horario)
	it.Cents, okValor = pixCents(w.Valor)
	switch {
	case !e2eRe.MatchString(w.EndToEndID):
		it.EndToEndID, it.Problem = "", "no_end_to_end_id"
		return it
	case !okTime:
		it.Problem = "horario"
		return it
	case !okValor:
		it.Problem = "valor"
		return it
	}
	if txidRe.MatchString(w.TxID) {
		it.TxID = w.TxID
	}
	for _, d := range w.Devolucoes {
		r := PixRefund{ID: d.ID, Status: d.Status}
		var okV bool
		r.Cents, okV = pixCents(d.Valor)
		if t, ok := parseTime(d.Horario.Liquidacao); ok {
			r.At = t
		} else if t, ok := parseTime(d.Horario.Solicitacao); ok {
			r.At = t
		}
		if !devIDRe.MatchString(d.ID) || !okV || r.At.IsZero() {
			r.Problem = "devolucao"
		}
		it.Refunds = append(it.Refunds, r)
	}
	sort.SliceStable(it.Refunds, func(i, j int) bool {
		a, b := it.Refunds[i], it.Refunds[j]
		if !a.At.Equal(b.At) {
			return a.At.Before(b.At)
		}
		return a.ID < b.ID
	})
	return it
}

var devIDRe = regexp.MustCompile(`^[a-zA-Z0-9]{1,35}$`)

// pixCents reads "\d{1,10}\.\d{2}".
func pixCents(v string) (int64, bool) {
	i, f, ok := strings.Cut(v, ".")
	if !ok || len(f) != 2 || i == "" || len(i) > 10 {
		return 0, false
	}
	for _, c := range i + f {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(i+f, 10, 64)
	return n, err == nil
}

// Deliver decides one authenticated call's body. err is nil whenever the
// PSP must get 200; otherwise ErrMalformed (not a Pix callback at all), or
// a storage failure (the call is to be redelivered whole: what was already
// decided is then a duplicate).
func (ph *PixHandler) Deliver(ctx context.Context, provider string, body []byte) ([]PixResult, error) {
	pp, ok := ph.providers[provider]
	if !ok {
		return nil, ErrUnknownProvider
	}
	p := ph.h.cfg.Providers[provider]
	items, err := ParsePixCallback(body)
	if err != nil {
		ph.h.log.Warn("webhook: pix: malformed callback", "provider", provider, "bytes", len(body))
		return nil, err
	}
	out := make([]PixResult, 0, len(items))
	for _, it := range items {
		r, err := ph.deliverOne(ctx, provider, pp, p, it)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (ph *PixHandler) logVerdict(ctx context.Context, tenant, provider, id, typ string, v Verdict, reason string, status int) error {
	return insertLog(ctx, ph.h.cfg.DB, Delivery{Tenant: tenant, Provider: provider, EventID: id, EventType: typ,
		Verdict: v, Reason: reason, HTTPStatus: status})
}

func parseTime(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	return t.UTC(), err == nil
}

func (ph *PixHandler) deliverOne(ctx context.Context, provider string, pp PixProvider, p Provider, it PixItem) (PixResult, error) {
	res := PixResult{EndToEndID: it.EndToEndID}
	if it.Problem != "" {
		ph.h.log.Warn("webhook: pix: item refused", "provider", provider, "tenant", pp.Tenant, "code", it.Problem)
		res.Verdict, res.Reason = VerdictRejected, it.Problem
		return res, ph.logVerdict(ctx, pp.Tenant, provider, res.EndToEndID, PixEventType, VerdictRejected, it.Problem, http.StatusOK)
	}
	if it.TxID == "" {
		res.Verdict, res.Reason = VerdictIgnored, ReasonNoTxID
		ph.h.log.Info("webhook: pix without a txid of ours", "provider", provider, "tenant", pp.Tenant, "event_id", it.EndToEndID)
		return res, ph.logVerdict(ctx, pp.Tenant, provider, it.EndToEndID, PixEventType, VerdictIgnored, ReasonNoTxID, http.StatusOK)
	}
	orderRef, err := ph.orderOf(ctx, pp, it.TxID)
	if err != nil {
		return res, ph.h.failed(&Result{Provider: provider, Tenant: pp.Tenant, EventID: it.EndToEndID}, "txid", err)
	}
	if orderRef == "" {
		// Recorded, answered 200: not ours to act on, nor to refuse.
		res.Verdict, res.Reason = VerdictIgnored, ReasonUnknownTxID
		ph.h.log.Warn("webhook: pix for a txid retrysafe did not create", "provider", provider, "tenant", pp.Tenant, "event_id", it.EndToEndID)
		return res, ph.logVerdict(ctx, pp.Tenant, provider, it.EndToEndID, PixEventType, VerdictIgnored, ReasonUnknownTxID, http.StatusOK)
	}
	res.OrderRef = orderRef
	// The order is the intent behind the txid: the event names it under
	// the provider's first order key, where apply reads it.
	meta := map[string]string{p.OrderRefKeys[0]: orderRef}
	ev := &Event{ID: it.EndToEndID, Type: PixEventType, Created: it.Horario,
		Object: Object{ID: it.EndToEndID, Kind: "pix", Metadata: meta}}
	paid, err := ph.h.apply(ctx, p, &Result{Provider: provider, Tenant: pp.Tenant, EventID: ev.ID, EventType: ev.Type, Transition: OrderPaid}, ev)
	if err != nil {
		return res, err
	}
	res.Verdict, res.Reason, res.EffectKey = paid.Verdict, paid.Reason, paid.EffectKey

	// Refunds in settlement order: the running total decides partial or
	// full, the same way on every delivery.
	var total int64
	for _, d := range it.Refunds {
		id := it.EndToEndID + "/" + d.ID
		var rr Result
		switch {
		case d.Problem != "":
			rr = Result{Verdict: VerdictRejected, Reason: d.Problem}
		case d.Status == "DEVOLVIDO":
			total += d.Cents
			paid, refunded := it.Cents, total
			rev := &Event{ID: id, Type: PixRefundEventType, Created: d.At,
				Object: Object{ID: id, Kind: "pix_refund", Metadata: meta, Amount: &paid, AmountRefunded: &refunded}}
			// A refund of part of the Pix is partial, as a card's is
			// (Object.PartialRefund): the order is partially_refunded.
			t := OrderRefunded
			if rev.Object.PartialRefund() {
				t = OrderPartiallyRefunded
			}
			r, err := ph.h.apply(ctx, p, &Result{Provider: provider, Tenant: pp.Tenant, EventID: rev.ID, EventType: rev.Type, Transition: t}, rev)
			if err != nil {
				return res, err
			}
			rr = *r
		case d.Status == "NAO_REALIZADO":
			rr = Result{Verdict: VerdictIgnored, Reason: ReasonNotRealized}
		default:
			rr = Result{Verdict: VerdictIgnored, Reason: ReasonRefundPending}
		}
		if rr.Verdict == VerdictIgnored || rr.Verdict == VerdictRejected {
			if err := ph.logVerdict(ctx, pp.Tenant, provider, id, PixRefundEventType, rr.Verdict, rr.Reason, http.StatusOK); err != nil {
				return res, err
			}
		}
		res.Refunds = append(res.Refunds, rr)
		res.RefundVerdicts = append(res.RefundVerdicts, rr.Verdict)
	}
	return res, nil
}

// orderOf returns the intent_ref behind txid, or "" when there is none
// (or, impossibly for 26+ hex digits, two): the tenant's intent of the cob
// action whose key starts with the txid.
func (ph *PixHandler) orderOf(ctx context.Context, p PixProvider, txid string) (string, error) {
	refs, err := intent.RefsByKeyPrefix(ctx, ph.h.cfg.DB, p.Tenant, p.CobAction, txid)
	if err != nil {
		return "", err
	}
	if len(refs) != 1 {
		if len(refs) > 1 {
			ph.h.log.Error("webhook: pix: a txid matches two intents; refusing to choose", "tenant", p.Tenant)
		}
		return "", nil
	}
	return refs[0], nil
}

// ParsePixProviders builds Pix providers from two "name=value,..." lists,
// as serve reads them from RETRYSAFE_PIX_WEBHOOK_SECRETS and
// RETRYSAFE_PIX_WEBHOOK_TENANTS. Every provider needs both.
func ParsePixProviders(secrets, tenants string) (map[string]PixProvider, error) {
	sec, err := parsePairs("secrets", secrets)
	if err != nil {
		return nil, err
	}
	ten, err := parsePairs("tenants", tenants)
	if err != nil {
		return nil, err
	}
	out := make(map[string]PixProvider, len(sec))
	for name, s := range sec {
		t, ok := ten[name]
		if !ok {
			return nil, fmt.Errorf("%w: pix provider %q has a secret but no tenant", ErrConfig, name)
		}
		p, err := PixProvider{Secret: s, Tenant: t}.validate(name)
		if err != nil {
			return nil, err
		}
		out[name] = p
	}
	for name := range ten {
		if _, ok := sec[name]; !ok {
			return nil, fmt.Errorf("%w: pix provider %q has a tenant but no secret", ErrConfig, name)
		}
	}
	return out, nil
}
