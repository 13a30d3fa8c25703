package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/tools"
)

// ReplyToolName is the tool the agent's replies go out through. The system
// calls it, never the model.
const ReplyToolName = "whatsapp.send_text"

// ReplyToolSchema is the reply tool's field schema. The intent_ref (the
// inbound message id + ":reply") is in the key, so the key is fixed by
// (tenant, message, "reply") and the first recorded reply. Exactly one
// recipient field is set: to (a phone number), user_id (a business-scoped
// user id, for a customer whose number WhatsApp withholds) or group_id;
// and either body (free text) or template. reply_key is set on a resend
// only: the key of the reply it sends again, which the provider then sees
// instead of the resend's own.
func ReplyToolSchema() derive.Schema {
	return derive.Schema{Action: ReplyToolName, Version: 2, Fields: []derive.Field{
		{Name: "to", Rule: derive.RulePhone, Optional: true, Description: "recipient phone number, E.164"},
		{Name: "user_id", Rule: derive.RuleText, Optional: true, Description: "recipient business-scoped user id (BSUID)"},
		{Name: "group_id", Rule: derive.RuleText, Optional: true, Description: "recipient group"},
		{Name: "body", Rule: derive.RuleText, Optional: true, Description: "message text (free text, or the template's body parameter)"},
		{Name: "template", Rule: derive.RuleTemplate, Optional: true, Description: "approved template name, outside the service window"},
		{Name: "language", Rule: derive.RuleText, Optional: true, Description: "template language"},
		{Name: "reply_key", Rule: derive.RuleText, Optional: true, Description: "the key of the reply a resend sends again"},
		{Name: tools.RefField, Rule: derive.RuleRef, Description: "intent reference (filled in by the system)"},
	}}
}

// NewWhatsAppText returns the reply tool: a WhatsApp message in the Cloud
// API's shape, free text inside the customer-service window or an approved
// template outside it, sent with the frozen key as Idempotency-Key and as
// biz_opaque_callback_data (which every status webhook of the message
// carries back):
//
//	POST {base}/v1/messages   Authorization: Bearer <token>, Idempotency-Key: <key>
//	{"messaging_product":"whatsapp","recipient_type":"individual","to":"+55...",
//	 "type":"text","text":{"body":"...","preview_url":false},"biz_opaque_callback_data":"<key>"}
//	 (or "recipient":"US.…" for a BSUID, "recipient_type":"group","to":"<group id>",
//	  "type":"template","template":{"name","language":{"code"},"components"})  → 2xx JSON
//	GET  {base}/v1/messages?idempotency_key=K → the message, or 404 (Lookup)
//
// A Graph API error answer is read for its code: 131056 (pair rate limit),
// 130429, 131000 and 131016 nothing was sent and it may be sent later
// (transient, code "wa_<n>"); any other 4xx is definitive.
//
// cfg.Path and cfg.LookupPath override the paths ("-" disables Lookup).
func NewWhatsAppText(cfg tools.HTTPConfig) (*tools.Func, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: reply tool BaseURL %q is not an http(s) URL", ErrConfig, cfg.BaseURL)
	}
	s := &textSender{base: strings.TrimRight(cfg.BaseURL, "/"), path: cfg.Path, lookup: cfg.LookupPath, token: cfg.Token, client: cfg.Client}
	if s.path == "" {
		s.path = "/v1/messages"
	}
	switch s.lookup {
	case "":
		s.lookup = s.path
	case "-":
		s.lookup = ""
	}
	if s.client == nil {
		s.client = tools.NewClient()
	}
	desc := cfg.Description
	if desc == "" {
		desc = "Send a WhatsApp text message to the customer (used by the system for replies)."
	}
	f := &tools.Func{
		ToolName:        ReplyToolName,
		ToolDescription: desc,
		Fields:          ReplyToolSchema(),
		System:          []string{tools.RefField},
		HonoursKey:      true,
		Exec:            s.send,
	}
	if s.lookup != "" {
		f.Look = s.find
	}
	return f, nil
}

// textSender speaks the WhatsApp text API.
type textSender struct {
	base, path, lookup, token string
	client                    *http.Client
}

// maxResponse bounds what is read (and stored) from the provider.
const maxResponse = 1 << 20

// sendBody is the Cloud API's send request.
type sendBody struct {
	Product   string `json:"messaging_product"`
	Recipient string `json:"recipient_type"`
	To        string `json:"to,omitempty"`
	UserID    string `json:"recipient,omitempty"`
	Type      string `json:"type"`
	Text      *struct {
		Body       string `json:"body"`
		PreviewURL bool   `json:"preview_url"`
	} `json:"text,omitempty"`
	Template *sendTemplate `json:"template,omitempty"`
	Callback string        `json:"biz_opaque_callback_data,omitempty"`
}

type sendTemplate struct {
	Name     string `json:"name"`
	Language struct {
		Code string `json:"code"`
	} `json:"language"`
	Components []map[string]any `json:"components,omitempty"`
}

func buildSend(key string, m map[string]string) (sendBody, error) {
	b := sendBody{Product: "whatsapp", Recipient: "individual", Callback: key}
	if rk := m["reply_key"]; rk != "" {
		b.Callback = rk
	}
	n := 0
	if m["to"] != "" {
		b.To, n = m["to"], n+1
	}
	if m["user_id"] != "" {
		b.UserID, n = m["user_id"], n+1
	}
	if m["group_id"] != "" {
		b.Recipient, b.To, n = "group", m["group_id"], n+1
	}
	if n != 1 {
		return b, errors.New("want exactly one of to, user_id and group_id")
	}
	switch {
	case m["template"] != "":
		t := &sendTemplate{Name: m["template"]}
		t.Language.Code = m["language"]
		if t.Language.Code == "" {
			t.Language.Code = "pt_BR"
		}
		if m["body"] != "" {
			t.Components = []map[string]any{{"type": "body", "parameters": []map[string]string{{"type": "text", "text": m["body"]}}}}
		}
		b.Type, b.Template = "template", t
	case m["body"] != "":
		b.Type = "text"
		b.Text = &struct {
			Body       string `json:"body"`
			PreviewURL bool   `json:"preview_url"`
		}{Body: m["body"]}
	default:
		return b, errors.New("want a body or a template")
	}
	return b, nil
}

func (s *textSender) send(ctx context.Context, key string, p derive.Payload) (json.RawMessage, error) {
	body, err := buildSend(key, p.Map())
	if err != nil {
		return nil, tools.Definitive("bad_reply", err.Error(), err)
	}
	// The provider dedupes by the reply's key: a resend carries it too.
	idem := key
	if body.Callback != "" {
		idem = body.Callback
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, tools.Definitive("encode", "could not encode the message", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+s.path, bytes.NewReader(b))
	if err != nil {
		return nil, tools.Definitive("request", "could not build the request", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idem)
	return s.do(req)
}

func (s *textSender) find(ctx context.Context, key string) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+s.lookup+"?idempotency_key="+url.QueryEscape(key), nil)
	if err != nil {
		return nil, tools.Definitive("request", "could not build the request", err)
	}
	out, err := s.do(req)
	var te *tools.Error
	if errors.As(err, &te) && te.Status == http.StatusNotFound {
		return nil, fmt.Errorf("%w (%s)", tools.ErrNotFound, te.Code)
	}
	return out, err
}

func (s *textSender) do(req *http.Request) (json.RawMessage, error) {
	req.Header.Set("Accept", "application/json")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, tools.Classify(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		// The status arrived but not the body: the message may be out.
		ce := tools.Classify(err)
		ce.Status = resp.StatusCode
		ce.Class = tools.ClassUncertain
		return nil, ce
	}
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		if ge := graphError(resp.StatusCode, body); ge != nil {
			return nil, ge
		}
	}
	if err := tools.StatusError(resp.StatusCode); err != nil {
		return nil, err
	}
	if !json.Valid(body) {
		return nil, tools.Uncertain("bad_response", fmt.Sprintf("HTTP %d with a body that is not JSON", resp.StatusCode), nil)
	}
	return body, nil
}

// graphRetryable are the Graph API error codes of a send that was not
// accepted and may be accepted later.
var graphRetryable = map[int]bool{CodePairRateLimit: true, 130429: true, 131000: true, 131016: true}

// graphError reads a Graph API error answer ({"error":{"code":131056,...}}),
// or nil when the body is not one.
func graphError(status int, body []byte) error {
	var v struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil || v.Error == nil || v.Error.Code == 0 {
		return nil
	}
	code := graphCode(v.Error.Code)
	msg := fmt.Sprintf("HTTP %d, Graph API error %d", status, v.Error.Code)
	if graphRetryable[v.Error.Code] {
		e := tools.Transient(code, msg, nil).(*tools.Error)
		e.Status = status
		return e
	}
	e := tools.Definitive(code, msg, nil).(*tools.Error)
	e.Status = status
	return e
}
