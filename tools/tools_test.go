package tools_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

func builtins(t *testing.T, base string) *tools.Registry {
	t.Helper()
	pix, err := tools.NewPixCharge(tools.HTTPConfig{BaseURL: base, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	wa, err := tools.NewWhatsAppTemplate(tools.HTTPConfig{BaseURL: base, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	em, err := tools.NewEmailSend(tools.HTTPConfig{BaseURL: base, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := tools.NewRegistry(pix, wa, em)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRegistryOpenAITools(t *testing.T) {
	t.Parallel()
	r := builtins(t, "http://127.0.0.1:1")
	defs := r.OpenAITools()
	if len(defs) != 3 {
		t.Fatalf("got %d tools", len(defs))
	}
	names := []string{}
	for _, d := range defs {
		if d.Type != openai.ToolTypeFunction || d.Function == nil {
			t.Fatalf("bad tool %+v", d)
		}
		names = append(names, d.Function.Name)
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		// intent_ref comes from the system: never a model parameter.
		if strings.Contains(string(b), tools.RefField) {
			t.Errorf("%s: schema exposes %s: %s", d.Function.Name, tools.RefField, b)
		}
	}
	want := []string{"email_send", "pix_charge", "whatsapp_send_template"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("names %v, want %v", names, want)
	}
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(defs[1].Function.Parameters.(json.RawMessage), &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Type != "object" || !reflect.DeepEqual(schema.Required, []string{"customer_id", "amount", "pix_key"}) {
		t.Fatalf("pix schema: %+v", schema)
	}
	if _, ok := schema.Properties["pix_key_type"]; !ok {
		t.Fatal("pix_key_type missing")
	}
}

func TestRegistryDeriver(t *testing.T) {
	t.Parallel()
	r := builtins(t, "http://127.0.0.1:1")
	d, err := r.Deriver(secret)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := d.DefaultVersion(tools.PixChargeName); v != 3 {
		t.Fatalf("pix.charge default version %d, want 3", v)
	}
	// Intents frozen under version 2 keep it: the schema is still there.
	if _, err := d.Schema(tools.PixChargeName, 2); err != nil {
		t.Fatalf("pix.charge v2: %v", err)
	}
	if _, ok := d.DefaultVersion("pix.cobranca"); !ok {
		t.Fatal("builtin schemas missing")
	}
	a, err := d.Derive("t1", tools.PixChargeName, map[string]any{
		"customer_id": "c1", "amount": "180,00", "pix_key": "529.982.247-25", tools.RefField: "inv-1",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Derive("t1", tools.PixChargeName, map[string]any{
		"customer_id": "c1", "amount": json.Number("180"), "pix_key": "52998224725", "pix_key_type": "cpf", tools.RefField: "inv-1",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Key != b.Key {
		t.Fatalf("equivalent extractions gave two keys:\n%s\n%s", a.Canonical, b.Canonical)
	}
}

func TestRegistryRejects(t *testing.T) {
	t.Parallel()
	ok := &tools.Func{ToolName: "a.b", Fields: derive.Schema{Fields: []derive.Field{{Name: "x", Rule: derive.RuleText}}}}
	if _, err := tools.NewRegistry(ok, ok); err == nil {
		t.Error("duplicate accepted")
	}
	clash := &tools.Func{ToolName: "a_b", Fields: derive.Schema{Fields: []derive.Field{{Name: "x", Rule: derive.RuleText}}}}
	if _, err := tools.NewRegistry(ok, clash); err == nil {
		t.Error("function-name clash accepted")
	}
	noRule := &tools.Func{ToolName: "c", Fields: derive.Schema{Fields: []derive.Field{{Name: "x"}}}}
	if _, err := tools.NewRegistry(noRule); err == nil {
		t.Error("field without rule accepted")
	}
	badSys := &tools.Func{ToolName: "d", System: []string{"nope"}, Fields: derive.Schema{Fields: []derive.Field{{Name: "x", Rule: derive.RuleText}}}}
	if _, err := tools.NewRegistry(badSys); err == nil {
		t.Error("unknown system field accepted")
	}
}

func TestParseToolCall(t *testing.T) {
	t.Parallel()
	r := builtins(t, "http://127.0.0.1:1")
	c, err := r.ParseToolCall(openai.ToolCall{Type: openai.ToolTypeFunction, Function: openai.FunctionCall{
		Name: "pix_charge", Arguments: `{"customer_id":"c1","amount":180.10,"pix_key":"x","intent_ref":"model-made"}`,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Action != tools.PixChargeName {
		t.Fatalf("action %q", c.Action)
	}
	if _, ok := c.Fields[tools.RefField]; ok {
		t.Fatal("model-supplied intent_ref kept")
	}
	if n, ok := c.Fields["amount"].(json.Number); !ok || n != "180.10" {
		t.Fatalf("amount decoded as %T %v, want json.Number 180.10", c.Fields["amount"], c.Fields["amount"])
	}
	if _, err := r.ParseToolCall(openai.ToolCall{Function: openai.FunctionCall{Name: "nope"}}); !errors.Is(err, tools.ErrUnknownTool) {
		t.Fatalf("unknown tool: %v", err)
	}
	if _, err := r.ParseFunctionCall("pix_charge", `[1]`); err == nil {
		t.Fatal("non-object arguments accepted")
	}
}

func FuzzParseFunctionCall(f *testing.F) {
	r, err := tools.NewRegistry(&tools.Func{ToolName: "pix.charge", Fields: tools.PixChargeSchema()})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{`{}`, `{"amount":1e400}`, `{"intent_ref":"x","amount":"1,00"}`, `null`, ``, `{"a":[1,{"b":null}]}`, "{\"\xff\":1}"} {
		f.Add("pix_charge", s)
	}
	f.Fuzz(func(t *testing.T, name, args string) {
		c, err := r.ParseFunctionCall(name, args)
		if err != nil {
			return
		}
		if _, ok := c.Fields[tools.RefField]; ok {
			t.Fatal("system field survived parsing")
		}
		if c.Action != "pix.charge" {
			t.Fatalf("resolved %q to %q", name, c.Action)
		}
	})
}

func payload(t *testing.T, d *derive.Deriver, fields map[string]any) (string, derive.Payload) {
	t.Helper()
	r, err := d.Derive("t1", tools.PixChargeName, fields, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r.Key, r.Payload
}

func TestPixChargeAgainstFake(t *testing.T) {
	t.Parallel()
	psp := toolstest.NewProvider()
	defer psp.Close()
	psp.Token = "tok"
	r := builtins(t, psp.URL)
	d, _ := r.Deriver(secret)
	tool, _ := r.Tool(tools.PixChargeName)
	key, p := payload(t, d, map[string]any{"customer_id": "c1", "amount": "R$ 180,00", "pix_key": "529.982.247-25", tools.RefField: "inv-1"})
	ctx := context.Background()

	resp, err := tool.Execute(ctx, key, p)
	if err != nil {
		t.Fatal(err)
	}
	var ch struct {
		ID          string `json:"id"`
		AmountCents int64  `json:"amount_cents"`
		PixKey      string `json:"pix_key"`
		PixKeyType  string `json:"pix_key_type"`
		Status      string `json:"status"`
		Key         string `json:"idempotency_key"`
	}
	if err := json.Unmarshal(resp, &ch); err != nil {
		t.Fatal(err)
	}
	if ch.AmountCents != 18000 || ch.PixKey != "52998224725" || ch.PixKeyType != "cpf" || ch.Status != "paid" || ch.Key != key {
		t.Fatalf("charge %+v", ch)
	}
	// Same key again: the provider replays, no second charge.
	if _, err := tool.Execute(ctx, key, p); err != nil {
		t.Fatal(err)
	}
	if psp.Count("") != 1 || psp.Replays() != 1 {
		t.Fatalf("charges %d replays %d", psp.Count(""), psp.Replays())
	}
	lk, ok := tools.CanLookup(tool)
	if !ok {
		t.Fatal("pix.charge cannot look up")
	}
	got, err := lk.Lookup(ctx, key)
	if err != nil || !strings.Contains(string(got), ch.ID) {
		t.Fatalf("lookup: %s %v", got, err)
	}
	if _, err := lk.Lookup(ctx, strings.Repeat("0", 64)); !errors.Is(err, tools.ErrNotFound) {
		t.Fatalf("lookup of unknown key: %v", err)
	}
}

func TestPixChargeFailureClasses(t *testing.T) {
	t.Parallel()
	psp := toolstest.NewProvider()
	defer psp.Close()
	psp.SlowDelay = 300 * time.Millisecond
	r := builtins(t, psp.URL)
	d, _ := r.Deriver(secret)
	// Fresh connections: net/http transparently retries a request that
	// carries an Idempotency-Key on a reused connection, hiding the fault.
	pix, _ := tools.NewPixCharge(tools.HTTPConfig{BaseURL: psp.URL, Client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}})

	cases := []struct {
		fault toolstest.Fault
		class tools.Class
		acted int
	}{
		{toolstest.FailBefore, tools.ClassUncertain, 0},
		{toolstest.Reject, tools.ClassDefinitive, 0},
		{toolstest.RateLimit, tools.ClassTransient, 0},
		{toolstest.DropAfter, tools.ClassUncertain, 1},
		{toolstest.Slow, tools.ClassUncertain, 1},
	}
	for i, c := range cases {
		ref := "inv-" + string(rune('a'+i))
		key, p := payload(t, d, map[string]any{"customer_id": "c1", "amount": 10, "pix_key": "a@b.co", tools.RefField: ref})
		psp.SetFault(func(r toolstest.Request) toolstest.Fault {
			if r.Key == key && r.N == 1 {
				return c.fault
			}
			return toolstest.None
		})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := pix.Execute(ctx, key, p)
		cancel()
		te := tools.Classify(err)
		if te == nil || te.Class != c.class {
			t.Errorf("fault %d: class %+v, want %s (err %v)", c.fault, te, c.class, err)
		}
		if c.fault == toolstest.Slow {
			// It acts SlowDelay after the request, long after the client
			// gave up: wait for that charge, not for a guess of its time.
			for deadline := time.Now().Add(psp.SlowDelay + 10*time.Second); psp.CountKey(key) < c.acted && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if got := psp.CountKey(key); got != c.acted {
			t.Errorf("fault %d: provider acted %d times, want %d", c.fault, got, c.acted)
		}
		// The same key afterwards: exactly one charge, whatever happened.
		if _, err := pix.Execute(context.Background(), key, p); err != nil && c.class != tools.ClassDefinitive {
			t.Errorf("fault %d: retry: %v", c.fault, err)
		}
	}
}

func TestStatusError(t *testing.T) {
	t.Parallel()
	want := map[int]tools.Class{
		200: "", 201: "", 400: tools.ClassDefinitive, 401: tools.ClassDefinitive, 403: tools.ClassDefinitive,
		404: tools.ClassDefinitive, 422: tools.ClassDefinitive, 409: tools.ClassUncertain, 429: tools.ClassTransient,
		500: tools.ClassUncertain, 502: tools.ClassUncertain, 503: tools.ClassUncertain, 504: tools.ClassUncertain,
		302: tools.ClassUncertain,
	}
	for status, class := range want {
		err := tools.StatusError(status)
		got := tools.Class("")
		if err != nil {
			got = tools.Classify(err).Class
		}
		if got != class {
			t.Errorf("HTTP %d: class %q, want %q", status, got, class)
		}
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	if tools.Classify(nil) != nil {
		t.Fatal("nil classified")
	}
	if c := tools.Classify(errors.New("boom")).Class; c != tools.ClassUncertain {
		t.Fatalf("unknown error: %s", c)
	}
	if c := tools.Classify(context.DeadlineExceeded).Class; c != tools.ClassUncertain {
		t.Fatalf("deadline: %s", c)
	}
	// A refused connection never reached the provider.
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	pix, _ := tools.NewPixCharge(tools.HTTPConfig{BaseURL: url})
	_, err := pix.Execute(context.Background(), "k", derive.Payload{{Name: "amount", Value: "100"}})
	if c := tools.Classify(err).Class; c != tools.ClassTransient {
		t.Fatalf("connection refused: %s (%v)", c, err)
	}
	wrapped := errors.Join(errors.New("ctx"), tools.Definitive("x", "y", nil))
	if c := tools.Classify(wrapped).Class; c != tools.ClassDefinitive {
		t.Fatalf("wrapped definitive: %s", c)
	}
	// A provider whose certificate does not verify never read the request.
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsSrv.Close()
	pix, _ = tools.NewPixCharge(tools.HTTPConfig{BaseURL: tlsSrv.URL})
	_, err = pix.Execute(context.Background(), "k", derive.Payload{{Name: "amount", Value: "100"}})
	if te := tools.Classify(err); te.Class != tools.ClassTransient || te.Code != "tls" {
		t.Fatalf("unverified server certificate: %s %s (%v)", te.Class, te.Code, err)
	}
	// The peer's alerts as crypto/tls reports them: one refusing the
	// handshake, and one that may come after the request was read.
	for alert, want := range map[tls.AlertError]tools.Class{42: tools.ClassTransient, 116: tools.ClassTransient, 80: tools.ClassUncertain} {
		err := fmt.Errorf("Put \"https://psp\": %w", &net.OpError{Op: "remote error", Err: alert})
		if c := tools.Classify(err).Class; c != want {
			t.Errorf("remote alert %q: %s, want %s", alert.Error(), c, want)
		}
	}
}

func TestAuthFailureIsDefinitive(t *testing.T) {
	t.Parallel()
	psp := toolstest.NewProvider()
	defer psp.Close()
	psp.Token = "right"
	pix, _ := tools.NewPixCharge(tools.HTTPConfig{BaseURL: psp.URL, Token: "wrong"})
	_, err := pix.Execute(context.Background(), "k", derive.Payload{{Name: "amount", Value: "100"}, {Name: "pix_key", Value: "a@b.co"}})
	var te *tools.Error
	if !errors.As(err, &te) || te.Class != tools.ClassDefinitive || te.Status != 401 {
		t.Fatalf("got %v", err)
	}
	if psp.Count("") != 0 {
		t.Fatal("charged without auth")
	}
}

func TestMessagingTools(t *testing.T) {
	t.Parallel()
	psp := toolstest.NewProvider()
	defer psp.Close()
	r := builtins(t, psp.URL)
	d, _ := r.Deriver(secret)
	ctx := context.Background()
	wa, _ := r.Tool(tools.WhatsAppName)
	res, err := d.Derive("t1", tools.WhatsAppName, map[string]any{"to": "(11) 98765-4321", "template": "Cobranca_Pix", tools.RefField: "inv-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := wa.Execute(ctx, res.Key, res.Payload); err != nil {
			t.Fatal(err)
		}
	}
	em, _ := r.Tool(tools.EmailSendName)
	res2, err := d.Derive("t1", tools.EmailSendName, map[string]any{"to": " Ana@Example.com ", "template": "recibo", tools.RefField: "inv-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := em.Execute(ctx, res2.Key, res2.Payload); err != nil {
		t.Fatal(err)
	}
	if psp.Count("/v1/messages") != 1 || psp.Count("/v1/emails") != 1 {
		t.Fatalf("messages %d emails %d", psp.Count("/v1/messages"), psp.Count("/v1/emails"))
	}
	msgs := psp.Records("/v1/messages")
	if msgs[0]["to"] != "+5511987654321" || msgs[0]["template"] != "cobranca_pix" {
		t.Fatalf("message %v", msgs[0])
	}
}
