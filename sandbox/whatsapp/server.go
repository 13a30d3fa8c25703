package whatsapp

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/sandbox/fault"
)

// maxBody bounds a send request; the Cloud API's own limit is far below.
const maxBody = 1 << 20

// Config configures a Server. The zero Config accepts any bearer token and
// injects no fault unless a request asks for one.
type Config struct {
	// Token, when set, is the only bearer token accepted. Empty accepts any
	// non-empty token.
	Token string
	// Fault applies to POST requests that carry no X-Sandbox-Fault header,
	// with probability FaultRate (0 means 1).
	Fault     fault.Spec
	FaultRate float64
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if !(c.FaultRate >= 0 && c.FaultRate <= 1) {
		return fmt.Errorf("whatsapp: FaultRate %v outside 0..1", c.FaultRate)
	}
	return nil
}

// Message is one accepted message, as listed by GET /_sandbox/messages.
type Message struct {
	ID             string          `json:"id"` // wamid....
	To             string          `json:"to"` // as the caller wrote it
	WaID           string          `json:"wa_id"`
	Type           string          `json:"type"` // template or text
	Template       string          `json:"template,omitempty"`
	Language       string          `json:"language,omitempty"`
	Components     json.RawMessage `json:"components,omitempty"`
	Text           string          `json:"text,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	PhoneNumberID  string          `json:"phone_number_id,omitempty"` // Cloud API path only
	UserID         string          `json:"user_id,omitempty"`         // "recipient": a business-scoped user id
	GroupID        string          `json:"group_id,omitempty"`        // recipient_type "group"
	CallbackData   string          `json:"biz_opaque_callback_data,omitempty"`
	Path           string          `json:"path"`
	Status         string          `json:"status"`
	Created        time.Time       `json:"created"`

	owner string // the bearer token that sent it: GET /v1/messages lists by it
	scope string // its key's entry in byKey, "" without a key
}

// stored is the first answer given under one (token, key).
type stored struct {
	fingerprint [32]byte
	body        []byte
}

// Server is the WhatsApp Cloud API stand-in. It is an http.Handler and safe
// for concurrent use.
type Server struct {
	cfg     Config
	log     *slog.Logger
	handler http.Handler

	// One mutex over everything: a send is decided and stored in a single
	// critical section, so concurrent duplicates of a key can never both
	// create a message (and no "in flight" state is needed).
	mu       sync.Mutex
	messages []*Message
	byKey    map[string]*stored
	seq      uint64
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, byKey: map[string]*stored{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", s.send)
	mux.HandleFunc("GET /v1/messages", s.lookup)
	mux.HandleFunc("POST /{version}/{phone}/messages", s.send)
	mux.HandleFunc("GET /_sandbox/messages", s.list)
	mux.HandleFunc("DELETE /_sandbox/messages", s.reset)
	mux.HandleFunc("POST /_sandbox/messages/{id}/status", s.statusHandler)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	inj := fault.Injector{Default: cfg.Fault, Rate: cfg.FaultRate,
		Applies: func(r *http.Request) bool { return r.Method == http.MethodPost }}
	s.handler = inj.Wrap(mux)
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Messages returns a copy of the accepted messages, oldest first.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, len(s.messages))
	for i, m := range s.messages {
		out[i] = *m
	}
	return out
}

// Reset forgets every message and key.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages, s.byKey = nil, map[string]*stored{}
}

// token returns the caller's bearer token, or "" when it must be refused.
func (s *Server) token(r *http.Request) string {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	tok = strings.TrimSpace(tok)
	if !ok || tok == "" || (s.cfg.Token != "" && tok != s.cfg.Token) {
		return ""
	}
	return tok
}

var (
	reVersion  = regexp.MustCompile(`^v\d{1,3}(\.\d{1,3})?$`)
	reTemplate = regexp.MustCompile(`^[a-z0-9_]{1,512}$`)
	reLanguage = regexp.MustCompile(`^[a-z]{2,3}(_[A-Z]{2})?$`)
	reBSUID    = regexp.MustCompile(`^[A-Z]{2}\.(ENT\.)?[A-Za-z0-9]{1,128}$`)
)

// sendRequest holds both shapes: the tools' {"to","template","language"}
// and the Cloud API's {"messaging_product","to","type","template":{...}}.
type sendRequest struct {
	MessagingProduct *string         `json:"messaging_product"`
	RecipientType    string          `json:"recipient_type"`
	To               string          `json:"to"`
	Recipient        string          `json:"recipient"`
	CallbackData     string          `json:"biz_opaque_callback_data"`
	Type             string          `json:"type"`
	Template         json.RawMessage `json:"template"`
	Language         string          `json:"language"`
	Text             *struct {
		Body       string `json:"body"`
		PreviewURL bool   `json:"preview_url"`
	} `json:"text"`
}

type cloudTemplate struct {
	Name     string `json:"name"`
	Language struct {
		Code string `json:"code"`
	} `json:"language"`
	Components json.RawMessage `json:"components"`
}

func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	phone := r.PathValue("phone")
	cloud := phone != ""
	if cloud && !reVersion.MatchString(r.PathValue("version")) {
		writeGraphError(w, http.StatusBadRequest, 2500, "Unknown path components: /"+r.PathValue("version"))
		return
	}
	tok := s.token(r)
	if tok == "" {
		writeGraphError(w, http.StatusUnauthorized, 190, "Invalid OAuth access token - Cannot parse access token")
		return
	}
	key, hasKey, err := idempotency.ParseKey(r)
	switch {
	case err != nil:
		idempotency.WriteProblem(w, idempotency.Problem{Type: idempotency.ProblemKeyInvalid, Title: "Invalid Idempotency-Key",
			Status: http.StatusBadRequest, Detail: err.Error()}, 0)
		return
	case !hasKey && !cloud:
		// The tools' endpoint promises deduplication, so it cannot work
		// without a key; the Cloud API path, like the real one, can.
		idempotency.WriteProblem(w, idempotency.Problem{Type: idempotency.ProblemKeyMissing, Title: "Idempotency-Key header missing",
			Status: http.StatusBadRequest, Detail: "POST /v1/messages requires an Idempotency-Key header."}, 0)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeGraphError(w, http.StatusRequestEntityTooLarge, 100, "(#100) The request body could not be read or is too large")
		return
	}
	msg, perr := parseSend(body, cloud)
	if perr != "" {
		writeGraphError(w, http.StatusBadRequest, 100, "(#100) "+perr)
		return
	}
	msg.PhoneNumberID, msg.Path, msg.IdempotencyKey, msg.owner = phone, r.URL.Path, key, tok
	fp := idempotency.Fingerprint(r.Method, r.URL.Path, r.URL.RawQuery, body)

	s.mu.Lock()
	scope := tok + "\x00" + key
	if hasKey {
		if st, ok := s.byKey[scope]; ok {
			s.mu.Unlock()
			if st.fingerprint != fp {
				idempotency.WriteProblem(w, idempotency.Problem{Type: idempotency.ProblemKeyReused,
					Title: "Idempotency-Key reused with a different request", Status: http.StatusUnprocessableEntity,
					Detail: "This key was first used with a different path or body. Use a new key for a new message."}, 0)
				return
			}
			w.Header().Set(idempotency.HeaderReplayed, "true")
			writeRaw(w, http.StatusOK, st.body)
			return
		}
	}
	s.seq++
	msg.ID = wamid(msg.WaID+msg.UserID+msg.GroupID, s.seq)
	msg.Status = "accepted"
	msg.Created = time.Now().UTC()
	out, _ := json.Marshal(cloudResponse(msg))
	s.messages = append(s.messages, msg)
	if hasKey {
		s.byKey[scope] = &stored{fingerprint: fp, body: out}
		msg.scope = scope
	}
	s.mu.Unlock()

	s.log.Info("whatsapp: message accepted", "id", msg.ID, "type", msg.Type, "template", msg.Template, "keyed", hasKey)
	writeRaw(w, http.StatusOK, out)
}

// parseSend validates a body of either shape; the string is the error.
func parseSend(body []byte, cloud bool) (*Message, string) {
	var req sendRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return nil, "Invalid JSON body: " + err.Error()
	}
	if req.MessagingProduct != nil && *req.MessagingProduct != "whatsapp" {
		return nil, `Invalid parameter: messaging_product must be "whatsapp"`
	}
	if cloud && req.MessagingProduct == nil {
		return nil, "The parameter messaging_product is required."
	}
	if req.RecipientType != "" && req.RecipientType != "individual" && req.RecipientType != "group" {
		return nil, `Invalid parameter: recipient_type must be "individual" or "group"`
	}
	if len(req.CallbackData) > 512 {
		return nil, "Invalid parameter: biz_opaque_callback_data is at most 512 characters"
	}
	m := &Message{To: req.To, CallbackData: req.CallbackData}
	switch {
	case req.RecipientType == "group":
		if req.To == "" || req.Recipient != "" {
			return nil, "Invalid parameter: a group message needs to (the group id) and no recipient"
		}
		m.GroupID = req.To
	case req.Recipient != "" && req.To == "": // with both, to takes precedence
		if !reBSUID.MatchString(req.Recipient) {
			return nil, "Invalid parameter: recipient must be a business-scoped user id"
		}
		m.UserID, m.To = req.Recipient, req.Recipient
	default:
		waID, ok := recipient(req.To)
		if !ok {
			return nil, "Invalid parameter: to must be a phone number with 8 to 15 digits"
		}
		m.WaID = waID
	}
	typ := req.Type
	if typ == "" {
		switch {
		case len(req.Template) > 0:
			typ = "template"
		case req.Text != nil:
			typ = "text"
		}
	}
	switch typ {
	case "template":
		m.Type = "template"
		var name string
		if err := json.Unmarshal(req.Template, &name); err == nil {
			// The tools' flat shape.
			m.Template, m.Language = strings.TrimSpace(name), req.Language
			if m.Language == "" {
				m.Language = "pt_BR"
			}
		} else {
			var t cloudTemplate
			if err := json.Unmarshal(req.Template, &t); err != nil {
				return nil, "Invalid parameter: template must be a name or a template object"
			}
			m.Template, m.Language, m.Components = t.Name, t.Language.Code, t.Components
			if m.Language == "" {
				return nil, "The parameter template.language.code is required."
			}
		}
		if !reTemplate.MatchString(m.Template) {
			return nil, "Invalid parameter: template name must be lower-case letters, digits and underscores"
		}
		if !reLanguage.MatchString(m.Language) {
			return nil, "Invalid parameter: template language must look like pt_BR"
		}
	case "text":
		m.Type = "text"
		if req.Text == nil || strings.TrimSpace(req.Text.Body) == "" || len(req.Text.Body) > 4096 {
			return nil, "The parameter text.body is required and at most 4096 characters."
		}
		m.Text = req.Text.Body
	case "":
		return nil, "The parameter type is required (template or text)."
	default:
		return nil, fmt.Sprintf("Invalid parameter: type %q is not supported by the sandbox (template or text)", typ)
	}
	return m, ""
}

// recipient reduces a phone number to the digits WhatsApp calls the wa_id.
func recipient(to string) (string, bool) {
	var d strings.Builder
	for i, c := range strings.TrimSpace(to) {
		switch {
		case c >= '0' && c <= '9':
			d.WriteRune(c)
		case c == '+' && i == 0, c == ' ', c == '-', c == '(', c == ')', c == '.':
		default:
			return "", false
		}
	}
	n := d.Len()
	return d.String(), n >= 8 && n <= 15
}

type cloudAnswer struct {
	MessagingProduct string `json:"messaging_product"`
	Contacts         []struct {
		Input string `json:"input"`
		WaID  string `json:"wa_id"`
	} `json:"contacts"`
	Messages []struct {
		ID            string `json:"id"`
		MessageStatus string `json:"message_status,omitempty"`
	} `json:"messages"`
}

// cloudResponse is the Cloud API's answer to a send, which both paths give.
func cloudResponse(m *Message) cloudAnswer {
	var a cloudAnswer
	a.MessagingProduct = "whatsapp"
	a.Contacts = append(a.Contacts, struct {
		Input string `json:"input"`
		WaID  string `json:"wa_id"`
	}{m.To, m.WaID})
	status := ""
	if m.Type == "template" {
		status = "accepted" // the Cloud API says so for templates only
	}
	a.Messages = append(a.Messages, struct {
		ID            string `json:"id"`
		MessageStatus string `json:"message_status,omitempty"`
	}{m.ID, status})
	return a
}

// wamid makes an id shaped like the Cloud API's: "wamid." and base64.
func wamid(waID string, seq uint64) string {
	var rnd [8]byte
	rand.Read(rnd[:]) //nolint:errcheck // crypto/rand.Read never fails
	raw := "HBg" + strconv.Itoa(len(waID)) + waID + "FQIAERg" + strconv.FormatUint(seq, 10) + strings.ToUpper(hex.EncodeToString(rnd[:]))
	return "wamid." + base64.RawStdEncoding.EncodeToString([]byte(raw))
}

// lookup is the tools' reconciliation endpoint: the answer stored for a
// key (the same bytes the POST returned), or 404. Without a key it lists
// the caller's messages.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) {
	tok := s.token(r)
	if tok == "" {
		writeGraphError(w, http.StatusUnauthorized, 190, "Invalid OAuth access token - Cannot parse access token")
		return
	}
	key := r.URL.Query().Get("idempotency_key")
	if key == "" {
		mine := []*Message{}
		s.mu.Lock()
		for _, m := range s.messages {
			if m.owner == tok {
				mine = append(mine, m) // immutable once stored
			}
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"data": mine})
		return
	}
	s.mu.Lock()
	st, ok := s.byKey[tok+"\x00"+key]
	s.mu.Unlock()
	if !ok {
		writeGraphError(w, http.StatusNotFound, 100, "(#100) No message was sent with this idempotency key")
		return
	}
	writeRaw(w, http.StatusOK, st.body)
}

// list is for tests and demos: every message, oldest first, optionally
// filtered by ?to= (compared as digits), ?template= and ?idempotency_key=.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	to := ""
	if v := q.Get("to"); v != "" {
		var ok bool
		if to, ok = recipient(v); !ok {
			writeGraphError(w, http.StatusBadRequest, 100, "(#100) to is not a phone number")
			return
		}
	}
	out := []Message{}
	for _, m := range s.Messages() {
		if (to == "" || m.WaID == to) && (q.Get("template") == "" || m.Template == q.Get("template")) &&
			(q.Get("idempotency_key") == "" || m.IdempotencyKey == q.Get("idempotency_key")) {
			out = append(out, m)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": out})
}

func (s *Server) reset(w http.ResponseWriter, _ *http.Request) {
	s.Reset()
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeRaw(w, status, b.Bytes())
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // the client may be gone
}

// writeGraphError answers in the Graph API's error shape.
func writeGraphError(w http.ResponseWriter, status, code int, msg string) {
	var trace [9]byte
	rand.Read(trace[:]) //nolint:errcheck
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"message":    msg,
		"type":       "OAuthException",
		"code":       code,
		"fbtrace_id": base64.RawURLEncoding.EncodeToString(trace[:]),
	}})
}

// Status statuses.
const (
	StatusSent      = "sent"
	StatusDelivered = "delivered"
	StatusRead      = "read"
	StatusFailed    = "failed"
)

// errorTitles are the titles Meta gives the error codes a test may ask for.
var errorTitles = map[int]string{
	131000: "Something went wrong",
	131026: "Message undeliverable",
	131047: "Re-engagement message",
	131049: "This message was not delivered to maintain healthy ecosystem engagement.",
	131056: "(Business Account, Consumer Account) pair rate limit hit",
}

// Status moves message id to status and returns the status webhook Meta
// would send about it, shaped as the status messages webhook reference
// documents it (statuses[] with id, status, timestamp, recipient_id or
// recipient_user_id, biz_opaque_callback_data when the send carried it, and
// errors[] for failed). A failed message releases its Idempotency-Key: it
// was never delivered, so a send with the same key goes out again.
// phoneNumberID fills metadata when the message came by /v1/messages.
func (s *Server) Status(id, status string, code int, phoneNumberID string) ([]byte, error) {
	switch status {
	case StatusSent, StatusDelivered, StatusRead, StatusFailed:
	default:
		return nil, fmt.Errorf("whatsapp: status %q: want sent, delivered, read or failed", status)
	}
	s.mu.Lock()
	var m *Message
	for _, x := range s.messages {
		if x.ID == id {
			m = x
		}
	}
	if m == nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("whatsapp: no message %q", id)
	}
	m.Status = status
	if status == StatusFailed && m.scope != "" {
		delete(s.byKey, m.scope)
		m.scope = ""
	}
	snap := *m
	s.mu.Unlock()
	if snap.PhoneNumberID != "" {
		phoneNumberID = snap.PhoneNumberID
	}
	st := map[string]any{"id": snap.ID, "status": status, "timestamp": strconv.FormatInt(time.Now().Unix(), 10)}
	switch {
	case snap.GroupID != "":
		st["recipient_id"], st["recipient_type"] = snap.GroupID, "group"
	case snap.UserID != "":
		st["recipient_user_id"] = snap.UserID
	default:
		st["recipient_id"] = snap.WaID
	}
	if snap.CallbackData != "" {
		st["biz_opaque_callback_data"] = snap.CallbackData
	}
	value := map[string]any{
		"messaging_product": "whatsapp",
		"metadata":          map[string]string{"display_phone_number": "15550783881", "phone_number_id": phoneNumberID},
	}
	if status == StatusFailed {
		title := errorTitles[code]
		if title == "" {
			title = "Error"
		}
		st["errors"] = []any{map[string]any{"code": code, "title": title, "message": title,
			"error_data": map[string]string{"details": title},
			"href":       "https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/"}}
	} else {
		st["pricing"] = map[string]any{"billable": true, "pricing_model": "PMP", "category": "service", "type": "free_customer_service"}
		if snap.WaID != "" || snap.UserID != "" {
			c := map[string]any{"profile": map[string]string{"name": "Cliente"}}
			if snap.WaID != "" {
				c["wa_id"] = snap.WaID
			}
			if snap.UserID != "" {
				c["user_id"] = snap.UserID
			}
			value["contacts"] = []any{c}
		}
	}
	value["statuses"] = []any{st}
	return json.Marshal(map[string]any{"object": "whatsapp_business_account", "entry": []any{map[string]any{
		"id": "102290129340398", "changes": []any{map[string]any{"field": "messages", "value": value}},
	}}})
}

// statusHandler is POST /_sandbox/messages/{id}/status
// {"status":"failed","code":131000,"phone_number_id":"..."}: the status
// webhook body, for a test to deliver.
func (s *Server) statusHandler(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Status        string `json:"status"`
		Code          int    `json:"code"`
		PhoneNumberID string `json:"phone_number_id"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
		writeGraphError(w, http.StatusBadRequest, 100, "(#100) Invalid JSON body")
		return
	}
	body, err := s.Status(r.PathValue("id"), req.Status, req.Code, req.PhoneNumberID)
	if err != nil {
		writeGraphError(w, http.StatusBadRequest, 100, "(#100) "+err.Error())
		return
	}
	writeRaw(w, http.StatusOK, body)
}
