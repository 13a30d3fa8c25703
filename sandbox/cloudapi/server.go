package cloudapi

import (
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
