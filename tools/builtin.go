package tools

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/retrysafe/retrysafe/derive"
)

// Built-in tool names.
const (
	PixChargeName      = "pix.charge"
	WhatsAppName       = "whatsapp.send_template"
	EmailSendName      = "email.send"
	builtinRuleVersion = 3
	// idMaxLen caps ids (customer ids, template names): a sane bound, so
	// that a 900 KB value is refused, not frozen.
	idMaxLen = 256
	// pixDescriptionMax is the PSP's description limit (API Pix
	// solicitacaoPagador: 140 characters); the description sent is
	// pixDescriptionPrefix + intent_ref.
	pixDescriptionMax    = 140
	pixDescriptionPrefix = "retrysafe "
)

// EarlierSchemas is implemented by tools whose schema moved to a newer rule
// version: intents frozen under an older version keep it (an amendment or
// a redelivery derives again under the frozen version), so the Registry's
// Deriver registers these schemas too.
type EarlierSchemas interface {
	EarlierSchemas() []derive.Schema
}

// v2 returns s as it was at rule version 2: the same fields, without the
// version-3 limits.
func v2(s derive.Schema) derive.Schema {
	s.Version = 2
	fields := make([]derive.Field, len(s.Fields))
	for i, f := range s.Fields {
		f.MaxLen = 0
		if f.Name == "customer_id" {
			f.Rule = derive.RuleText
		}
		fields[i] = f
	}
	s.Fields = fields
	return s
}

// PixCharge charges a customer through a PSP's Pix API:
//
//	POST {base}/v1/pix/charges   Authorization: Bearer <token>, Idempotency-Key: <key>
//	{"amount_cents":18000,"pix_key":"...","pix_key_type":"cpf","description":"..."}
//	→ 201 (200 with Idempotent-Replayed: true on a replay)
//	{"id","amount_cents","pix_key","status":"paid","idempotency_key","created"}
//
//	GET {base}/v1/pix/charges?idempotency_key=K → the charge, or 404 (Lookup)
type PixCharge struct {
	h    *httpTool
	desc string
}

// NewPixCharge returns the pix.charge tool.
func NewPixCharge(cfg HTTPConfig) (*PixCharge, error) {
	h, err := newHTTPTool(cfg, "/v1/pix/charges", "/v1/pix/charges")
	if err != nil {
		return nil, err
	}
	d := cfg.Description
	if d == "" {
		d = "Charge the customer through Pix. Use only when the customer agreed to pay the amount due."
	}
	return &PixCharge{h: h, desc: d}, nil
}

// PixChargeSchema is pix.charge's field schema (rule version 3). The
// customer id is a reference (no invisible characters); intent_ref is
// bounded by the PSP's 140-character description it is sent in.
func PixChargeSchema() derive.Schema {
	return derive.Schema{Action: PixChargeName, Version: builtinRuleVersion, Fields: []derive.Field{
		{Name: "customer_id", Rule: derive.RuleRef, MaxLen: idMaxLen, Description: "the customer's id in the billing system"},
		{Name: "amount", Rule: derive.RuleMoney, Description: `amount in reais, e.g. "180,00" or 180.00`},
		{Name: "pix_key", Rule: derive.RulePixKey, TypeField: "pix_key_type", MaxLen: 77, Description: "the payer's Pix key (CPF, CNPJ, e-mail, phone or random key), as a string"},
		{Name: "pix_key_type", Rule: derive.RulePixKeyType, Optional: true, Description: "type of the Pix key, when known"},
		{Name: RefField, Rule: derive.RuleRef, MaxLen: pixDescriptionMax - len(pixDescriptionPrefix), Description: "intent reference (filled in by the system)"},
	}}
}

// EarlierSchemas implements EarlierSchemas: pix.charge at rule version 2.
func (t *PixCharge) EarlierSchemas() []derive.Schema { return []derive.Schema{v2(PixChargeSchema())} }

// Name implements Tool.
func (t *PixCharge) Name() string { return PixChargeName }

// Description implements Tool.
func (t *PixCharge) Description() string { return t.desc }

// Schema implements Tool.
func (t *PixCharge) Schema() derive.Schema { return PixChargeSchema() }

// SystemFields implements Tool.
func (t *PixCharge) SystemFields() []string { return []string{RefField} }

// Idempotent implements Tool.
func (t *PixCharge) Idempotent() bool { return true }

// CanLookup implements LookupChecker.
func (t *PixCharge) CanLookup() bool { return t.h.canLookup() }

// Parameters implements Tool.
func (t *PixCharge) Parameters() json.RawMessage { return ParametersFromSchema(t.Schema(), RefField) }

// Execute implements Tool.
func (t *PixCharge) Execute(ctx context.Context, key string, p derive.Payload) (json.RawMessage, error) {
	m := p.Map()
	cents, err := strconv.ParseInt(m["amount"], 10, 64)
	if err != nil {
		return nil, Definitive("bad_payload", "frozen amount is not integer cents", err)
	}
	return t.h.post(ctx, key, struct {
		AmountCents int64  `json:"amount_cents"`
		PixKey      string `json:"pix_key"`
		PixKeyType  string `json:"pix_key_type"`
		Description string `json:"description"`
	}{cents, m["pix_key"], m["pix_key_type"], pixDescriptionPrefix + m[RefField]})
}

// Lookup implements Looker.
func (t *PixCharge) Lookup(ctx context.Context, key string) (json.RawMessage, error) {
	return t.h.lookup(ctx, key)
}

// WhatsAppTemplate sends a WhatsApp template message through an API that
// honours Idempotency-Key:
//
//	POST {base}/v1/messages {"to":"+55...","template":"...","language":"pt_BR"} → 201/200
//	GET  {base}/v1/messages?idempotency_key=K → the message, or 404
type WhatsAppTemplate struct {
	h    *httpTool
	desc string
}

// NewWhatsAppTemplate returns the whatsapp.send_template tool.
func NewWhatsAppTemplate(cfg HTTPConfig) (*WhatsAppTemplate, error) {
	h, err := newHTTPTool(cfg, "/v1/messages", "/v1/messages")
	if err != nil {
		return nil, err
	}
	d := cfg.Description
	if d == "" {
		d = "Send an approved WhatsApp template message to the customer."
	}
	return &WhatsAppTemplate{h: h, desc: d}, nil
}

// WhatsAppTemplateSchema is whatsapp.send_template's field schema.
func WhatsAppTemplateSchema() derive.Schema {
	return derive.Schema{Action: WhatsAppName, Version: builtinRuleVersion, Fields: []derive.Field{
		{Name: "to", Rule: derive.RulePhone, MaxLen: 32, Description: "recipient phone number"},
		{Name: "template", Rule: derive.RuleTemplate, MaxLen: 512, Description: "approved template name"},
		{Name: "language", Rule: derive.RuleText, Optional: true, MaxLen: 16, Description: `template language, e.g. "pt_BR"`},
		{Name: RefField, Rule: derive.RuleRef, MaxLen: idMaxLen, Description: "intent reference (filled in by the system)"},
	}}
}

// EarlierSchemas implements EarlierSchemas: the schema at rule version 2.
func (t *WhatsAppTemplate) EarlierSchemas() []derive.Schema {
	return []derive.Schema{v2(WhatsAppTemplateSchema())}
}

// Name implements Tool.
func (t *WhatsAppTemplate) Name() string { return WhatsAppName }

// Description implements Tool.
func (t *WhatsAppTemplate) Description() string { return t.desc }

// Schema implements Tool.
func (t *WhatsAppTemplate) Schema() derive.Schema { return WhatsAppTemplateSchema() }

// SystemFields implements Tool.
func (t *WhatsAppTemplate) SystemFields() []string { return []string{RefField} }

// Idempotent implements Tool.
func (t *WhatsAppTemplate) Idempotent() bool { return true }

// CanLookup implements LookupChecker.
func (t *WhatsAppTemplate) CanLookup() bool { return t.h.canLookup() }

// Parameters implements Tool.
func (t *WhatsAppTemplate) Parameters() json.RawMessage {
	return ParametersFromSchema(t.Schema(), RefField)
}

// Execute implements Tool.
func (t *WhatsAppTemplate) Execute(ctx context.Context, key string, p derive.Payload) (json.RawMessage, error) {
	m := p.Map()
	lang := m["language"]
	if lang == "" {
		lang = "pt_BR"
	}
	return t.h.post(ctx, key, struct {
		To       string `json:"to"`
		Template string `json:"template"`
		Language string `json:"language"`
	}{m["to"], m["template"], lang})
}

// Lookup implements Looker.
func (t *WhatsAppTemplate) Lookup(ctx context.Context, key string) (json.RawMessage, error) {
	return t.h.lookup(ctx, key)
}

// EmailSend sends a templated e-mail through an API that honours
// Idempotency-Key:
//
//	POST {base}/v1/emails {"to":"...","template":"..."} → 201/200
//	GET  {base}/v1/emails?idempotency_key=K → the e-mail, or 404
type EmailSend struct {
	h    *httpTool
	desc string
}

// NewEmailSend returns the email.send tool.
func NewEmailSend(cfg HTTPConfig) (*EmailSend, error) {
	h, err := newHTTPTool(cfg, "/v1/emails", "/v1/emails")
	if err != nil {
		return nil, err
	}
	d := cfg.Description
	if d == "" {
		d = "Send a templated e-mail to the customer."
	}
	return &EmailSend{h: h, desc: d}, nil
}

// EmailSendSchema is email.send's field schema.
func EmailSendSchema() derive.Schema {
	return derive.Schema{Action: EmailSendName, Version: builtinRuleVersion, Fields: []derive.Field{
		{Name: "to", Rule: derive.RuleEmail, MaxLen: 254, Description: "recipient e-mail address"},
		{Name: "template", Rule: derive.RuleTemplate, MaxLen: idMaxLen, Description: "template name"},
		{Name: RefField, Rule: derive.RuleRef, MaxLen: idMaxLen, Description: "intent reference (filled in by the system)"},
	}}
}

// EarlierSchemas implements EarlierSchemas: the schema at rule version 2.
func (t *EmailSend) EarlierSchemas() []derive.Schema { return []derive.Schema{v2(EmailSendSchema())} }

// Name implements Tool.
func (t *EmailSend) Name() string { return EmailSendName }

// Description implements Tool.
func (t *EmailSend) Description() string { return t.desc }

// Schema implements Tool.
func (t *EmailSend) Schema() derive.Schema { return EmailSendSchema() }

// SystemFields implements Tool.
func (t *EmailSend) SystemFields() []string { return []string{RefField} }

// Idempotent implements Tool.
func (t *EmailSend) Idempotent() bool { return true }

// CanLookup implements LookupChecker.
func (t *EmailSend) CanLookup() bool { return t.h.canLookup() }

// Parameters implements Tool.
func (t *EmailSend) Parameters() json.RawMessage { return ParametersFromSchema(t.Schema(), RefField) }

// Execute implements Tool.
func (t *EmailSend) Execute(ctx context.Context, key string, p derive.Payload) (json.RawMessage, error) {
	m := p.Map()
	return t.h.post(ctx, key, struct {
		To       string `json:"to"`
		Template string `json:"template"`
	}{m["to"], m["template"]})
}

// Lookup implements Looker.
func (t *EmailSend) Lookup(ctx context.Context, key string) (json.RawMessage, error) {
	return t.h.lookup(ctx, key)
}

// BuiltinToolSchemas are the schemas of the built-in tools at every rule
// version they have had (the current one first), for callers that derive
// keys without the tools' providers (retrysafe key).
func BuiltinToolSchemas() []derive.Schema {
	var out []derive.Schema
	for _, s := range []derive.Schema{PixChargeSchema(), WhatsAppTemplateSchema(), EmailSendSchema()} {
		out = append(out, s, v2(s))
	}
	return out
}
