package apipix

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"
)

func (p *pixRec) snapshot() Pix {
	out := p.pix
	out.Devolucoes = nil
	for _, d := range p.devolucoes {
		out.Devolucoes = append(out.Devolucoes, *d)
	}
	return out
}

func (s *Server) getPix(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pix[r.PathValue("e2eid")]
	if !ok {
		notFound(w, "PixNaoEncontrado")
		return
	}
	writeJSON(w, http.StatusOK, p.snapshot())
}

func devViolation(w http.ResponseWriter, razao string) {
	writeProblem(w, http.StatusBadRequest, "PixDevolucaoInvalida", "Devolução inválida.",
		"A presente requisição de devolução não respeita o _schema_ ou não faz sentido semanticamente.",
		Violacao{Razao: razao, Propriedade: "devolucao"})
}

func (s *Server) putDevolucao(w http.ResponseWriter, r *http.Request) {
	e2e, id := r.PathValue("e2eid"), r.PathValue("id")
	var in DevolucaoSolicitada
	if _, ok := s.readBody(w, r, &in); !ok {
		return
	}
	canon, _ := json.Marshal(in)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.RefundPuts++
	refuse := func(razao string) {
		s.stats.RefundsRefused++
		devViolation(w, razao)
	}
	amount, okAmount := cents(in.Valor)
	switch {
	case !e2eRe.MatchString(e2e) || !devIDRe.MatchString(id):
		refuse("O e2eid ou o id não respeitam o _schema_.")
		return
	case !okAmount || amount <= 0:
		refuse("O campo devolucao.valor não respeita o _schema_.")
		return
	case in.Natureza != "" && in.Natureza != "ORIGINAL":
		refuse("A natureza da devolução não se aplica a um Pix comum.")
		return
	case utf8.RuneCountInString(in.Descricao) > 140:
		refuse("O campo descricao não respeita o _schema_.")
		return
	}
	p, ok := s.pix[e2e]
	if !ok {
		notFound(w, "PixNaoEncontrado")
		return
	}
	if prev, ok := p.devBodies[id]; ok {
		if !bytes.Equal(prev, canon) {
			refuse("A presente requisição de devolução apresenta um id já utilizado por outra requisição de devolução para o e2eid em questão.")
			return
		}
		for _, d := range p.devolucoes {
			if d.ID == id {
				writeJSON(w, http.StatusCreated, *d)
				return
			}
		}
	}
	var refunded int64
	for _, d := range p.devolucoes {
		if d.Status != RefundNotRealized {
			c, _ := cents(d.Valor)
			refunded += c
		}
	}
	if refunded+amount > p.valorCents {
		refuse("A presente requisição de devolução, em conjunto com as demais prévias devoluções, excederia o valor do pix originário.")
		return
	}
	s.seq++
	d := &Devolucao{
		ID: id, RtrID: s.endToEnd('D', s.seq), Valor: in.Valor, Natureza: "ORIGINAL", Descricao: in.Descricao,
		Horario: Horario{Solicitacao: rfc3339(s.now())}, Status: RefundProcessing,
	}
	p.devolucoes = append(p.devolucoes, d)
	p.devBodies[id] = canon
	s.settle = append(s.settle, d)
	s.stats.RefundsCreated++
	s.wake()
	writeJSON(w, http.StatusCreated, *d)
}

func (s *Server) getDevolucao(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.pix[r.PathValue("e2eid")]; ok {
		for _, d := range p.devolucoes {
			if d.ID == r.PathValue("id") {
				writeJSON(w, http.StatusOK, *d)
				return
			}
		}
	}
	notFound(w, "PixDevolucaoNaoEncontrada")
}

// endToEnd makes a 32-character id: kind ('E' for a Pix, 'D' for a
// refund), the ISPB, the minute, and a sequence number.
func (s *Server) endToEnd(kind byte, seq int64) string {
	return fmt.Sprintf("%c%s%s%011d", kind, s.cfg.ISPB, s.now().Format("200601021504"), seq)
}

// PayOpts are optional details of a payment.
type PayOpts struct {
	// Valor paid ("" for the charge's valor.original).
	Valor       string
	InfoPagador string
}

// Pay makes the customer pay charge txid: the charge becomes CONCLUIDA, a
// Pix is recorded and its callback queued. A charge that is not ATIVA
// cannot take another payment.
func (s *Server) Pay(txid string, opts *PayOpts) (Pix, error) {
	if opts == nil {
		opts = &PayOpts{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.cobs[txid]
	if !ok {
		return Pix{}, fmt.Errorf("apipix: no charge %q", txid)
	}
	if c.Status != StatusAtiva {
		return Pix{}, fmt.Errorf("apipix: charge %q is %s", txid, c.Status)
	}
	valor := opts.Valor
	if valor == "" {
		valor = c.Valor.Original
	}
	vc, ok := cents(valor)
	if !ok {
		return Pix{}, fmt.Errorf("apipix: valor %q is not NNN.NN", valor)
	}
	s.seq++
	p := &pixRec{pix: Pix{
		EndToEndID: s.endToEnd('E', s.seq), TxID: txid, Valor: valor, Chave: c.Chave,
		Horario: rfc3339(s.now()), InfoPagador: opts.InfoPagador,
	}, valorCents: vc, devBodies: map[string][]byte{}}
	s.pix[p.pix.EndToEndID] = p
	c.Status = StatusConcluida
	s.stats.Paid++
	s.pending = append(s.pending, note{e2e: p.pix.EndToEndID})
	s.wake()
	return p.snapshot(), nil
}

func (s *Server) payHTTP(w http.ResponseWriter, r *http.Request) {
	var opts PayOpts
	if r.ContentLength != 0 {
		var in struct {
			Valor       string `json:"valor"`
			InfoPagador string `json:"infoPagador"`
		}
		if _, ok := s.readBody(w, r, &in); !ok {
			return
		}
		opts = PayOpts(in)
	}
	p, err := s.Pay(r.PathValue("txid"), &opts)
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "RequisicaoInvalida", "Pagamento recusado.", err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, p)
}

// Redeliver queues Pix e2eid's callback again (as a PSP retrying one it
// believes lost).
func (s *Server) Redeliver(e2eid string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.pix[e2eid]; !ok {
		return fmt.Errorf("apipix: no Pix %q", e2eid)
	}
	s.pending = append(s.pending, note{e2e: e2eid})
	s.wake()
	return nil
}

func (s *Server) redeliverHTTP(w http.ResponseWriter, r *http.Request) {
	if err := s.Redeliver(r.PathValue("e2eid")); err != nil {
		notFound(w, "PixNaoEncontrado")
		return
	}
	w.WriteHeader(http.StatusAccepted)
}
