package apipix

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/retrysafe/retrysafe/internal/problem"
)

// The wire shapes of API Pix this sandbox reads and writes (a subset of the
// specification's schemas: what an immediate charge and its refunds use).

// Devedor is the charge's debtor: a CPF or a CNPJ, with a name.
type Devedor struct {
	CPF  string `json:"cpf,omitempty"`
	CNPJ string `json:"cnpj,omitempty"`
	Nome string `json:"nome"`
}

// CobValor is valor of a charge.
type CobValor struct {
	Original string `json:"original"`
}

// Calendario of a charge.
type Calendario struct {
	Criacao   string `json:"criacao,omitempty"`
	Expiracao int    `json:"expiracao,omitempty"`
}

// CobSolicitada is the body of PUT /cob/{txid}.
type CobSolicitada struct {
	Calendario         *Calendario `json:"calendario"`
	Devedor            *Devedor    `json:"devedor,omitempty"`
	Valor              *CobValor   `json:"valor"`
	Chave              string      `json:"chave"`
	SolicitacaoPagador string      `json:"solicitacaoPagador,omitempty"`
}

// Loc is a charge's payload location.
type Loc struct {
	ID       int64  `json:"id"`
	TxID     string `json:"txid"`
	Location string `json:"location"`
	TipoCob  string `json:"tipoCob"`
	Criacao  string `json:"criacao"`
}

// Cob is a charge as answered (CobGerada; CobCompleta with Pix).
type Cob struct {
	Calendario         Calendario `json:"calendario"`
	TxID               string     `json:"txid"`
	Revisao            int        `json:"revisao"`
	Loc                Loc        `json:"loc"`
	Location           string     `json:"location"`
	Status             string     `json:"status"`
	Devedor            *Devedor   `json:"devedor,omitempty"`
	Valor              CobValor   `json:"valor"`
	Chave              string     `json:"chave"`
	SolicitacaoPagador string     `json:"solicitacaoPagador,omitempty"`
	PixCopiaECola      string     `json:"pixCopiaECola,omitempty"`
	Pix                []Pix      `json:"pix,omitempty"`
}

// Pix is one Pix received.
type Pix struct {
	EndToEndID  string      `json:"endToEndId"`
	TxID        string      `json:"txid,omitempty"`
	Valor       string      `json:"valor"`
	Chave       string      `json:"chave,omitempty"`
	Horario     string      `json:"horario"`
	InfoPagador string      `json:"infoPagador,omitempty"`
	Devolucoes  []Devolucao `json:"devolucoes,omitempty"`
}

// DevolucaoSolicitada is the body of PUT /pix/{e2eid}/devolucao/{id}.
type DevolucaoSolicitada struct {
	Valor     string `json:"valor"`
	Natureza  string `json:"natureza,omitempty"`
	Descricao string `json:"descricao,omitempty"`
}

// Horario of a refund.
type Horario struct {
	Solicitacao string `json:"solicitacao,omitempty"`
	Liquidacao  string `json:"liquidacao,omitempty"`
}

// Devolucao is a refund as answered.
type Devolucao struct {
	ID        string  `json:"id"`
	RtrID     string  `json:"rtrId"`
	Valor     string  `json:"valor"`
	Natureza  string  `json:"natureza,omitempty"`
	Descricao string  `json:"descricao,omitempty"`
	Horario   Horario `json:"horario"`
	Status    string  `json:"status"`
	Motivo    string  `json:"motivo,omitempty"`
}

// Webhook is the body of PUT /webhook/{chave}.
type Webhook struct {
	WebhookURL string `json:"webhookUrl"`
}

// WebhookCompleto is GET /webhook/{chave}.
type WebhookCompleto struct {
	WebhookURL string `json:"webhookUrl"`
	Chave      string `json:"chave"`
	CNPJ       string `json:"cnpj"` // the receiver's: the specification requires it
	Criacao    string `json:"criacao"`
}

// Callback is the body of POST {webhookUrl}/pix.
type Callback struct {
	Pix []Pix `json:"pix"`
}

// Violacao is one violated rule in a Problema.
type Violacao struct {
	Razao       string `json:"razao,omitempty"`
	Propriedade string `json:"propriedade,omitempty"`
	Valor       string `json:"valor,omitempty"`
}

// Problema is an RFC 7807 error as API Pix writes it.
type Problema struct {
	Type      string     `json:"type"`
	Title     string     `json:"title"`
	Status    int        `json:"status"`
	Detail    string     `json:"detail,omitempty"`
	Violacoes []Violacao `json:"violacoes,omitempty"`
}

// ErrorTypeBase prefixes every error type URI.
const ErrorTypeBase = "https://pix.bcb.gov.br/api/v2/error/"

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b) //nolint:errcheck // the client may have gone
}

func writeProblem(w http.ResponseWriter, status int, tipo, title, detail string, v ...Violacao) {
	problem.Write(w, status, Problema{Type: ErrorTypeBase + tipo, Title: title, Status: status, Detail: detail, Violacoes: v}, nil)
}

func notFound(w http.ResponseWriter, tipo string) {
	writeProblem(w, http.StatusNotFound, tipo, "Não Encontrado", "Entidade não encontrada.")
}
