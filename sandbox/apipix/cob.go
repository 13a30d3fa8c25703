package apipix

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

func (s *Server) readBody(w http.ResponseWriter, r *http.Request, v any) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBytes))
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(b))
		err = dec.Decode(v)
	}
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "RequisicaoInvalida", "Requisição inválida.", "O corpo da requisição não é um JSON válido.")
		return nil, false
	}
	return b, true
}

func cents(valor string) (int64, bool) {
	if !valorRe.MatchString(valor) {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.Replace(valor, ".", "", 1), 10, 64)
	return n, err == nil
}

func cobViolation(w http.ResponseWriter, prop, razao string) {
	writeProblem(w, http.StatusBadRequest, "CobOperacaoInvalida", "Cobrança inválida.",
		"A requisição que busca alterar ou criar uma cobrança para pagamento imediato não respeita o _schema_ ou está semanticamente errada.",
		Violacao{Razao: razao, Propriedade: prop})
}

func (s *Server) putCob(w http.ResponseWriter, r *http.Request) {
	txid := r.PathValue("txid")
	var in CobSolicitada
	if _, ok := s.readBody(w, r, &in); !ok {
		return
	}
	refuse := func(prop, razao string) {
		s.mu.Lock()
		s.stats.CobPuts++
		s.stats.CobRefused++
		s.mu.Unlock()
		cobViolation(w, prop, razao)
	}
	switch {
	case !txidRe.MatchString(txid):
		refuse("txid", "O txid não respeita o _schema_.")
		return
	case in.Calendario == nil || in.Calendario.Expiracao <= 0:
		refuse("cob.calendario.expiracao", "O campo cob.calendario.expiracao é igual ou menor que zero.")
		return
	case in.Valor == nil || !valorRe.MatchString(in.Valor.Original):
		refuse("cob.valor.original", "O campo cob.valor.original não respeita o _schema_.")
		return
	case in.Valor.Original == "0.00":
		refuse("cob.valor.original", "O campo cob.valor.original é zero.")
		return
	case in.Chave == "" || utf8.RuneCountInString(in.Chave) > 77:
		refuse("cob.chave", "O campo cob.chave não respeita o _schema_.")
		return
	case utf8.RuneCountInString(in.SolicitacaoPagador) > 140:
		refuse("cob.solicitacaoPagador", "O campo solicitacaoPagador não respeita o _schema_.")
		return
	case in.Devedor != nil && !validDevedor(in.Devedor):
		refuse("cob.devedor", "O objeto cob.devedor não respeita o _schema_.")
		return
	}
	// What the charge is, whatever the spelling of the request.
	canon, _ := json.Marshal(in)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.CobPuts++
	c, exists := s.cobs[txid]
	switch {
	case !exists:
		s.seq++
		c = &cob{Cob: Cob{
			TxID: txid, Status: StatusAtiva,
			Calendario: Calendario{Criacao: rfc3339(now)},
			Loc:        Loc{ID: s.seq, TxID: txid, TipoCob: "cob", Criacao: rfc3339(now)},
		}}
		c.Loc.Location = fmt.Sprintf("pix.sandbox.retrysafe.local/qr/v2/%032x", s.seq)
		c.Location = c.Loc.Location
		s.cobs[txid] = c
		s.stats.CobCreated++
	case bytes.Equal(c.body, canon):
		s.stats.CobUnchanged++
		writeJSON(w, http.StatusCreated, c.Cob.withoutPix())
		return
	case c.Status != StatusAtiva:
		s.stats.CobRefused++
		cobViolation(w, "cob.status", "A cobrança já existe, não está no status ATIVA, e a presente requisição busca alterá-la.")
		return
	default:
		// An upsert, as the specification allows: the ATIVA charge takes
		// the new body. retrysafe must never get here for one intent.
		c.Revisao++
		s.stats.CobOverwritten++
		s.log.Warn("sandbox apipix: an ATIVA charge was overwritten by another body", "txid", txid, "revisao", c.Revisao)
	}
	c.body = canon
	c.Calendario.Expiracao = in.Calendario.Expiracao
	c.Devedor = in.Devedor
	c.Valor = CobValor{Original: in.Valor.Original}
	c.Chave = in.Chave
	c.SolicitacaoPagador = in.SolicitacaoPagador
	c.PixCopiaECola = brCode(c.Location)
	writeJSON(w, http.StatusCreated, c.Cob.withoutPix())
}

func validDevedor(d *Devedor) bool {
	if d.Nome == "" || utf8.RuneCountInString(d.Nome) > 200 {
		return false
	}
	return (d.CPF != "") != (d.CNPJ != "") && (d.CPF == "" || cpfRe.MatchString(d.CPF)) && (d.CNPJ == "" || cnpjRe.MatchString(d.CNPJ))
}

func (c Cob) withoutPix() Cob {
	c.Pix = nil
	return c
}

// Cobs returns every charge, with its Pix, oldest first.
func (s *Server) Cobs() []Cob {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Cob, 0, len(s.cobs))
	for _, c := range s.cobs {
		v := c.Cob
		v.Pix = nil
		for _, p := range s.pix {
			if p.pix.TxID == c.TxID {
				v.Pix = append(v.Pix, p.snapshot())
			}
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Loc.ID < out[j].Loc.ID })
	return out
}

func (s *Server) listCobs(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"data": s.Cobs()})
}

func (s *Server) getCob(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.CobReads++
	c, ok := s.cobs[r.PathValue("txid")]
	if !ok {
		notFound(w, "NaoEncontrado")
		return
	}
	out := c.Cob
	out.Pix = nil
	for _, p := range s.pix {
		if p.pix.TxID == c.TxID {
			out.Pix = append(out.Pix, p.snapshot())
		}
	}
	writeJSON(w, http.StatusOK, out)
}
