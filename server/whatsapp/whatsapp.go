package whatsapp

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
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/agent"
)

// Path is where the handler expects to be mounted.
const Path = "/webhooks/whatsapp"

// SignatureHeader carries the payload's HMAC.
const SignatureHeader = "X-Hub-Signature-256"

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("whatsapp: invalid config")

// Config configures the webhook handler. Zero fields take the documented
// defaults; New validates the result.
type Config struct {
	// DB is the pool. Required.
	DB agent.Beginner
	// Queue inserts inbox jobs in the message's transaction (see
	// agent.NewInserter). Required.
	Queue agent.Inserter
	// AppSecret is the app secret the provider signs payloads with.
	// Required.
	AppSecret string
	// VerifyToken is what the provider must echo in the subscription
	// check. Required.
	VerifyToken string
	// Tenants maps a business phone_number_id to its tenant. At least one.
	Tenants map[string]string
	// MaxBodyBytes bounds a payload. Default 1 MiB.
	MaxBodyBytes int64
	// StoreTimeout bounds storing one delivery. Default 10s.
	StoreTimeout time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Validate fills defaults into a copy of c and checks it.
func (c Config) Validate() (Config, error) {
	bad := func(msg string) (Config, error) { return c, fmt.Errorf("%w: %s", ErrConfig, msg) }
	switch {
	case c.DB == nil:
		return bad("DB is required")
	case c.Queue == nil:
		return bad("Queue is required")
	case c.AppSecret == "":
		return bad("AppSecret is required")
	case c.VerifyToken == "":
		return bad("VerifyToken is required")
	case len(c.Tenants) == 0:
		return bad("Tenants must map at least one phone_number_id to a tenant")
	}
	tenants := make(map[string]string, len(c.Tenants))
	for id, t := range c.Tenants {
		if id == "" || t == "" {
			return bad("Tenants: empty phone_number_id or tenant")
		}
		tenants[id] = t
	}
	c.Tenants = tenants
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = 10 * time.Second
	}
	if c.MaxBodyBytes < 0 || c.StoreTimeout < 0 {
		return bad("MaxBodyBytes and StoreTimeout must be positive")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Handler serves Path. Safe for concurrent use.
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

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		h.verify(w, r)
	case http.MethodPost:
		h.receive(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeJSON(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

// verify answers the subscription check.
func (h *Handler) verify(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	token := q.Get("hub.verify_token")
	if q.Get("hub.mode") != "subscribe" || subtle.ConstantTimeCompare([]byte(token), []byte(h.cfg.VerifyToken)) != 1 {
		h.log.Warn("whatsapp: verification refused")
		writeJSON(w, http.StatusForbidden, "verification refused")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, q.Get("hub.challenge"))
}

func (h *Handler) receive(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeJSON(w, http.StatusRequestEntityTooLarge, "payload too large")
			return
		}
		writeJSON(w, http.StatusBadRequest, "could not read the payload")
		return
	}
	if !h.signed(r.Header.Get(SignatureHeader), body) {
		h.log.Warn("whatsapp: bad or missing signature", "bytes", len(body))
		writeJSON(w, http.StatusUnauthorized, "bad signature")
		return
	}
	msgs, ignored, err := h.parse(body)
	if err != nil {
		h.log.Warn("whatsapp: malformed payload", "error", err)
		writeJSON(w, http.StatusBadRequest, "malformed payload")
		return
	}
	if len(msgs) == 0 {
		writeJSON(w, http.StatusOK, "ok")
		return
	}
	// Not the request's context alone: a provider that hangs up must not
	// roll back a delivery half way (it would redeliver anyway, but the
	// bound keeps a stuck database from pinning handlers).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.cfg.StoreTimeout)
	defer cancel()
	fresh, err := agent.Receive(ctx, h.cfg.DB, h.cfg.Queue, msgs)
	if err != nil {
		h.log.Error("whatsapp: store failed; the provider will redeliver", "messages", len(msgs), "error", err)
		writeJSON(w, http.StatusInternalServerError, "could not store the messages")
		return
	}
	for _, m := range msgs {
		h.log.Info("whatsapp: message received", "tenant", m.Tenant, "message_id", m.MessageID)
	}
	h.log.Info("whatsapp: delivery stored", "messages", len(msgs), "new", fresh, "duplicates", len(msgs)-fresh, "ignored", ignored)
	writeJSON(w, http.StatusOK, "ok")
}

// signed checks "sha256=<hex>" against the HMAC of body, in constant time.
func (h *Handler) signed(header string, body []byte) bool {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	mac := hmac.New(sha256.New, []byte(h.cfg.AppSecret))
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// Sign returns the header value the provider would send for body: for
// tests and the sandbox.
func Sign(appSecret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(appSecret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// payload is the part of the webhook's shape this handler reads.
type payload struct {
	Object string `json:"object"`
	Entry  []struct {
		ID      string `json:"id"`
		Changes []struct {
			Field string `json:"field"`
			Value struct {
				Metadata struct {
					PhoneNumberID string `json:"phone_number_id"`
				} `json:"metadata"`
				Messages []message `json:"messages"`
			} `json:"value"`
		} `json:"changes"`
	} `json:"entry"`
}

type message struct {
	ID        string `json:"id"`
	From      string `json:"from"`
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	Text      *struct {
		Body string `json:"body"`
	} `json:"text"`
}

// parse returns the text messages to store and how many events it ignored.
func (h *Handler) parse(body []byte) ([]agent.Inbound, int, error) {
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, 0, fmt.Errorf("not the webhook JSON: %w", err)
	}
	if p.Object == "" && p.Entry == nil {
		return nil, 0, errors.New("no object and no entry")
	}
	var (
		out     []agent.Inbound
		ignored int
	)
	for _, e := range p.Entry {
		for _, c := range e.Changes {
			if c.Field != "messages" || len(c.Value.Messages) == 0 {
				ignored++ // statuses, templates, account updates...
				continue
			}
			pnid := c.Value.Metadata.PhoneNumberID
			tenant, ok := h.cfg.Tenants[pnid]
			if !ok {
				h.log.Warn("whatsapp: message to a number no tenant owns, ignored", "phone_number_id", pnid, "messages", len(c.Value.Messages))
				ignored += len(c.Value.Messages)
				continue
			}
			for i, m := range c.Value.Messages {
				if m.Type != "text" {
					ignored++
					continue
				}
				if err := checkMessage(m); err != nil {
					return nil, 0, fmt.Errorf("entry %s message %d: %w", e.ID, i, err)
				}
				in := agent.Inbound{Tenant: tenant, MessageID: m.ID, ConversationID: m.From, PhoneNumberID: pnid, Body: m.Text.Body}
				if secs, err := strconv.ParseInt(m.Timestamp, 10, 64); err == nil && secs > 0 {
					in.SentAt = time.Unix(secs, 0).UTC()
				}
				out = append(out, in)
			}
		}
	}
	return out, ignored, nil
}

func checkMessage(m message) error {
	switch {
	case m.ID == "" || len(m.ID) > 255:
		return errors.New("message id missing or longer than 255 bytes")
	case len(m.From) < 8 || len(m.From) > 15 || strings.Trim(m.From, "0123456789") != "":
		return errors.New("sender is not a WhatsApp id (8 to 15 digits)")
	case m.Text == nil || strings.TrimSpace(m.Text.Body) == "":
		return errors.New("text message without a body")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"status": msg})
}

// ParseTenants reads "phone_number_id=tenant,..." (for example
// RETRYSAFE_WHATSAPP_TENANTS) into Config.Tenants. A phone number id may
// appear once.
func ParseTenants(s string) (map[string]string, error) {
	out := map[string]string{}
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		id, tenant, ok := strings.Cut(entry, "=")
		id, tenant = strings.TrimSpace(id), strings.TrimSpace(tenant)
		if !ok || id == "" || tenant == "" {
			return nil, fmt.Errorf("%w: tenants entry %d: want phone_number_id=tenant", ErrConfig, i+1)
		}
		if _, dup := out[id]; dup {
			return nil, fmt.Errorf("%w: tenants entry %d: phone_number_id %s mapped twice", ErrConfig, i+1, id)
		}
		out[id] = tenant
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no phone_number_id=tenant entries", ErrConfig)
	}
	return out, nil
}
