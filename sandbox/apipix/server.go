package apipix

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/internal/backoff"
)

var (
	txidRe   = regexp.MustCompile(`^[a-zA-Z0-9]{26,35}$`)
	e2eRe    = regexp.MustCompile(`^[a-zA-Z0-9]{32}$`)
	devIDRe  = regexp.MustCompile(`^[a-zA-Z0-9]{1,35}$`)
	valorRe  = regexp.MustCompile(`^\d{1,10}\.\d{2}$`)
	cpfRe    = regexp.MustCompile(`^\d{11}$`)
	cnpjRe   = regexp.MustCompile(`^[0-9A-Z]{14}$`)
	maxBytes = int64(64 << 10)
)

// Statuses of a charge and of a refund.
const (
	StatusAtiva       = "ATIVA"
	StatusConcluida   = "CONCLUIDA"
	RefundProcessing  = "EM_PROCESSAMENTO"
	RefundDone        = "DEVOLVIDO"
	RefundNotRealized = "NAO_REALIZADO"
)

type cob struct {
	Cob
	body []byte // the canonical request body it was last set from
}

type pixRec struct {
	pix        Pix
	valorCents int64
	devolucoes []*Devolucao
	devBodies  map[string][]byte
}

type note struct {
	e2e      string
	attempt  int
	notAfter time.Time
}

// Stats are the sandbox's counters.
type Stats struct {
	CobPuts        int `json:"cob_puts"`
	CobCreated     int `json:"cob_created"`
	CobOverwritten int `json:"cob_overwritten"` // an ATIVA charge changed by a PUT: retrysafe must never cause one
	CobUnchanged   int `json:"cob_unchanged"`   // a PUT repeating the charge's body
	CobRefused     int `json:"cob_refused"`     // a PUT refused (not ATIVA, bad body)
	CobReads       int `json:"cob_reads"`
	Paid           int `json:"paid"`
	RefundPuts     int `json:"refund_puts"`
	RefundsCreated int `json:"refunds_created"`
	RefundsRefused int `json:"refunds_refused"`
	Callbacks      int `json:"callbacks"`      // POSTs answered 2xx
	CallbackFails  int `json:"callback_fails"` // POSTs that failed (redelivered)
	PixNotified    int `json:"pix_notified"`   // Pix items in 2xx callbacks
	TokensIssued   int `json:"tokens_issued"`
	TokensRefused  int `json:"tokens_refused"`
	AuthRefused    int `json:"auth_refused"`     // API calls with a missing, unknown or expired token
	MaxPixPerCall  int `json:"max_pix_per_call"` // the largest group delivered
}

// Server is the sandbox API Pix PSP. Safe for concurrent use.
type Server struct {
	cfg     Config
	log     *slog.Logger
	handler http.Handler
	client  *http.Client

	mu       sync.Mutex
	tokens   map[string]time.Time
	cobs     map[string]*cob
	pix      map[string]*pixRec
	webhooks map[string]WebhookCompleto
	pending  []note
	settle   []*Devolucao
	stats    Stats
	reqlog   []Request
	seq      int64
	wakeCh   chan struct{}
}

// New returns a server.
func New(cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, log: cfg.Logger, client: &http.Client{Timeout: 10 * time.Second},
		tokens: map[string]time.Time{}, cobs: map[string]*cob{}, pix: map[string]*pixRec{},
		webhooks: map[string]WebhookCompleto{}, wakeCh: make(chan struct{}, 1),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /oauth/token", s.token)
	mux.Handle("PUT /api/cob/{txid}", s.auth(s.withFault(s.putCob)))
	mux.Handle("GET /api/cob/{txid}", s.auth(s.withFault(s.getCob)))
	mux.Handle("GET /api/pix/{e2eid}", s.auth(s.withFault(s.getPix)))
	mux.Handle("PUT /api/pix/{e2eid}/devolucao/{id}", s.auth(s.withFault(s.putDevolucao)))
	mux.Handle("GET /api/pix/{e2eid}/devolucao/{id}", s.auth(s.withFault(s.getDevolucao)))
	mux.Handle("PUT /api/webhook/{chave}", s.auth(s.putWebhook))
	mux.Handle("GET /api/webhook/{chave}", s.auth(s.getWebhook))
	mux.Handle("DELETE /api/webhook/{chave}", s.auth(s.deleteWebhook))
	mux.HandleFunc("POST /sandbox/cob/{txid}/pagar", s.payHTTP)
	mux.HandleFunc("POST /sandbox/pix/{e2eid}/reenviar", s.redeliverHTTP)
	mux.HandleFunc("GET /sandbox/cobs", s.listCobs)
	mux.HandleFunc("GET /_sandbox/requests", s.listRequests)
	mux.HandleFunc("GET /sandbox/stats", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Stats()) })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.handler = s.logRequests(mux)
	return s, nil
}

// Handler serves the API.
func (s *Server) Handler() http.Handler { return s.handler }

// Config returns the configuration with defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// Stats returns the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

func (s *Server) now() time.Time { return s.cfg.Clock().UTC() }

func rfc3339(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// token implements the client-credentials grant (RFC 6749 section 4.4).
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	if !ok {
		// RFC 6749 allows the credentials in the body too.
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if subtle.ConstantTimeCompare([]byte(id), []byte(s.cfg.ClientID)) != 1 ||
		subtle.ConstantTimeCompare([]byte(secret), []byte(s.cfg.ClientSecret)) != 1 {
		s.mu.Lock()
		s.stats.TokensRefused++
		s.mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="oauth"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	var b [24]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand does not fail
	tok := hex.EncodeToString(b[:])
	s.mu.Lock()
	s.tokens[tok] = s.now().Add(s.cfg.TokenTTL)
	s.stats.TokensIssued++
	s.mu.Unlock()
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": tok, "token_type": "Bearer", "expires_in": int(s.cfg.TokenTTL / time.Second),
		"scope": "cob.write cob.read pix.write pix.read webhook.write webhook.read",
	})
}

// ExpireTokens makes every issued token invalid, as a PSP rotating its
// keys would: the next call with one is refused.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.tokens)
}

func (s *Server) auth(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		s.mu.Lock()
		exp, known := s.tokens[tok]
		valid := ok && known && s.now().Before(exp)
		if !valid {
			s.stats.AuthRefused++
		}
		s.mu.Unlock()
		if !valid {
			writeProblem(w, http.StatusForbidden, "AcessoNegado", "Acesso Negado",
				"Requisição de participante autenticado que viola alguma regra de autorização.")
			return
		}
		next(w, r)
	})
}

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
	c.PixCopiaECola = brCode(c.Cob)
	writeJSON(w, http.StatusCreated, c.Cob.withoutPix())
}

func validDevedor(d *Devedor) bool {
	if d.Nome == "" || utf8.RuneCountInString(d.Nome) > 200 {
		return false
	}
	return (d.CPF != "") != (d.CNPJ != "") && (d.CPF == "" || cpfRe.MatchString(d.CPF)) && (d.CNPJ == "" || cnpjRe.MatchString(d.CNPJ))
}

// brCode is a stand-in for the charge's Pix Copia e Cola (not an EMV
// payload: nobody scans the sandbox's QR codes).
func brCode(c Cob) string {
	return "00020101021226" + c.Location + "5204000053039865406" + c.Valor.Original + "5802BR6304"
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

func (s *Server) putWebhook(w http.ResponseWriter, r *http.Request) {
	var in Webhook
	if _, ok := s.readBody(w, r, &in); !ok {
		return
	}
	if !validURL(in.WebhookURL) || len(r.PathValue("chave")) > 77 {
		writeProblem(w, http.StatusBadRequest, "WebhookOperacaoInvalida", "Webhook inválido.",
			"A presente requisição busca criar um webhook sem respeitar o _schema_ ou, ainda, com sentido semanticamente inválido.",
			Violacao{Razao: "Campo webhook.webhookUrl não respeita o _schema_.", Propriedade: "webhookUrl"})
		return
	}
	s.mu.Lock()
	s.webhooks[r.PathValue("chave")] = WebhookCompleto{WebhookURL: in.WebhookURL, Chave: r.PathValue("chave"), CNPJ: s.cfg.ReceiverCNPJ, Criacao: rfc3339(s.now())}
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (s *Server) getWebhook(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	wh, ok := s.webhooks[r.PathValue("chave")]
	s.mu.Unlock()
	if !ok {
		notFound(w, "NaoEncontrado")
		return
	}
	writeJSON(w, http.StatusOK, wh)
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	_, ok := s.webhooks[r.PathValue("chave")]
	delete(s.webhooks, r.PathValue("chave"))
	s.mu.Unlock()
	if !ok {
		notFound(w, "NaoEncontrado")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func validURL(u string) bool {
	return strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://")
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

func (s *Server) wake() {
	select {
	case s.wakeCh <- struct{}{}:
	default:
	}
}

// Run settles refunds and delivers callbacks until ctx ends.
func (s *Server) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Poll)
	defer t.Stop()
	for {
		s.Flush(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wakeCh:
		}
	}
}

// Flush settles the refunds in processing (DEVOLVIDO, notified) and makes
// one delivery pass: the due notifications, grouped per webhook URL, up to
// GroupMax Pix per call. It returns how many callbacks were answered 2xx.
func (s *Server) Flush(ctx context.Context) int {
	now := s.now()
	s.mu.Lock()
	for _, d := range s.settle {
		d.Status = RefundDone
		d.Horario.Liquidacao = rfc3339(now)
		for e2e, p := range s.pix {
			for _, pd := range p.devolucoes {
				if pd == d {
					s.pending = append(s.pending, note{e2e: e2e})
				}
			}
		}
	}
	s.settle = nil
	type batch struct {
		url   string
		notes []note
		body  Callback
		has   map[string]bool
	}
	var batches []*batch
	byURL := map[string]*batch{}
	var keep []note
	for _, n := range s.pending {
		p := s.pix[n.e2e]
		url := s.cfg.WebhookURL
		if wh, ok := s.webhooks[p.pix.Chave]; ok {
			url = wh.WebhookURL
		}
		if url == "" || now.Before(n.notAfter) {
			keep = append(keep, n)
			continue
		}
		b := byURL[url]
		if b != nil && b.has[n.e2e] {
			continue // one snapshot per Pix and call: it shows every refund
		}
		if b == nil || len(b.notes) >= s.cfg.GroupMax {
			b = &batch{url: url, has: map[string]bool{}}
			byURL[url] = b
			batches = append(batches, b)
		}
		b.has[n.e2e] = true
		b.notes = append(b.notes, n)
		b.body.Pix = append(b.body.Pix, p.snapshot())
	}
	s.pending = keep
	s.mu.Unlock()

	sent := 0
	for _, b := range batches {
		ok := s.post(ctx, b.url, b.body)
		s.mu.Lock()
		if ok {
			sent++
			s.stats.Callbacks++
			s.stats.PixNotified += len(b.notes)
			s.stats.MaxPixPerCall = max(s.stats.MaxPixPerCall, len(b.notes))
		} else {
			s.stats.CallbackFails++
			for _, n := range b.notes {
				n.attempt++
				if n.attempt >= s.cfg.MaxAttempts {
					s.log.Warn("sandbox apipix: callback abandoned", "e2eid", n.e2e, "attempts", n.attempt)
					continue
				}
				n.notAfter = s.now().Add(backoff.Exponential(s.cfg.WebhookBackoff, s.cfg.MaxBackoff, n.attempt))
				s.pending = append(s.pending, n)
			}
		}
		s.mu.Unlock()
	}
	return sent
}

// Pending is how many notifications wait for delivery.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending) + len(s.settle)
}

func (s *Server) post(ctx context.Context, url string, body Callback) bool {
	b, err := json.Marshal(body)
	if err != nil {
		return false
	}
	// Appended to the URL's text, as PSPs do: "...?hmac=X&ignorar=" + "/pix".
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/pix", bytes.NewReader(b))
	if err != nil {
		s.log.Warn("sandbox apipix: bad webhook URL", "error", err)
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		s.log.Info("sandbox apipix: callback failed; will redeliver", "error", err, "pix", len(body.Pix))
		return false
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16)) //nolint:errcheck
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		s.log.Info("sandbox apipix: callback refused; will redeliver", "status", resp.StatusCode, "pix", len(body.Pix))
		return false
	}
	s.log.Info("sandbox apipix: callback delivered", "pix", len(body.Pix))
	return true
}
