package apipix_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/retrysafe/retrysafe/internal/pixspec"
	"github.com/retrysafe/retrysafe/sandbox/apipix"
	"github.com/retrysafe/retrysafe/sandbox/fault"
)

// The API Pix 2.9.0 specification, through kin-openapi's openapi3filter,
// is the judge of every shape here. The published file writes 14 patterns
// as JavaScript regex literals ("/^\\d{11}$/" for the CPF), which match no
// CPF as JSON Schema patterns; internal/pixspec rewrites them to the
// pattern between the slashes when loading (TestSpecNormalization pins the
// count and shows a valid CPF failing without it).

const txidA = "a1b2c3d4e5f60718293a4b5c6d7e8f901"
const txidB = "b1b2c3d4e5f60718293a4b5c6d7e8f902"

func loadSpec(t *testing.T) *pixspec.Spec {
	t.Helper()
	s, err := pixspec.Load()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// exchange is one request/response pair as seen on the wire.
type exchange struct {
	method, path string
	reqBody      []byte
	req          *http.Request
	status       int
	header       http.Header
	body         []byte
}

// client talks to the sandbox through the validating transport and keeps
// every exchange.
type client struct {
	t    *testing.T
	base string
	tr   *pixspec.Transport
	tok  string
	mu   sync.Mutex
	seen []exchange
}

func (c *client) do(method, path string, body any, hdr ...string) exchange {
	c.t.Helper()
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(raw))
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.tok)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{Transport: c.tr}).Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	ex := exchange{method: method, path: path, reqBody: raw, req: req, status: resp.StatusCode, header: resp.Header, body: b}
	c.mu.Lock()
	c.seen = append(c.seen, ex)
	c.mu.Unlock()
	return ex
}

func token(t *testing.T, base, id, secret string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/oauth/token", strings.NewReader("grant_type=client_credentials"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(id, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int    `json:"expires_in"`
	}
	json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode == 200 && (out.TokenType != "Bearer" || out.ExpiresIn <= 0) {
		t.Fatalf("token answer %+v", out)
	}
	return resp.StatusCode, out.AccessToken
}

func cobBody(valor string) map[string]any {
	return map[string]any{
		"calendario":         map[string]any{"expiracao": 3600},
		"devedor":            map[string]any{"cpf": "52998224725", "nome": "Fulano de Tal"},
		"valor":              map[string]any{"original": valor},
		"chave":              "7d9f0335-8dcc-4054-9bf9-0dbd61d36906",
		"solicitacaoPagador": "Fatura NF-2026-000123",
	}
}

// callbacks is a webhook receiver that validates and keeps each body.
type callbacks struct {
	spec   *pixspec.Spec
	mu     sync.Mutex
	bodies [][]byte
	paths  []string
	errs   []error
}

func (c *callbacks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bodies = append(c.bodies, b)
	c.paths = append(c.paths, r.URL.RequestURI())
	if err := c.spec.ValidateCallback(b); err != nil {
		c.errs = append(c.errs, err)
	}
}

func TestEveryShapeValidates(t *testing.T) {
	t.Parallel()
	spec := loadSpec(t)
	hooks := &callbacks{spec: spec}
	hook := httptest.NewServer(hooks)
	defer hook.Close()
	psp, err := apipix.New(apipix.Config{ClientID: "id", ClientSecret: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(psp.Handler())
	defer srv.Close()

	if st, _ := token(t, srv.URL, "id", "wrong"); st != http.StatusUnauthorized {
		t.Fatalf("bad credentials: %d, want 401", st)
	}
	st, tok := token(t, srv.URL, "id", "secret")
	if st != 200 || tok == "" {
		t.Fatalf("token: %d", st)
	}
	tr := &pixspec.Transport{Spec: spec}
	c := &client{t: t, base: srv.URL + "/api", tr: tr, tok: tok}
	want := func(ex exchange, status int) exchange {
		t.Helper()
		if ex.status != status {
			t.Fatalf("%s %s: %d %s, want %d", ex.method, ex.path, ex.status, ex.body, status)
		}
		return ex
	}

	want(c.do("PUT", "/webhook/7d9f0335-8dcc-4054-9bf9-0dbd61d36906", map[string]string{"webhookUrl": hook.URL + "/hook?hmac=x&ignorar="}), 200)
	want(c.do("GET", "/webhook/7d9f0335-8dcc-4054-9bf9-0dbd61d36906", nil), 200)
	want(c.do("PUT", "/cob/"+txidA, cobBody("180.00")), 201)
	want(c.do("PUT", "/cob/"+txidA, cobBody("180.00")), 201) // repeated: 201, as the spec says
	want(c.do("PUT", "/cob/"+txidB, cobBody("20.00")), 201)
	want(c.do("GET", "/cob/"+txidA, nil), 200)
	want(c.do("GET", "/cob/zzzzzzzzzzzzzzzzzzzzzzzzzzzz", nil), 404)
	want(c.do("PUT", "/cob/"+txidA, map[string]any{"valor": map[string]any{"original": "0.00"}, "chave": "k", "calendario": map[string]any{"expiracao": 10}}), 400)
	want(c.do("PUT", "/cob/"+txidA, cobBody("1.00"), fault.Header, "fail-before"), 503)
	c.tok = "expired"
	want(c.do("GET", "/cob/"+txidA, nil), 403)
	c.tok = tok

	pa, err := psp.Pay(txidA, &apipix.PayOpts{InfoPagador: "pago"})
	if err != nil {
		t.Fatal(err)
	}
	pb, err := psp.Pay(txidB, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := psp.Pay(txidA, nil); err == nil {
		t.Fatal("a CONCLUIDA charge took a second payment")
	}
	want(c.do("GET", "/cob/"+txidA, nil), 200)
	want(c.do("PUT", "/cob/"+txidA, cobBody("181.00")), 400) // no longer ATIVA
	want(c.do("GET", "/pix/"+pa.EndToEndID, nil), 200)
	want(c.do("GET", "/pix/E0000000000000000000000000000000", nil), 404)
	want(c.do("PUT", "/pix/"+pa.EndToEndID+"/devolucao/d1", map[string]string{"valor": "30.00"}), 201)
	want(c.do("PUT", "/pix/"+pa.EndToEndID+"/devolucao/d1", map[string]string{"valor": "30.00"}), 201)
	want(c.do("PUT", "/pix/"+pa.EndToEndID+"/devolucao/d1", map[string]string{"valor": "31.00"}), 400)  // id reused
	want(c.do("PUT", "/pix/"+pa.EndToEndID+"/devolucao/d2", map[string]string{"valor": "150.01"}), 400) // over the Pix
	want(c.do("GET", "/pix/"+pa.EndToEndID+"/devolucao/d1", nil), 200)
	want(c.do("GET", "/pix/"+pa.EndToEndID+"/devolucao/nope", nil), 404)

	// Two Pix are paid: one callback carries both (grouping).
	if n := psp.Flush(context.Background()); n != 1 {
		t.Fatalf("first flush sent %d callbacks, want 1 (settled refund, two Pix: grouped)", n)
	}
	if err := psp.Redeliver(pb.EndToEndID); err != nil {
		t.Fatal(err)
	}
	if n := psp.Flush(context.Background()); n != 1 {
		t.Fatalf("redelivery sent %d callbacks", n)
	}
	want(c.do("GET", "/pix/"+pa.EndToEndID+"/devolucao/d1", nil), 200) // DEVOLVIDO now
	want(c.do("DELETE", "/webhook/7d9f0335-8dcc-4054-9bf9-0dbd61d36906", nil), 204)
	want(c.do("GET", "/webhook/7d9f0335-8dcc-4054-9bf9-0dbd61d36906", nil), 404)

	for _, f := range tr.Failures() {
		t.Errorf("%s %s: %v", f.Method, f.Path, f.Err)
	}
	if got := tr.Validated(); got != len(c.seen) {
		t.Errorf("validated %d of %d exchanges", got, len(c.seen))
	}
	shapes := map[string]bool{}
	for _, ex := range c.seen {
		p := regexp.MustCompile(`/[A-Za-z0-9]{20,}`).ReplaceAllString(ex.path, "/{id}")
		shapes[fmt.Sprintf("%s %s %d", ex.method, p, ex.status)] = true
	}
	t.Logf("%d exchanges validated, %d shapes: %v", tr.Validated(), len(shapes), slices.Sorted(maps.Keys(shapes)))
	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	for _, err := range hooks.errs {
		t.Errorf("callback: %v", err)
	}
	t.Logf("%d callbacks validated", len(hooks.bodies))
	if len(hooks.bodies) != 2 {
		t.Fatalf("%d callbacks, want 2", len(hooks.bodies))
	}
	var first apipix.Callback
	json.Unmarshal(hooks.bodies[0], &first)
	if len(first.Pix) != 2 {
		t.Fatalf("first callback holds %d Pix, want 2: %s", len(first.Pix), hooks.bodies[0])
	}
	if hooks.paths[0] != "/hook?hmac=x&ignorar=/pix" {
		t.Errorf("callback went to %q: the PSP appends /pix to the URL's text", hooks.paths[0])
	}
	st2 := psp.Stats()
	if st2.CobOverwritten != 0 || st2.CobCreated != 2 || st2.RefundsCreated != 1 || st2.MaxPixPerCall != 2 {
		t.Errorf("stats %+v", st2)
	}
}

func TestSandboxUpsertsAnActiveCharge(t *testing.T) {
	t.Parallel()
	spec := loadSpec(t)
	psp, _ := apipix.New(apipix.Config{})
	srv := httptest.NewServer(psp.Handler())
	defer srv.Close()
	_, tok := token(t, srv.URL, apipix.DefaultClientID, apipix.DefaultClientSecret)
	tr := &pixspec.Transport{Spec: spec}
	c := &client{t: t, base: srv.URL + "/api", tr: tr, tok: tok}
	c.do("PUT", "/cob/"+txidA, cobBody("180.00"))
	ex := c.do("PUT", "/cob/"+txidA, cobBody("99.00"))
	var got apipix.Cob
	json.Unmarshal(ex.body, &got)
	if ex.status != 201 || got.Valor.Original != "99.00" || got.Revisao != 1 {
		t.Fatalf("PUT over an ATIVA charge: %d %s (the spec's upsert)", ex.status, ex.body)
	}
	if st := psp.Stats(); st.CobOverwritten != 1 {
		t.Fatalf("overwrite not counted: %+v", st)
	}
	for _, f := range tr.Failures() {
		t.Errorf("%v", f.Err)
	}
}

func TestSpecNormalization(t *testing.T) {
	t.Parallel()
	spec := loadSpec(t)
	if spec.Normalized != 14 {
		t.Fatalf("rewrote %d JavaScript-literal patterns, want the 14 of release 2.9.0", spec.Normalized)
	}
	raw, err := pixspec.ReadFile()
	if err != nil {
		t.Fatal(err)
	}
	verbatim, err := pixspec.ParseVerbatim(raw)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(cobBody("180.00"))
	req := func() *http.Request {
		r, _ := http.NewRequest("PUT", "/api/cob/"+txidA, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer t")
		return r
	}
	if err := spec.ValidateRequest(req(), body); err != nil {
		t.Fatalf("normalized: a valid charge fails: %v", err)
	}
	if err := verbatim.ValidateRequest(req(), body); err == nil {
		t.Fatal("verbatim: a valid CPF passed the literal /^\\d{11}$/ pattern; normalization would be pointless")
	}
}

// TestBrokenShapesFail mutates one field of a valid request, response or
// callback at a time and expects the validator to refuse each: a validator
// that passed everything would make TestEveryShapeValidates worthless.
func TestBrokenShapesFail(t *testing.T) {
	t.Parallel()
	spec := loadSpec(t)
	psp, _ := apipix.New(apipix.Config{})
	srv := httptest.NewServer(psp.Handler())
	defer srv.Close()
	_, tok := token(t, srv.URL, apipix.DefaultClientID, apipix.DefaultClientSecret)
	c := &client{t: t, base: srv.URL + "/api", tr: &pixspec.Transport{Spec: spec}, tok: tok}
	put := c.do("PUT", "/cob/"+txidA, cobBody("180.00"))
	p, _ := psp.Pay(txidA, nil)
	getCob := c.do("GET", "/cob/"+txidA, nil)
	dev := c.do("PUT", "/pix/"+p.EndToEndID+"/devolucao/d1", map[string]string{"valor": "1.00"})
	psp.Flush(context.Background())
	cb, _ := json.Marshal(apipix.Callback{Pix: []apipix.Pix{p}})

	mutate := func(raw []byte, f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	sub := func(m map[string]any, k string) map[string]any { return m[k].(map[string]any) }
	first := func(m map[string]any) map[string]any { return m["pix"].([]any)[0].(map[string]any) }

	reqCheck := func(ex exchange, body []byte) error {
		r := ex.req.Clone(context.Background())
		return spec.ValidateRequest(r, body)
	}
	respCheck := func(ex exchange, status int, body []byte) error {
		return spec.ValidateResponse(ex.req.Clone(context.Background()), ex.reqBody, status, ex.header, body)
	}
	// The unbroken shapes pass.
	for name, err := range map[string]error{
		"request":   reqCheck(put, put.reqBody),
		"response":  respCheck(put, put.status, put.body),
		"get":       respCheck(getCob, getCob.status, getCob.body),
		"devolucao": respCheck(dev, dev.status, dev.body),
		"callback":  spec.ValidateCallback(cb),
	} {
		if err != nil {
			t.Fatalf("%s: unbroken shape fails: %v", name, err)
		}
	}
	cases := map[string]error{
		"request valor.original without cents": reqCheck(put, mutate(put.reqBody, func(m map[string]any) { sub(m, "valor")["original"] = "180" })),
		"request devedor.cpf of 10 digits":     reqCheck(put, mutate(put.reqBody, func(m map[string]any) { sub(m, "devedor")["cpf"] = "5299822472" })),
		"request devedor with cpf and cnpj":    reqCheck(put, mutate(put.reqBody, func(m map[string]any) { sub(m, "devedor")["cnpj"] = "11222333000181" })),
		"request without chave":                reqCheck(put, mutate(put.reqBody, func(m map[string]any) { delete(m, "chave") })),
		"request expiracao as a string":        reqCheck(put, mutate(put.reqBody, func(m map[string]any) { sub(m, "calendario")["expiracao"] = "3600" })),
		"request solicitacaoPagador too long":  reqCheck(put, mutate(put.reqBody, func(m map[string]any) { m["solicitacaoPagador"] = strings.Repeat("x", 141) })),
		"response status not an enum value":    respCheck(put, 201, mutate(put.body, func(m map[string]any) { m["status"] = "PAGA" })),
		"response without txid":                respCheck(put, 201, mutate(put.body, func(m map[string]any) { delete(m, "txid") })),
		"response revisao as a string":         respCheck(put, 201, mutate(put.body, func(m map[string]any) { m["revisao"] = "0" })),
		"response status code 500":             respCheck(put, 500, put.body),
		"get pix endToEndId of 31":             respCheck(getCob, 200, mutate(getCob.body, func(m map[string]any) { first(m)["endToEndId"] = "E1234567890123456789012345678901"[:31] })),
		"devolucao status unknown":             respCheck(dev, 201, mutate(dev.body, func(m map[string]any) { m["status"] = "FEITO" })),
		"devolucao without rtrId":              respCheck(dev, 201, mutate(dev.body, func(m map[string]any) { delete(m, "rtrId") })),
		"callback valor without cents":         spec.ValidateCallback(mutate(cb, func(m map[string]any) { first(m)["valor"] = "180" })),
		"callback without endToEndId":          spec.ValidateCallback(mutate(cb, func(m map[string]any) { delete(first(m), "endToEndId") })),
		"callback horario not a date-time":     spec.ValidateCallback(mutate(cb, func(m map[string]any) { first(m)["horario"] = "ontem" })),
		"callback pix not an array":            spec.ValidateCallback(mutate(cb, func(m map[string]any) { m["pix"] = first(m) })),
	}
	for name, err := range cases {
		if err == nil {
			t.Errorf("%s: the validator accepted it", name)
		}
	}
	t.Logf("%d broken shapes, each refused", len(cases))
	if len(cases) < 15 {
		t.Fatal("cases went missing")
	}
}
