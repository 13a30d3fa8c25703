package apipix

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/tools"
)

var e2eRe = regexp.MustCompile(`^[a-zA-Z0-9]{32}$`)

// RefundSchema is pix.refund's field schema: a refund is its own frozen
// action, with its own intent_ref and key.
func RefundSchema() derive.Schema {
	return derive.Schema{Action: RefundName, Version: RuleVersion, Fields: []derive.Field{
		{Name: "e2eid", Rule: derive.RuleRef, Description: "the endToEndId of the Pix to refund (32 characters)"},
		{Name: "amount", Rule: derive.RuleMoney, Description: `amount to refund in reais, e.g. "50,00"`},
		{Name: "description", Rule: derive.RuleText, Optional: true, Description: "message to the payer (at most 140 characters)"},
		{Name: tools.RefField, Rule: derive.RuleRef, Description: "intent reference (filled in by the system)"},
	}}
}

// RefundBody is the body of PUT /pix/{e2eid}/devolucao/{id}.
type RefundBody struct {
	Valor     string `json:"valor"`
	Descricao string `json:"descricao,omitempty"`
}

// NewRefundBody builds the request body and reads the e2eid from a
// frozen payload. Errors are definitive (nothing was sent).
func NewRefundBody(p derive.Payload) (e2eid string, b *RefundBody, err error) {
	m := p.Map()
	e2eid = m["e2eid"]
	if !e2eRe.MatchString(e2eid) {
		return "", nil, tools.Definitive("bad_payload", "e2eid is not 32 letters and digits", nil)
	}
	b = &RefundBody{Descricao: m["description"]}
	if b.Valor, err = centsOf(m, "amount"); err != nil {
		return "", nil, err
	}
	if utf8.RuneCountInString(b.Descricao) > 140 {
		return "", nil, tools.Definitive("bad_payload", "description is longer than 140 characters", nil)
	}
	return e2eid, b, nil
}

// PixView is what the refund tool reads of a Pix.
type PixView struct {
	EndToEndID string          `json:"endToEndId"`
	Valor      string          `json:"valor"`
	Devolucoes []DevolucaoView `json:"devolucoes"`
}

// DevolucaoView is what the refund tool reads of a refund.
type DevolucaoView struct {
	ID     string `json:"id"`
	Valor  string `json:"valor"`
	Status string `json:"status"`
}

// RefundNotRealized is the refund status that returned nothing.
const RefundNotRealized = "NAO_REALIZADO"

// ErrRefundExceedsPaid is the code of a refund refused because, with the
// Pix's other refunds, it would return more than was paid.
const ErrRefundExceedsPaid = "refund_exceeds_paid"

func parseCents(v string) (int64, bool) {
	i, f, ok := strings.Cut(v, ".")
	if !ok || len(f) != 2 || i == "" || len(i) > 10 {
		return 0, false
	}
	n, err := strconv.ParseInt(i+f, 10, 64)
	return n, err == nil && n >= 0
}

// Refund is the pix.refund tool (devolução):
//
//	GET {base}/pix/{e2eid}                    the paid amount and the refunds made so far
//	PUT {base}/pix/{e2eid}/devolucao/{id}     id = DevolucaoID(key), body {"valor","descricao"}
//
// Every execution reads the Pix first. A refund already made under this id
// is the answer (another amount under it is reported for review, never
// rewritten); a refund that with the Pix's other refunds (those not
// NAO_REALIZADO) would exceed the paid amount is refused (definitive,
// refund_exceeds_paid) before any PUT. Lookup is not offered: the
// specification reads a refund only with its Pix's e2eid, which is in the
// payload, not the key; the read inside Execute plays its part.
type Refund struct {
	c    *client
	desc string
}

// NewRefund returns the pix.refund tool.
func NewRefund(cfg Config) (*Refund, error) {
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	d := cfg.Description
	if d == "" {
		d = "Refund (devolução) all or part of a Pix the customer paid. Use only when a refund was agreed."
	}
	return &Refund{c: c, desc: d}, nil
}

// Name implements tools.Tool.
func (t *Refund) Name() string { return RefundName }

// Description implements tools.Tool.
func (t *Refund) Description() string { return t.desc }

// Schema implements tools.Tool.
func (t *Refund) Schema() derive.Schema { return RefundSchema() }

// SystemFields implements tools.Tool.
func (t *Refund) SystemFields() []string { return []string{tools.RefField} }

// Parameters implements tools.Tool.
func (t *Refund) Parameters() json.RawMessage {
	return tools.ParametersFromSchema(t.Schema(), tools.RefField)
}

// Idempotent implements tools.Tool: the devolução id is the key.
func (t *Refund) Idempotent() bool { return true }

// Execute implements tools.Tool.
func (t *Refund) Execute(ctx context.Context, key string, p derive.Payload) (json.RawMessage, error) {
	id, err := DevolucaoID(key)
	if err != nil {
		return nil, tools.Definitive("bad_key", err.Error(), err)
	}
	e2eid, body, err := NewRefundBody(p)
	if err != nil {
		return nil, err
	}
	out, done, err := t.check(ctx, e2eid, id, body)
	if err != nil || done {
		return out, err
	}
	path := "/pix/" + e2eid + "/devolucao/" + id
	r, err := t.c.do(ctx, http.MethodPut, path, body)
	if err != nil {
		return nil, err
	}
	switch r.status {
	case http.StatusCreated, http.StatusOK:
		var v DevolucaoView
		if json.Unmarshal(r.body, &v) != nil || v.ID != id {
			return nil, tools.Uncertain("bad_response", "the PSP answered the PUT with another refund or no JSON", nil)
		}
		return r.body, nil
	case http.StatusBadRequest:
		// A concurrent attempt may have made it first: read it back.
		g, gerr := t.c.do(ctx, http.MethodGet, path, nil)
		if gerr == nil && g.status == http.StatusOK {
			var v DevolucaoView
			if json.Unmarshal(g.body, &v) == nil && v.ID == id && v.Valor == body.Valor {
				return g.body, nil
			}
		}
	}
	return nil, classify(r)
}

// check reads the Pix: done with out when the refund exists under id,
// an error when it cannot or must not be made.
func (t *Refund) check(ctx context.Context, e2eid, id string, body *RefundBody) (out json.RawMessage, done bool, err error) {
	r, err := t.c.do(ctx, http.MethodGet, "/pix/"+e2eid, nil)
	if err != nil {
		return nil, false, err
	}
	if r.status != http.StatusOK {
		return nil, false, classify(r)
	}
	var v PixView
	if json.Unmarshal(r.body, &v) != nil || v.EndToEndID != e2eid {
		return nil, false, tools.Uncertain("bad_response", "the PSP answered the read with another Pix or no JSON", nil)
	}
	paid, ok := parseCents(v.Valor)
	want, _ := parseCents(body.Valor)
	if !ok {
		return nil, false, tools.Uncertain("bad_response", "the Pix's valor is not an amount", nil)
	}
	var others int64
	for _, d := range v.Devolucoes {
		if d.ID == id {
			if d.Valor != body.Valor {
				return nil, false, tools.Uncertain("refund_differs", "a refund under this id holds another amount; it was not rewritten", nil)
			}
			b, err := json.Marshal(d)
			if err != nil {
				return nil, false, tools.Uncertain("encode", "could not encode the refund", err)
			}
			// The full refund as the PSP stores it: read it by id.
			g, gerr := t.c.do(ctx, http.MethodGet, "/pix/"+e2eid+"/devolucao/"+id, nil)
			if gerr == nil && g.status == http.StatusOK {
				b = g.body
			}
			return b, true, nil
		}
		if d.Status == RefundNotRealized {
			continue
		}
		c, ok := parseCents(d.Valor)
		if !ok {
			return nil, false, tools.Uncertain("bad_response", "a refund's valor is not an amount", nil)
		}
		others += c
	}
	if others+want > paid {
		return nil, false, &tools.Error{Class: tools.ClassDefinitive, Code: ErrRefundExceedsPaid,
			Message: "the refund, with the Pix's other refunds, would exceed the paid amount; nothing was sent"}
	}
	return nil, false, nil
}
