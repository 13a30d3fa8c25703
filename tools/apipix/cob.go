package apipix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/tools"
)

// Tool names.
const (
	CobName    = "pix.cob"
	RefundName = "pix.refund"
)

// RuleVersion is the derive rule version of both tools' schemas: the one
// constant to bump when derive's taxid rule gains the alphanumeric CNPJ
// (version 3). A frozen intent keeps the version it was frozen with.
const RuleVersion = 2

// IDLength is the length of the txid and the devolução id derived from a
// key: 35, the most both patterns ([a-zA-Z0-9]{26,35}, [a-zA-Z0-9]{1,35})
// allow, 140 bits of the key.
const IDLength = 35

// ErrBadKey: the key is not one derive makes (64 lowercase hex digits).
var ErrBadKey = errors.New("apipix: the key is not 64 lowercase hex digits")

// TxID is the txid of the charge made under key: its first 35 hex digits.
// Same intent, same key, same txid: on every attempt, every worker, after
// every crash. The Pix webhook finds the intent back by this prefix.
func TxID(key string) (string, error) {
	if len(key) != 64 {
		return "", ErrBadKey
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", ErrBadKey
		}
	}
	return key[:IDLength], nil
}

// DevolucaoID is the refund id of the refund made under key (the refund
// intent's own key), derived as TxID is.
func DevolucaoID(key string) (string, error) { return TxID(key) }

// CobSchema is pix.cob's field schema.
func CobSchema() derive.Schema {
	return derive.Schema{Action: CobName, Version: RuleVersion, Fields: []derive.Field{
		{Name: "amount", Rule: derive.RuleMoney, Description: `amount in reais, e.g. "180,00" or 180.00`},
		{Name: "payer_tax_id", Rule: derive.RuleTaxID, Description: "the payer's CPF or CNPJ"},
		{Name: "payer_name", Rule: derive.RuleText, Description: "the payer's name (person or company)"},
		{Name: "description", Rule: derive.RuleText, Optional: true, Description: "text shown to the payer (at most 140 characters; default the intent_ref)"},
		{Name: tools.RefField, Rule: derive.RuleRef, Description: "intent reference (filled in by the system)"},
	}}
}

// CobBody is the body of PUT /cob/{txid}: a function of the frozen
// payload and of the tool's configuration (the receiver's chave and the
// expiry) alone, so every attempt sends the same bytes.
type CobBody struct {
	Calendario struct {
		Expiracao int `json:"expiracao"`
	} `json:"calendario"`
	Devedor            *Devedor `json:"devedor,omitempty"`
	Valor              Valor    `json:"valor"`
	Chave              string   `json:"chave"`
	SolicitacaoPagador string   `json:"solicitacaoPagador,omitempty"`
}

// Devedor is the debtor: a CPF (11 digits) or a CNPJ (14 characters,
// alphanumeric from July 2026), and a name.
type Devedor struct {
	CPF  string `json:"cpf,omitempty"`
	CNPJ string `json:"cnpj,omitempty"`
	Nome string `json:"nome"`
}

// Valor is a charge's valor.
type Valor struct {
	Original string `json:"original"`
}

// FormatCents writes integer cents as API Pix's "\d{1,10}\.\d{2}".
func FormatCents(c int64) (string, error) {
	if c <= 0 || c > 9999999999_99 {
		return "", fmt.Errorf("apipix: amount %d cents outside 0.01..9999999999.99", c)
	}
	return fmt.Sprintf("%d.%02d", c/100, c%100), nil
}

func centsOf(p map[string]string, field string) (string, error) {
	c, err := strconv.ParseInt(p[field], 10, 64)
	if err != nil {
		return "", tools.Definitive("bad_payload", "frozen "+field+" is not integer cents", err)
	}
	v, err := FormatCents(c)
	if err != nil {
		return "", tools.Definitive("bad_payload", "frozen "+field+" is outside what API Pix accepts", err)
	}
	return v, nil
}

// NewCobBody builds the request body from a frozen payload. Errors are
// definitive (nothing was sent).
func NewCobBody(p derive.Payload, chave string, expiracao int) (*CobBody, error) {
	m := p.Map()
	b := &CobBody{Chave: chave, SolicitacaoPagador: m["description"]}
	if b.SolicitacaoPagador == "" {
		// The invoice (the intent_ref) is what the payer sees: a
		// reconciliation by the PSP's statement can tell the charge too.
		b.SolicitacaoPagador = m[tools.RefField]
	}
	b.Calendario.Expiracao = expiracao
	var err error
	if b.Valor.Original, err = centsOf(m, "amount"); err != nil {
		return nil, err
	}
	d := &Devedor{Nome: m["payer_name"]}
	switch id := m["payer_tax_id"]; len(id) {
	case 11:
		d.CPF = id
	case 14:
		d.CNPJ = id
	default:
		return nil, tools.Definitive("bad_payload", "frozen payer_tax_id is neither a CPF nor a CNPJ", nil)
	}
	switch {
	case d.Nome == "" || utf8.RuneCountInString(d.Nome) > 200:
		return nil, tools.Definitive("bad_payload", "payer_name is empty or longer than 200 characters", nil)
	case utf8.RuneCountInString(b.SolicitacaoPagador) > 140:
		return nil, tools.Definitive("bad_payload", "description is longer than 140 characters", nil)
	}
	b.Devedor = d
	return b, nil
}

// CobView is what the tools read of a charge.
type CobView struct {
	TxID       string `json:"txid"`
	Status     string `json:"status"`
	Calendario struct {
		Expiracao int `json:"expiracao"`
	} `json:"calendario"`
	Devedor            *Devedor `json:"devedor"`
	Valor              Valor    `json:"valor"`
	Chave              string   `json:"chave"`
	SolicitacaoPagador string   `json:"solicitacaoPagador"`
	Pix                []struct {
		EndToEndID string `json:"endToEndId"`
		Valor      string `json:"valor"`
	} `json:"pix"`
}

// Charge statuses.
const (
	StatusAtiva     = "ATIVA"
	StatusConcluida = "CONCLUIDA"
)

// Matches reports whether the charge is the one body describes.
func (v *CobView) Matches(b *CobBody) bool {
	dv, db := Devedor{}, Devedor{}
	if v.Devedor != nil {
		dv = *v.Devedor
	}
	if b.Devedor != nil {
		db = *b.Devedor
	}
	return v.Valor.Original == b.Valor.Original && v.Chave == b.Chave && dv == db &&
		v.SolicitacaoPagador == b.SolicitacaoPagador && v.Calendario.Expiracao == b.Calendario.Expiracao
}

// Cob is the pix.cob tool: an immediate Pix charge under API Pix.
//
//	PUT {base}/cob/{txid}   txid = TxID(key)   body = NewCobBody(payload, Chave, Expiracao)
//	GET {base}/cob/{txid}   Lookup, and the read before a PUT that follows an uncertain outcome
//
// A PUT is an upsert at the PSP: on an ATIVA charge another body would
// overwrite it. So after an outcome this tool could not see (a timeout, a
// reset, a 5xx) it reads the charge before any PUT, and never writes over
// an existing one: the same body is the answer; another body, on any
// status, is reported for review (uncertain, cob_differs) and left alone;
// CONCLUIDA is never touched. A PUT refused with 400 is read back too (the
// refusal may be the PSP's "no longer ATIVA": a charge already made and
// paid under this very txid).
type Cob struct {
	c         *client
	chave     string
	expiracao int
	desc      string

	// uncertain holds the txids whose last call this process could not
	// see the end of. Another process taking the action over asks by
	// Lookup first (the executor's takeover), which reads the same way.
	uncertain sync.Map
}

// NewCob returns the pix.cob tool.
func NewCob(cfg Config) (*Cob, error) {
	if cfg.Chave == "" || utf8.RuneCountInString(cfg.Chave) > 77 {
		return nil, errors.New("apipix: Chave (the receiver's Pix key, at most 77 characters) is required")
	}
	if cfg.Expiracao == 0 {
		cfg.Expiracao = DefaultExpiracao
	}
	if cfg.Expiracao < 0 {
		return nil, errors.New("apipix: Expiracao must be positive")
	}
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	d := cfg.Description
	if d == "" {
		d = "Create a Pix charge (cobrança imediata) the customer pays by QR code or copy-and-paste. Use only when the customer agreed to pay the amount due."
	}
	return &Cob{c: c, chave: cfg.Chave, expiracao: cfg.Expiracao, desc: d}, nil
}

// Name implements tools.Tool.
func (t *Cob) Name() string { return CobName }

// Description implements tools.Tool.
func (t *Cob) Description() string { return t.desc }

// Schema implements tools.Tool.
func (t *Cob) Schema() derive.Schema { return CobSchema() }

// SystemFields implements tools.Tool.
func (t *Cob) SystemFields() []string { return []string{tools.RefField} }

// Parameters implements tools.Tool.
func (t *Cob) Parameters() json.RawMessage {
	return tools.ParametersFromSchema(t.Schema(), tools.RefField)
}

// Idempotent implements tools.Tool: the txid is the key.
func (t *Cob) Idempotent() bool { return true }

// Body is the request body Execute sends for a payload.
func (t *Cob) Body(p derive.Payload) (*CobBody, error) { return NewCobBody(p, t.chave, t.expiracao) }

// Execute implements tools.Tool.
func (t *Cob) Execute(ctx context.Context, key string, p derive.Payload) (json.RawMessage, error) {
	txid, err := TxID(key)
	if err != nil {
		return nil, tools.Definitive("bad_key", err.Error(), err)
	}
	body, err := t.Body(p)
	if err != nil {
		return nil, err
	}
	if _, ok := t.uncertain.Load(txid); ok {
		out, found, err := t.read(ctx, txid, body)
		if err != nil || found {
			return out, t.note(txid, err)
		}
	}
	r, err := t.c.do(ctx, http.MethodPut, "/cob/"+txid, body)
	if err != nil {
		return nil, t.note(txid, err)
	}
	switch {
	case r.status == http.StatusCreated || r.status == http.StatusOK:
		var v CobView
		if json.Unmarshal(r.body, &v) != nil || v.TxID != txid {
			return nil, t.note(txid, tools.Uncertain("bad_response", "the PSP answered the PUT with another charge or no JSON", nil))
		}
		t.uncertain.Delete(txid)
		return r.body, nil
	case r.status == http.StatusBadRequest:
		// Maybe "already exists and is no longer ATIVA": ours, then.
		if out, found, rerr := t.read(ctx, txid, body); found {
			return out, t.note(txid, rerr)
		}
	}
	return nil, t.note(txid, classify(r))
}

// note records whether txid's outcome is now unseen, and returns err.
func (t *Cob) note(txid string, err error) error {
	var te *tools.Error
	if err != nil && (!errors.As(err, &te) || te.Class == tools.ClassUncertain) {
		t.uncertain.Store(txid, struct{}{})
	} else if err == nil || te.Class == tools.ClassDefinitive {
		t.uncertain.Delete(txid)
	}
	return err
}

// read reads charge txid and settles against it: found reports whether a
// charge exists (then out or err is the outcome); not found, the caller
// may PUT.
func (t *Cob) read(ctx context.Context, txid string, body *CobBody) (out json.RawMessage, found bool, err error) {
	r, err := t.c.do(ctx, http.MethodGet, "/cob/"+txid, nil)
	if err != nil {
		return nil, false, err
	}
	switch r.status {
	case http.StatusOK:
	case http.StatusNotFound:
		return nil, false, nil
	default:
		return nil, false, classify(r)
	}
	var v CobView
	if json.Unmarshal(r.body, &v) != nil || v.TxID != txid {
		return nil, true, tools.Uncertain("bad_response", "the PSP answered the read with another charge or no JSON", nil)
	}
	if !v.Matches(body) {
		// Not ours to change: an ATIVA charge would be overwritten, a
		// paid one must not be touched. An operator decides.
		return nil, true, tools.Uncertain("cob_differs", "a charge under this txid holds another body ("+v.Status+"); it was not overwritten", nil)
	}
	switch v.Status {
	case StatusAtiva, StatusConcluida:
		return r.body, true, nil
	}
	return nil, true, tools.Definitive("cob_removed", "the charge was removed ("+v.Status+")", nil)
}

// Lookup implements tools.Looker: GET /cob/{txid}. The txid comes from the
// key alone, so a charge under it was made for the intent frozen under
// that key.
func (t *Cob) Lookup(ctx context.Context, key string) (json.RawMessage, error) {
	txid, err := TxID(key)
	if err != nil {
		return nil, tools.Definitive("bad_key", err.Error(), err)
	}
	r, err := t.c.do(ctx, http.MethodGet, "/cob/"+txid, nil)
	if err != nil {
		return nil, err
	}
	switch r.status {
	case http.StatusOK:
		var v CobView
		if json.Unmarshal(r.body, &v) != nil || v.TxID != txid {
			return nil, tools.Uncertain("bad_response", "the PSP answered the read with another charge or no JSON", nil)
		}
		return r.body, nil
	case http.StatusNotFound:
		return nil, fmt.Errorf("%w (%s)", tools.ErrNotFound, txid)
	}
	return nil, classify(r)
}
