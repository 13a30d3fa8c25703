package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/apipix"
)

// cobName is the workload that runs tools/apipix's pix.cob.
const cobName = "first execution, pix.cob"

const (
	pixClientID     = "bench-client"
	pixClientSecret = "bench-client-secret"
	pixChave        = "7d9f0335-8dcc-4054-9bf9-0dbd61d36906"
)

// pixServer is a local no-op API Pix PSP for the pix.cob workload: the
// OAuth2 token endpoint, PUT /api/cob/{txid} answering 201 with the charge
// (the request's body with the fields the specification's CobGerada adds)
// and GET answering it, 200, or 404 in the specification's problem shape.
// It keeps the charges so that a txid PUT twice (which retrysafe must
// never do on a first execution) is counted.
type pixServer struct {
	srv    *httptest.Server
	client *http.Client
	puts   atomic.Int64
	tokens atomic.Int64

	mu    sync.Mutex
	cobs  map[string][]byte
	twice int // PUTs on a txid that had a charge already
}

func newPixServer() *pixServer {
	p := &pixServer{cobs: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /oauth/token", p.token)
	mux.HandleFunc("PUT /api/cob/{txid}", p.putCob)
	mux.HandleFunc("GET /api/cob/{txid}", p.getCob)
	p.srv = httptest.NewServer(mux)
	p.client = &http.Client{Transport: &http.Transport{
		MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute,
	}}
	return p
}

func (p *pixServer) Close() {
	p.client.CloseIdleConnections()
	p.srv.Close()
}

func (p *pixServer) token(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if !ok || id != pixClientID || secret != pixClientSecret {
		http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
		return
	}
	p.tokens.Add(1)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":"bench-token-%d","token_type":"Bearer","expires_in":3600}`, p.tokens.Load())
}

func (p *pixServer) authorized(w http.ResponseWriter, r *http.Request) bool {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer bench-token-") {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"type":"https://pix.bcb.gov.br/api/v2/error/AcessoNegado","title":"Acesso Negado","status":401}`) //nolint:errcheck
		return false
	}
	return true
}

func (p *pixServer) putCob(w http.ResponseWriter, r *http.Request) {
	if !p.authorized(w, r) {
		return
	}
	txid := r.PathValue("txid")
	var in map[string]any
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"type":"https://pix.bcb.gov.br/api/v2/error/CobOperacaoInvalida","title":"Cobrança inválida.","status":400}`) //nolint:errcheck
		return
	}
	p.puts.Add(1)
	cal, _ := in["calendario"].(map[string]any)
	if cal == nil {
		cal = map[string]any{}
	}
	now := time.Now().UTC().Format(time.RFC3339)
	cal["criacao"] = now
	in["calendario"] = cal
	in["txid"] = txid
	in["revisao"] = 0
	in["status"] = apipix.StatusAtiva
	in["location"] = "pix.example.com/qr/v2/" + txid
	in["loc"] = map[string]any{"id": 1, "location": "pix.example.com/qr/v2/" + txid, "tipoCob": "cob", "criacao": now, "txid": txid}
	out, _ := json.Marshal(in)
	p.mu.Lock()
	if _, ok := p.cobs[txid]; ok {
		p.twice++
	}
	p.cobs[txid] = out
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	w.Write(out) //nolint:errcheck
}

func (p *pixServer) getCob(w http.ResponseWriter, r *http.Request) {
	if !p.authorized(w, r) {
		return
	}
	p.mu.Lock()
	out, ok := p.cobs[r.PathValue("txid")]
	p.mu.Unlock()
	if !ok {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"type":"https://pix.bcb.gov.br/api/v2/error/CobNaoEncontrado","title":"Cobrança não encontrada.","status":404}`) //nolint:errcheck
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(out) //nolint:errcheck
}

// overwrites is how many PUTs named a txid that had a charge already.
func (p *pixServer) overwrites() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.twice
}

// timedCob is pix.cob with its call timed like the benchmark tool's
// (toolTimer), so that the runtime's added latency excludes the PSP's;
// every other method (schema, system fields, Lookup) is pix.cob's own.
type timedCob struct{ *apipix.Cob }

func (t timedCob) Execute(ctx context.Context, key string, p derive.Payload) (json.RawMessage, error) {
	return timed(ctx, func() (json.RawMessage, error) { return t.Cob.Execute(ctx, key, p) })
}

// cobEnv is retrysafe with pix.cob against the local API Pix server.
type cobEnv struct {
	*rsEnv
	pix *pixServer
}

func newCobEnv(ctx context.Context, db *database, conns int) (*cobEnv, error) {
	p, err := db.pool(ctx, conns)
	if err != nil {
		return nil, err
	}
	pix := newPixServer()
	fail := func(err error) (*cobEnv, error) {
		pix.Close()
		p.Close()
		return nil, err
	}
	cob, err := apipix.NewCob(apipix.Config{BaseURL: pix.srv.URL + "/api", ClientID: pixClientID, ClientSecret: pixClientSecret,
		Chave: pixChave, Client: pix.client})
	if err != nil {
		return fail(err)
	}
	reg, err := tools.NewRegistry(timedCob{cob})
	if err != nil {
		return fail(err)
	}
	d, err := reg.Deriver(secret)
	if err != nil {
		return fail(err)
	}
	store, err := intent.New(intent.Config{Deriver: d, Logger: quiet})
	if err != nil {
		return fail(err)
	}
	cfg := executor.Config{DB: p, Intents: store, Tools: reg, Owner: "bench", Logger: quiet}
	if tuning != nil {
		tuning(&cfg)
	}
	ex, err := executor.New(cfg)
	if err != nil {
		return fail(err)
	}
	return &cobEnv{rsEnv: &rsEnv{pool: p, store: store, ex: ex}, pix: pix}, nil
}

func (e *cobEnv) close() {
	e.pool.Close()
	e.pix.Close()
}

// cobCall is call i of the pix.cob workload: a new intent_ref per call,
// a payer with a CPF, as a model would extract them.
func cobCall(run string, i int64) executor.Call {
	return executor.Call{
		Tenant: benchTenant, Ref: fmt.Sprintf("cob-%s-%d", run, i), Action: apipix.CobName,
		Fields:    map[string]any{"amount": "180,00", "payer_tax_id": "529.982.247-25", "payer_name": fmt.Sprintf("Cliente %d", i%1000)},
		SourceRef: fmt.Sprintf("wamid.%s.%d", run, i),
	}
}

// rsCobWorkload: first executions of pix.cob: freeze + claim, PUT
// /api/cob/{txid} (the txid from the key; the token fetched once and
// cached), the fenced completion. Compared with the floor like the
// benchmark tool's first execution.
func (b *bench) rsCobWorkload() workload {
	run := randHex(4)
	var e *cobEnv
	return workload{
		system: "retrysafe", name: cobName, prep: migrated,
		start: func(ctx context.Context, db *database, conns int) (opFunc, func(), error) {
			var err error
			if e, err = newCobEnv(ctx, db, conns); err != nil {
				return nil, nil, err
			}
			op := func(ctx context.Context, _ int, i int64) (toolSpan, error) {
				return e.execute(ctx, cobCall(run, i), false)
			}
			return op, e.close, nil
		},
		after: func(ctx context.Context, db *database, r *result) error {
			if n := e.pix.overwrites(); n != 0 {
				return fmt.Errorf("%d PUTs on a txid that had a charge", n)
			}
			if e.pix.puts.Load() == 0 {
				return fmt.Errorf("no cob PUT reached the API Pix server")
			}
			return nil
		},
	}
}
