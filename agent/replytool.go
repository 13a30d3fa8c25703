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
// (tenant, message, "reply") and the first recorded text.
func ReplyToolSchema() derive.Schema {
	return derive.Schema{Action: ReplyToolName, Version: 2, Fields: []derive.Field{
		{Name: "to", Rule: derive.RulePhone, Description: "recipient phone number, E.164"},
		{Name: "body", Rule: derive.RuleText, Description: "message text"},
		{Name: tools.RefField, Rule: derive.RuleRef, Description: "intent reference (filled in by the system)"},
	}}
}

// NewWhatsAppText returns the reply tool: a free-text WhatsApp message (the
// customer wrote first, so the service window is open and no template is
// needed), sent with the frozen key as Idempotency-Key:
//
//	POST {base}/v1/messages   Authorization: Bearer <token>, Idempotency-Key: <key>
//	{"messaging_product":"whatsapp","recipient_type":"individual","to":"+55...",
//	 "type":"text","text":{"body":"...","preview_url":false}}  → 2xx JSON
//	GET  {base}/v1/messages?idempotency_key=K → the message, or 404 (Lookup)
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
		s.client = &http.Client{}
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

func (s *textSender) send(ctx context.Context, key string, p derive.Payload) (json.RawMessage, error) {
	m := p.Map()
	type text struct {
		Body       string `json:"body"`
		PreviewURL bool   `json:"preview_url"`
	}
	b, err := json.Marshal(struct {
		Product   string `json:"messaging_product"`
		Recipient string `json:"recipient_type"`
		To        string `json:"to"`
		Type      string `json:"type"`
		Text      text   `json:"text"`
	}{"whatsapp", "individual", m["to"], "text", text{Body: m["body"]}})
	if err != nil {
		return nil, tools.Definitive("encode", "could not encode the message", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+s.path, bytes.NewReader(b))
	if err != nil {
		return nil, tools.Definitive("request", "could not build the request", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
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
	if err := tools.StatusError(resp.StatusCode); err != nil {
		return nil, err
	}
	if !json.Valid(body) {
		return nil, tools.Uncertain("bad_response", fmt.Sprintf("HTTP %d with a body that is not JSON", resp.StatusCode), nil)
	}
	return body, nil
}
