package apipix_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/internal/pixspec"
	"github.com/retrysafe/retrysafe/internal/testutil"
	sandbox "github.com/retrysafe/retrysafe/sandbox/apipix"
	"github.com/retrysafe/retrysafe/sandbox/fault"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/apipix"
)

const chave = "7d9f0335-8dcc-4054-9bf9-0dbd61d36906"

// env is a sandbox PSP and the two tools talking to it through a transport
// that validates every request and response against the specification.
type env struct {
	psp    *sandbox.Server
	srv    *httptest.Server
	spec   *pixspec.Transport
	faults *faultOnce
	cob    *apipix.Cob
	refund *apipix.Refund
	d      *derive.Deriver
}

// faultOnce adds an X-Sandbox-Fault header to the next request matching
// method and path suffix.
type faultOnce struct {
	base http.RoundTripper
	mu   sync.Mutex
	arm  []armed
}

type armed struct{ method, suffix, spec string }

func (f *faultOnce) Arm(method, suffix, spec string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.arm = append(f.arm, armed{method, suffix, spec})
}

func (f *faultOnce) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	for i, a := range f.arm {
		if r.Method == a.method && strings.HasSuffix(r.URL.Path, a.suffix) {
			r = r.Clone(r.Context())
			r.Header.Set(fault.Header, a.spec)
			f.arm = append(f.arm[:i], f.arm[i+1:]...)
			break
		}
	}
	f.mu.Unlock()
	return f.base.RoundTrip(r)
}

func newEnv(t *testing.T, mutate func(*apipix.Config)) *env {
	t.Helper()
	spec, err := pixspec.Load()
	if err != nil {
		t.Fatal(err)
	}
	psp, err := sandbox.New(sandbox.Config{ClientID: "cid", ClientSecret: "csecret"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(psp.Handler())
	t.Cleanup(srv.Close)
	e := &env{psp: psp, srv: srv}
	e.faults = &faultOnce{base: http.DefaultTransport}
	e.spec = &pixspec.Transport{Spec: spec, Base: e.faults}
	cfg := apipix.Config{
		BaseURL: srv.URL + "/api", ClientID: "cid", ClientSecret: "csecret", Chave: chave,
		Client: &http.Client{Transport: e.spec},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	if e.cob, err = apipix.NewCob(cfg); err != nil {
		t.Fatal(err)
	}
	if e.refund, err = apipix.NewRefund(cfg); err != nil {
		t.Fatal(err)
	}
	e.d, err = derive.New(derive.Config{Secret: []byte(strings.Repeat("k", 32)),
		Schemas: []derive.Schema{apipix.CobSchema(), apipix.RefundSchema()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, f := range e.spec.Failures() {
			t.Errorf("not valid against API Pix 2.9.0: %v", f.Err)
		}
	})
	return e
}

func (e *env) derive(t *testing.T, action string, fields map[string]any) *derive.Result {
	t.Helper()
	r, err := e.d.Derive("acme", action, fields, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func cobFields(ref string) map[string]any {
	return map[string]any{
		"amount": "180,00", "payer_tax_id": testutil.PunctuatedCPF(testutil.CPF(52998224)), "payer_name": "Fulano de Tal",
		"description": "Fatura " + ref, tools.RefField: ref,
	}
}

func classOf(t *testing.T, err error) *tools.Error {
	t.Helper()
	var te *tools.Error
	if !errors.As(err, &te) {
		t.Fatalf("error %v carries no class", err)
	}
	return te
}

func TestCobCreatesOnceAndLooksUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	r := e.derive(t, apipix.CobName, cobFields("NF-1"))
	txid, err := apipix.TxID(r.Key)
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.cob.Execute(ctx, r.Key, r.Payload)
	if err != nil {
		t.Fatal(err)
	}
	var got apipix.CobView
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.TxID != txid || got.Status != apipix.StatusAtiva || got.Valor.Original != "180.00" || got.Devedor.CPF != testutil.CPF(52998224) {
		t.Fatalf("charge = %+v", got)
	}
	// Same key again (a retry): the same body, the charge unchanged.
	if _, err := e.cob.Execute(ctx, r.Key, r.Payload); err != nil {
		t.Fatal(err)
	}
	// Lookup by key.
	if out, err := e.cob.Lookup(ctx, r.Key); err != nil || !strings.Contains(string(out), txid) {
		t.Fatalf("Lookup = %s, %v", out, err)
	}
	other := e.derive(t, apipix.CobName, cobFields("NF-2"))
	if _, err := e.cob.Lookup(ctx, other.Key); !errors.Is(err, tools.ErrNotFound) {
		t.Fatalf("Lookup of an unknown key = %v, want ErrNotFound", err)
	}
	st := e.psp.Stats()
	if st.CobCreated != 1 || st.CobOverwritten != 0 || st.CobUnchanged != 1 {
		t.Fatalf("stats = %+v", st)
	}
	if e.spec.Validated() < 4 {
		t.Fatalf("only %d exchanges validated", e.spec.Validated())
	}
}

func TestTxIDIsTheKeysPrefix(t *testing.T) {
	t.Parallel()
	key := strings.Repeat("0123456789abcdef", 4)
	txid, err := apipix.TxID(key)
	if err != nil || txid != key[:35] || len(txid) != 35 {
		t.Fatalf("TxID = %q, %v", txid, err)
	}
	for _, bad := range []string{"", key[:63], strings.ToUpper(key), key[:63] + "g"} {
		if _, err := apipix.TxID(bad); !errors.Is(err, apipix.ErrBadKey) {
			t.Errorf("TxID(%q) = %v, want ErrBadKey", bad, err)
		}
	}
}

func TestCobBodyIsAFunctionOfThePayload(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r1 := e.derive(t, apipix.CobName, cobFields("NF-1"))
	// The same intent extracted differently (punctuation, spacing, a number).
	f := cobFields("NF-1")
	f["amount"], f["payer_tax_id"], f["payer_name"] = 180.00, testutil.CPF(52998224), "  Fulano de Tal "
	r2 := e.derive(t, apipix.CobName, f)
	b1, err := e.cob.Body(r1.Payload)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := e.cob.Body(r2.Payload)
	if err != nil {
		t.Fatal(err)
	}
	j1, _ := json.Marshal(b1)
	j2, _ := json.Marshal(b2)
	if r1.Key != r2.Key || string(j1) != string(j2) {
		t.Fatalf("same intent, different key or body:\n%s\n%s", j1, j2)
	}
	if want := `{"calendario":{"expiracao":86400},"devedor":{"cpf":"` + testutil.CPF(52998224) +
		`","nome":"Fulano de Tal"},"valor":{"original":"180.00"},"chave":"` + chave + `","solicitacaoPagador":"Fatura NF-1"}`; string(j1) != want {
		t.Fatalf("body = %s\nwant   %s", j1, want)
	}
	// A CNPJ goes to devedor.cnpj.
	f = cobFields("NF-3")
	f["payer_tax_id"] = "11.222.333/0001-81"
	b3, err := e.cob.Body(e.derive(t, apipix.CobName, f).Payload)
	if err != nil || b3.Devedor.CNPJ != "11222333000181" || b3.Devedor.CPF != "" {
		t.Fatalf("CNPJ body = %+v, %v", b3.Devedor, err)
	}
}

func TestCobReadsBeforeWritingAfterAnUncertainOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	r := e.derive(t, apipix.CobName, cobFields("NF-1"))
	// The PSP creates the charge, then the connection drops.
	e.faults.Arm(http.MethodPut, "/cob/"+r.Key[:35], "drop-after")
	_, err := e.cob.Execute(ctx, r.Key, r.Payload)
	if te := classOf(t, err); te.Class != tools.ClassUncertain {
		t.Fatalf("dropped answer: %v, want uncertain", err)
	}
	// Meanwhile the customer paid.
	if _, err := e.psp.Pay(r.Key[:35], nil); err != nil {
		t.Fatal(err)
	}
	before := e.psp.Stats()
	out, err := e.cob.Execute(ctx, r.Key, r.Payload)
	if err != nil {
		t.Fatal(err)
	}
	after := e.psp.Stats()
	if !strings.Contains(string(out), `"CONCLUIDA"`) || after.CobPuts != before.CobPuts || after.CobReads != before.CobReads+1 {
		t.Fatalf("retry after an uncertain outcome: %s; PUTs %d→%d, reads %d→%d (want a read, no PUT)",
			out, before.CobPuts, after.CobPuts, before.CobReads, after.CobReads)
	}
}

func TestCobNeverOverwritesAnotherBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	r := e.derive(t, apipix.CobName, cobFields("NF-1"))
	if _, err := e.cob.Execute(ctx, r.Key, r.Payload); err != nil {
		t.Fatal(err)
	}
	// The same key under another configuration (another chave) after an
	// outcome it could not see: it must read, find another body, and
	// leave the ATIVA charge alone.
	moved := newToolOn(t, e, func(c *apipix.Config) { c.Chave = "outra@example.com" })
	e.faults.Arm(http.MethodPut, "/cob/"+r.Key[:35], "fail-before")
	if _, err := moved.Execute(ctx, r.Key, r.Payload); classOf(t, err).Class != tools.ClassUncertain {
		t.Fatalf("503: %v, want uncertain", err)
	}
	_, err := moved.Execute(ctx, r.Key, r.Payload)
	if te := classOf(t, err); te.Class != tools.ClassUncertain || te.Code != "cob_differs" {
		t.Fatalf("another body: %v, want uncertain cob_differs", err)
	}
	if st := e.psp.Stats(); st.CobOverwritten != 0 {
		t.Fatalf("an ATIVA charge was overwritten: %+v", st)
	}
}

func newToolOn(t *testing.T, e *env, mutate func(*apipix.Config)) *apipix.Cob {
	t.Helper()
	cfg := apipix.Config{BaseURL: e.srv.URL + "/api", ClientID: "cid", ClientSecret: "csecret", Chave: chave,
		Client: &http.Client{Transport: e.spec}}
	mutate(&cfg)
	c, err := apipix.NewCob(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTokenCachedAndRefreshedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	for i := range 3 {
		r := e.derive(t, apipix.CobName, cobFields("NF-"+string(rune('a'+i))))
		if _, err := e.cob.Execute(ctx, r.Key, r.Payload); err != nil {
			t.Fatal(err)
		}
	}
	if st := e.psp.Stats(); st.TokensIssued != 1 {
		t.Fatalf("three calls fetched %d tokens, want 1 (cached)", st.TokensIssued)
	}
	// The PSP drops its tokens: the next call is refused (403), refreshes
	// once and goes through.
	e.psp.ExpireTokens()
	r := e.derive(t, apipix.CobName, cobFields("NF-z"))
	if _, err := e.cob.Execute(ctx, r.Key, r.Payload); err != nil {
		t.Fatal(err)
	}
	if st := e.psp.Stats(); st.TokensIssued != 2 || st.AuthRefused != 1 || st.CobCreated != 4 {
		t.Fatalf("after expiry: %+v", st)
	}
}

func TestRefusedCredentialsAreTransient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *apipix.Config) { c.ClientSecret = "wrong" })
	r := e.derive(t, apipix.CobName, cobFields("NF-1"))
	_, err := e.cob.Execute(context.Background(), r.Key, r.Payload)
	te := classOf(t, err)
	if te.Class != tools.ClassTransient || te.Code != "oauth_token" || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("bad credentials: %v (class %s)", err, te.Class)
	}
	if st := e.psp.Stats(); st.CobPuts != 0 {
		t.Fatal("a PUT went out without a token")
	}
}

func pay(t *testing.T, e *env, ref string) (cobKey string, pix sandbox.Pix) {
	t.Helper()
	r := e.derive(t, apipix.CobName, cobFields(ref))
	if _, err := e.cob.Execute(context.Background(), r.Key, r.Payload); err != nil {
		t.Fatal(err)
	}
	p, err := e.psp.Pay(r.Key[:35], nil)
	if err != nil {
		t.Fatal(err)
	}
	return r.Key, p
}

func TestRefundOnceAndNeverOverThePaidAmount(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	_, p := pay(t, e, "NF-1")
	r1 := e.derive(t, apipix.RefundName, map[string]any{"e2eid": p.EndToEndID, "amount": "50,00", tools.RefField: "NF-1:refund:1"})
	out, err := e.refund.Execute(ctx, r1.Key, r1.Payload)
	if err != nil {
		t.Fatal(err)
	}
	var d apipix.DevolucaoView
	if json.Unmarshal(out, &d); d.ID != r1.Key[:35] || d.Valor != "50.00" {
		t.Fatalf("refund = %s", out)
	}
	// Again (a retry, a takeover): the refund made is the answer, no PUT.
	if _, err := e.refund.Execute(ctx, r1.Key, r1.Payload); err != nil {
		t.Fatal(err)
	}
	e.psp.Flush(ctx) // settles it: DEVOLVIDO
	if _, err := e.refund.Execute(ctx, r1.Key, r1.Payload); err != nil {
		t.Fatal(err)
	}
	if st := e.psp.Stats(); st.RefundPuts != 1 || st.RefundsCreated != 1 {
		t.Fatalf("stats = %+v, want one PUT", st)
	}
	// 50 refunded of 180: 130.01 more is refused before any PUT.
	r2 := e.derive(t, apipix.RefundName, map[string]any{"e2eid": p.EndToEndID, "amount": "130,01", tools.RefField: "NF-1:refund:2"})
	_, err = e.refund.Execute(ctx, r2.Key, r2.Payload)
	if te := classOf(t, err); te.Class != tools.ClassDefinitive || te.Code != apipix.ErrRefundExceedsPaid {
		t.Fatalf("over-refund: %v", err)
	}
	if st := e.psp.Stats(); st.RefundPuts != 1 {
		t.Fatalf("the over-refund reached the PSP: %+v", st)
	}
	// 130.00 is exactly the rest.
	r3 := e.derive(t, apipix.RefundName, map[string]any{"e2eid": p.EndToEndID, "amount": "130,00", tools.RefField: "NF-1:refund:3"})
	if _, err := e.refund.Execute(ctx, r3.Key, r3.Payload); err != nil {
		t.Fatal(err)
	}
}

func TestRefundOfAnUnknownPixIsDefinitive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.derive(t, apipix.RefundName, map[string]any{"e2eid": "E99999999202612010000" + "00000000042", "amount": "1,00", tools.RefField: "x"})
	_, err := e.refund.Execute(context.Background(), r.Key, r.Payload)
	if te := classOf(t, err); te.Class != tools.ClassDefinitive || te.Code != "PixNaoEncontrado" || te.Status != 404 {
		t.Fatalf("unknown Pix: %v (%+v)", err, te)
	}
}

func TestErrorsClassifiedFromProblemJSON(t *testing.T) {
	t.Parallel()
	var status atomic.Int32
	body := map[int32]string{
		400: `{"type":"https://pix.bcb.gov.br/api/v2/error/CobOperacaoInvalida","title":"Cobrança inválida.","status":400,"violacoes":[{"razao":"x","propriedade":"cob.valor.original","valor":"52998224725"}]}`,
		404: `{"type":"https://pix.bcb.gov.br/api/v2/error/NaoEncontrado","title":"Não Encontrado","status":404}`,
		503: `{"type":"https://pix.bcb.gov.br/api/v2/error/ServicoIndisponivel","title":"Serviço Indisponível","status":503}`,
		429: `{"type":"https://pix.bcb.gov.br/api/v2/error/LimiteExcedido","title":"Too many","status":429}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth/token" {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"access_token":"t","token_type":"Bearer","expires_in":3600}`))
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(int(status.Load()))
		w.Write([]byte(body[status.Load()]))
	}))
	defer srv.Close()
	cob, err := apipix.NewCob(apipix.Config{BaseURL: srv.URL + "/api", ClientID: "a", ClientSecret: "b", Chave: chave})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := derive.New(derive.Config{Secret: []byte(strings.Repeat("k", 32)), Schemas: []derive.Schema{apipix.CobSchema()}})
	r, err := d.Derive("acme", apipix.CobName, cobFields("NF-1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		status int32
		class  tools.Class
		code   string
	}{
		{400, tools.ClassDefinitive, "CobOperacaoInvalida"},
		{404, tools.ClassDefinitive, "NaoEncontrado"},
		{503, tools.ClassUncertain, "ServicoIndisponivel"},
		{429, tools.ClassTransient, "LimiteExcedido"},
	} {
		status.Store(c.status)
		_, err := cob.Execute(context.Background(), r.Key, r.Payload)
		te := classOf(t, err)
		if te.Class != c.class || te.Code != c.code || te.Status != int(c.status) {
			t.Errorf("%d: %+v, want %s %s", c.status, te, c.class, c.code)
		}
		if strings.Contains(err.Error(), "52998224725") {
			t.Errorf("%d: the error quotes a violation's value: %v", c.status, err)
		}
	}
}

func TestConfigRequiresWhatItNeeds(t *testing.T) {
	t.Parallel()
	ok := apipix.Config{BaseURL: "https://pix.example.com/api", ClientID: "a", ClientSecret: "b", Chave: chave}
	for name, mutate := range map[string]func(*apipix.Config){
		"no base":    func(c *apipix.Config) { c.BaseURL = "" },
		"ftp base":   func(c *apipix.Config) { c.BaseURL = "ftp://x" },
		"no id":      func(c *apipix.Config) { c.ClientID = "" },
		"no chave":   func(c *apipix.Config) { c.Chave = "" },
		"half cert":  func(c *apipix.Config) { c.CertFile = "cert.pem" },
		"bad token":  func(c *apipix.Config) { c.TokenURL = "nope" },
		"negative":   func(c *apipix.Config) { c.Expiracao = -1 },
		"no cert at": func(c *apipix.Config) { c.CertFile, c.KeyFile = "/nonexistent.pem", "/nonexistent.key" },
	} {
		c := ok
		mutate(&c)
		if _, err := apipix.NewCob(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := apipix.NewCob(ok); err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	cob, _ := apipix.NewCob(ok)
	refund, _ := apipix.NewRefund(ok)
	if err := reg.Register(cob); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(refund); err != nil {
		t.Fatal(err)
	}
	if _, can := tools.CanLookup(cob); !can {
		t.Error("pix.cob cannot be looked up")
	}
	if _, can := tools.CanLookup(refund); can {
		t.Error("pix.refund claims a lookup it cannot do without the e2eid")
	}
}
