package apipix

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"sync"
	"time"

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
