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
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/internal/pairs"
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
	// Delivery decides what a failed reply status leads to. Zero:
	// agent.DefaultDelivery().
	Delivery agent.DeliveryPolicy
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
	batch, skipped, err := h.parse(body)
	if err != nil {
		h.log.Warn("whatsapp: malformed payload", "error", err)
		writeJSON(w, http.StatusBadRequest, "malformed payload")
		return
	}
	if len(batch.Messages) == 0 && len(batch.Ignored) == 0 && len(batch.Statuses) == 0 {
		writeJSON(w, http.StatusOK, "ok")
		return
	}
	// Not the request's context alone: a provider that hangs up must not
	// roll back a delivery half way (it would redeliver anyway, but the
	// bound keeps a stuck database from pinning handlers).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.cfg.StoreTimeout)
	defer cancel()
	res, err := agent.ReceiveBatch(ctx, h.cfg.DB, h.cfg.Queue, batch, &agent.ReceiveOpts{Delivery: h.cfg.Delivery})
	if err != nil {
		h.log.Error("whatsapp: store failed; the provider will redeliver", "messages", len(batch.Messages), "error", err)
		writeJSON(w, http.StatusInternalServerError, "could not store the messages")
		return
	}
	for _, m := range batch.Messages {
		h.log.Info("whatsapp: message received", "tenant", m.Tenant, "message_id", m.MessageID, "kind", m.Kind)
	}
	for _, ig := range batch.Ignored {
		h.log.Info("whatsapp: message recorded, not answered", "tenant", ig.Tenant, "message_id", ig.MessageID, "type", ig.Type, "reason", ig.Reason)
	}
	h.log.Info("whatsapp: delivery stored", "messages", len(batch.Messages), "new", res.New, "duplicates", res.Duplicates,
		"ignored", len(batch.Ignored), "statuses", len(batch.Statuses), "statuses_merged", res.Statuses,
		"resends", res.Resends, "review", res.Review, "skipped", skipped)
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

// payload is the part of the webhook's shape this handler reads. Messages
// are kept raw so that one that does not decode is recorded alone.
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
				Contacts []contact         `json:"contacts"`
				Messages []json.RawMessage `json:"messages"`
				Statuses []json.RawMessage `json:"statuses"`
			} `json:"value"`
		} `json:"changes"`
	} `json:"entry"`
}

// contact is one entry of value.contacts: wa_id is left out for a user
// whose number WhatsApp withholds (a username); user_id is the
// business-scoped user id (BSUID).
type contact struct {
	WaID   string `json:"wa_id"`
	UserID string `json:"user_id"`
}

type message struct {
	ID         string `json:"id"`
	From       string `json:"from"`
	FromUserID string `json:"from_user_id"`
	GroupID    string `json:"group_id"`
	Timestamp  string `json:"timestamp"`
	Type       string `json:"type"`
	Text       *struct {
		Body string `json:"body"`
	} `json:"text"`
	Button *struct {
		Payload string `json:"payload"`
		Text    string `json:"text"`
	} `json:"button"`
	Interactive *struct {
		Type        string `json:"type"`
		ButtonReply *struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		} `json:"button_reply"`
		ListReply *struct {
			ID          string `json:"id"`
			Title       string `json:"title"`
			Description string `json:"description"`
		} `json:"list_reply"`
	} `json:"interactive"`
	Image    *media `json:"image"`
	Video    *media `json:"video"`
	Document *media `json:"document"`
}

type media struct {
	Caption string `json:"caption"`
}

type status struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	Timestamp    string `json:"timestamp"`
	CallbackData string `json:"biz_opaque_callback_data"`
	Errors       []struct {
		Code int `json:"code"`
	} `json:"errors"`
}

// parse reads a delivery into what agent.ReceiveBatch stores. Only a body
// that is not the webhook's JSON at all is an error; a message that cannot
// be read is recorded as ignored with the reason, so that it never costs
// the other messages of the batch their delivery.
func (h *Handler) parse(body []byte) (agent.Batch, int, error) {
	var (
		p       payload
		b       agent.Batch
		skipped int
	)
	if err := json.Unmarshal(body, &p); err != nil {
		return b, 0, fmt.Errorf("not the webhook JSON: %w", err)
	}
	if p.Object == "" && p.Entry == nil {
		return b, 0, errors.New("no object and no entry")
	}
	for _, e := range p.Entry {
		for _, c := range e.Changes {
			v := c.Value
			if c.Field != "messages" || (len(v.Messages) == 0 && len(v.Statuses) == 0) {
				skipped++ // templates, account updates, user_id_update...
				continue
			}
			pnid := v.Metadata.PhoneNumberID
			tenant, ok := h.cfg.Tenants[pnid]
			if !ok {
				h.log.Warn("whatsapp: event for a number no tenant owns, ignored", "phone_number_id", pnid,
					"messages", len(v.Messages), "statuses", len(v.Statuses))
				skipped += len(v.Messages) + len(v.Statuses)
				continue
			}
			for _, raw := range v.Messages {
				in, ig := readMessage(tenant, pnid, raw, v.Contacts)
				if ig != nil {
					b.Ignored = append(b.Ignored, *ig)
					continue
				}
				b.Messages = append(b.Messages, *in)
			}
			for _, raw := range v.Statuses {
				var st status
				if json.Unmarshal(raw, &st) != nil {
					skipped++
					continue
				}
				as := agent.Status{Tenant: tenant, MessageID: st.ID, Status: st.Status, At: unixTime(st.Timestamp), CallbackData: st.CallbackData}
				if len(st.Errors) > 0 {
					as.ErrorCode = st.Errors[0].Code
				}
				b.Statuses = append(b.Statuses, as)
			}
		}
	}
	return b, skipped, nil
}

// readMessage returns the message to answer, or its ignored record.
func readMessage(tenant, pnid string, raw json.RawMessage, contacts []contact) (*agent.Inbound, *agent.Ignored) {
	var m message
	if err := json.Unmarshal(raw, &m); err != nil {
		sum := sha256.Sum256(raw)
		return nil, &agent.Ignored{Tenant: tenant, MessageID: "sha256:" + hex.EncodeToString(sum[:]), Type: "?",
			Reason: "not a message object", PhoneNumberID: pnid}
	}
	id := m.ID
	if id == "" || len(id) > 255 {
		sum := sha256.Sum256(raw)
		id = "sha256:" + hex.EncodeToString(sum[:])
	}
	ignore := func(typ, reason string) (*agent.Inbound, *agent.Ignored) {
		if typ == "" {
			typ = "?"
		}
		return nil, &agent.Ignored{Tenant: tenant, MessageID: id, Type: typ, Reason: reason, PhoneNumberID: pnid}
	}
	if id != m.ID {
		return ignore(m.Type, "message id missing or longer than 255 bytes")
	}
	kind, text, why := messageText(&m)
	if why != "" {
		return ignore(kind, why)
	}
	if strings.TrimSpace(text) == "" {
		return ignore(kind, "no text")
	}
	in := &agent.Inbound{Tenant: tenant, MessageID: m.ID, PhoneNumberID: pnid, Body: text, Kind: kind, SentAt: unixTime(m.Timestamp),
		SenderWaID: m.From, SenderUserID: m.FromUserID, GroupID: m.GroupID}
	if in.SenderUserID == "" && len(contacts) == 1 {
		// The sender's BSUID is in contacts[] when the message does not
		// repeat it; only one contact is unambiguous.
		in.SenderUserID = contacts[0].UserID
	}
	if why := identify(in); why != "" {
		return ignore(kind, why)
	}
	return in, nil
}

// messageText is the text the agent reads in m and the kind it records
// ("text", "button", "interactive.button_reply", "image" ...), or why the
// message is ignored.
func messageText(m *message) (kind, text, ignored string) {
	kind = m.Type
	switch m.Type {
	case "text":
		if m.Text != nil {
			text = m.Text.Body
		}
	case "button": // a template's quick-reply button
		if m.Button != nil {
			text = m.Button.Text
			if text == "" {
				text = m.Button.Payload
			}
		}
	case "interactive":
		if m.Interactive == nil {
			return kind, "", "interactive message without its object"
		}
		kind = "interactive." + m.Interactive.Type
		switch {
		case m.Interactive.ButtonReply != nil:
			text = m.Interactive.ButtonReply.Title
		case m.Interactive.ListReply != nil:
			text = m.Interactive.ListReply.Title
			if d := strings.TrimSpace(m.Interactive.ListReply.Description); d != "" {
				text += "\n" + d
			}
		default:
			return kind, "", "interactive reply the agent does not read"
		}
	case "image", "video", "document":
		var md *media
		switch m.Type {
		case "image":
			md = m.Image
		case "video":
			md = m.Video
		default:
			md = m.Document
		}
		if md == nil || strings.TrimSpace(md.Caption) == "" {
			return kind, "", "media without a caption"
		}
		text = md.Caption
	default:
		return kind, "", "message type the agent does not read"
	}
	return kind, text, ""
}

// identify checks the sender's ids and sets the conversation the message
// belongs to (a group, else the WhatsApp id, else the business-scoped user
// id), or says why the message is ignored.
func identify(in *agent.Inbound) (ignored string) {
	switch {
	case in.SenderWaID != "" && !isWaID(in.SenderWaID):
		return "sender is not a WhatsApp id (8 to 15 digits)"
	case in.SenderUserID != "" && !reBSUID.MatchString(in.SenderUserID):
		return "sender's user id is not a business-scoped user id"
	case in.GroupID != "" && (len(in.GroupID) > 128 || strings.ContainsAny(in.GroupID, " \t\n")):
		return "malformed group id"
	}
	switch {
	case in.GroupID != "":
		in.ConversationID = "group:" + in.GroupID
	case in.SenderWaID != "":
		in.ConversationID = in.SenderWaID
	case in.SenderUserID != "":
		in.ConversationID = in.SenderUserID
	default:
		return "no sender (neither from nor from_user_id)"
	}
	return ""
}

// reBSUID is a business-scoped user id: an ISO country code, a period and
// up to 128 alphanumeric characters ("US.13491208655302741918"); a parent
// BSUID has "ENT." after the country code.
var reBSUID = regexp.MustCompile(`^[A-Z]{2}\.(ENT\.)?[A-Za-z0-9]{1,128}$`)

func isWaID(s string) bool {
	return len(s) >= 8 && len(s) <= 15 && strings.Trim(s, "0123456789") == ""
}

func unixTime(ts string) time.Time {
	if secs, err := strconv.ParseInt(ts, 10, 64); err == nil && secs > 0 {
		return time.Unix(secs, 0).UTC()
	}
	return time.Time{}
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
	m, err := pairs.Map(s, "phone_number_id=tenant")
	if err != nil {
		return nil, fmt.Errorf("%w: tenants: %w", ErrConfig, err)
	}
	return m, nil
}
