package model_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/sandbox/model"
	"github.com/retrysafe/retrysafe/tools"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

type fixture struct {
	srv    *model.Server
	url    string
	client *openai.Client
	reg    *tools.Registry
	der    *derive.Deriver
}

func newFixture(t *testing.T, cfg model.Config) *fixture {
	t.Helper()
	srv, err := model.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	oc := openai.DefaultConfig("sk-test")
	oc.BaseURL = hs.URL + "/v1"
	// The agent's registry: the model sees pix_charge and the others.
	pix, err := tools.NewPixCharge(tools.HTTPConfig{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	wa, err := tools.NewWhatsAppTemplate(tools.HTTPConfig{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(pix, wa)
	if err != nil {
		t.Fatal(err)
	}
	der, err := reg.Deriver(secret)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{srv: srv, url: hs.URL, client: openai.NewClientWithConfig(oc), reg: reg, der: der}
}

const system = "Você é o assistente de cobrança da Loja Exemplo. customer_id: C-42. Seja breve."

func (f *fixture) request(user string) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model: "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: system},
			{Role: openai.ChatMessageRoleUser, Content: user},
		},
		Tools: f.reg.OpenAITools(),
	}
}

// derive runs a tool call the way the agent will: resolve it in the
// registry, add the system's intent_ref, normalize and key.
func (f *fixture) derive(t *testing.T, tc openai.ToolCall) (*derive.Result, error) {
	t.Helper()
	call, err := f.reg.ParseToolCall(tc)
	if err != nil {
		return nil, err
	}
	call.Fields[tools.RefField] = "NF-123"
	return f.der.Derive("tenant-a", call.Action, call.Fields, nil)
}

func (f *fixture) toolCall(t *testing.T, req openai.ChatCompletionRequest) (openai.ToolCall, openai.ChatCompletionResponse) {
	t.Helper()
	resp, err := f.client.CreateChatCompletion(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 {
		t.Fatalf("%d choices", len(resp.Choices))
	}
	c := resp.Choices[0]
	if c.FinishReason != openai.FinishReasonToolCalls || len(c.Message.ToolCalls) != 1 {
		t.Fatalf("want one tool call, got finish %q message %+v", c.FinishReason, c.Message)
	}
	return c.Message.ToolCalls[0], resp
}

func TestToolCallsNormalizeToOnePayload(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, user string
		want       map[string]string
	}{
		{"cpf", "Oi, quero pagar a fatura NF-123, R$ 180,00, chave Pix 529.982.247-25",
			map[string]string{"amount": "18000", "pix_key": "52998224725", "pix_key_type": "cpf"}},
		{"phone", "Pode cobrar os 1.800,00 reais da fatura NF-77? Minha chave pix é o celular +55 (11) 98765-4321.",
			map[string]string{"amount": "180000", "pix_key": "+5511987654321", "pix_key_type": "phone"}},
		{"bare phone", "quero pagar R$ 99,90, chave pix celular 11987654321",
			map[string]string{"amount": "9990", "pix_key": "+5511987654321", "pix_key_type": "phone"}},
		{"email", "Quero pagar a fatura 2024-05 de R$ 1.234,56 com a chave Maria.Silva@Exemplo.com.br",
			map[string]string{"amount": "123456", "pix_key": "maria.silva@exemplo.com.br", "pix_key_type": "email"}},
		{"evp", "pagar 250 reais, chave aleatória 123E4567-E89B-12D3-A456-426614174000",
			map[string]string{"amount": "25000", "pix_key": "123e4567-e89b-12d3-a456-426614174000", "pix_key_type": "evp"}},
		{"cnpj", "Pagamento da NF-9 no valor de R$ 10,50. Chave pix: 11.222.333/0001-81",
			map[string]string{"amount": "1050", "pix_key": "11222333000181", "pix_key_type": "cnpj"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, model.Config{Seed: 7})
			req := f.request(tc.user)
			raws := map[string]bool{}
			var first *derive.Result
			for i := range 20 {
				call, resp := f.toolCall(t, req)
				if call.Function.Name != "pix_charge" || !strings.HasPrefix(call.ID, "call_") {
					t.Fatalf("call %d: %+v", i, call)
				}
				if resp.Usage.PromptTokens < 50 || resp.Usage.CompletionTokens < 20 || resp.Usage.CompletionTokens > 60 ||
					resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
					t.Fatalf("implausible usage %+v", resp.Usage)
				}
				raws[call.Function.Arguments] = true
				res, err := f.derive(t, call)
				if err != nil {
					t.Fatalf("call %d: arguments %s: %v", i, call.Function.Arguments, err)
				}
				if first == nil {
					first = res
					got := res.Payload.Map()
					for k, v := range tc.want {
						if got[k] != v {
							t.Fatalf("%s = %q, want %q (arguments %s)", k, got[k], v, call.Function.Arguments)
						}
					}
					if got["customer_id"] != "C-42" {
						t.Fatalf("customer_id = %q", got["customer_id"])
					}
					continue
				}
				if res.Key != first.Key {
					t.Fatalf("call %d: arguments %s gave payload %s, first gave %s",
						i, call.Function.Arguments, res.Canonical, first.Canonical)
				}
			}
			if len(raws) < 2 {
				t.Fatalf("20 calls, %d distinct argument strings: the stand-in must vary its formatting", len(raws))
			}
			st := f.srv.Stats()
			if st.Calls != 20 || st.ToolCalls != 20 || st.WrongAmount != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestWrongAmountIsCountedAndDiverges(t *testing.T) {
	t.Parallel()
	f := newFixture(t, model.Config{Seed: 3, WrongAmountRate: 0.4})
	req := f.request("quero pagar a fatura NF-123, R$ 180,00, chave Pix 529.982.247-25")
	wrong := 0
	for range 40 {
		call, _ := f.toolCall(t, req)
		res, err := f.derive(t, call)
		if err != nil {
			t.Fatalf("%s: %v", call.Function.Arguments, err)
		}
		amount, _ := res.Payload.Get("amount")
		if amount != "18000" {
			wrong++
		}
		if pk, _ := res.Payload.Get("pix_key"); pk != "52998224725" {
			t.Fatalf("pix_key %q: only the amount may go wrong", pk)
		}
	}
	st := f.srv.Stats()
	if wrong == 0 || wrong == 40 || int64(wrong) != st.WrongAmount {
		t.Fatalf("%d wrong amounts out of 40, stats say %d", wrong, st.WrongAmount)
	}
}

func TestReproducibleWithSeed(t *testing.T) {
	t.Parallel()
	run := func(seed int64) []string {
		f := newFixture(t, model.Config{Seed: seed, WrongAmountRate: 0.3})
		req := f.request("pagar NF-1 R$ 180,00 chave 529.982.247-25")
		var out []string
		for range 10 {
			call, _ := f.toolCall(t, req)
			out = append(out, call.ID+" "+call.Function.Arguments)
		}
		return out
	}
	a, b, c := run(11), run(11), run(12)
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatalf("same seed, different answers:\n%v\n%v", a, b)
	}
	if strings.Join(a, "\n") == strings.Join(c, "\n") {
		t.Fatal("different seeds, same answers")
	}

	// Concurrent conversations: each one's answers do not depend on how
	// the others interleave with it.
	concurrent := func() map[string]string {
		f := newFixture(t, model.Config{Seed: 11, WrongAmountRate: 0.3, MalformedRate: 0.1})
		var mu sync.Mutex
		out := map[string]string{}
		var wg sync.WaitGroup
		for i := range 12 {
			wg.Go(func() {
				user := fmt.Sprintf("pagar NF-%d R$ %d,00 chave 529.982.247-25", i, 100+i)
				var got []string
				for range 3 {
					// Not f.toolCall: t.Fatal belongs to the test goroutine.
					resp, err := f.client.CreateChatCompletion(context.Background(), f.request(user))
					if err != nil || len(resp.Choices) != 1 || len(resp.Choices[0].Message.ToolCalls) != 1 {
						t.Errorf("%s: %+v %v", user, resp, err)
						return
					}
					got = append(got, resp.Choices[0].Message.ToolCalls[0].Function.Arguments)
				}
				mu.Lock()
				out[user] = strings.Join(got, "\n")
				mu.Unlock()
			})
		}
		wg.Wait()
		return out
	}
	x, y := concurrent(), concurrent()
	for k, v := range x {
		if y[k] != v {
			t.Fatalf("%s: answers changed with the interleaving:\n%s\n---\n%s", k, v, y[k])
		}
	}
}

func TestFinalReply(t *testing.T) {
	t.Parallel()
	f := newFixture(t, model.Config{Seed: 5})
	req := f.request("quero pagar a fatura NF-123, R$ 180,00, chave Pix 529.982.247-25")
	call, _ := f.toolCall(t, req)
	conv := func(result string) openai.ChatCompletionRequest {
		r := req
		r.Messages = append(append([]openai.ChatCompletionMessage(nil), req.Messages...),
			openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, ToolCalls: []openai.ToolCall{call}},
			openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: call.ID, Content: result},
		)
		return r
	}
	for _, tc := range []struct{ result, want string }{
		{`{"status":"completed","replayed":false,"response":{"id":"ch_1","amount_cents":18000,"status":"paid"}}`, "R$ 180,00"},
		{`{"id":"ch_1","amount_cents":25000,"status":"paid"}`, "R$ 250,00"},
		{`{"status":"failed","error":{"code":"http_422"}}`, "R$ 180,00"},
		{`{"status":"review"}`, "processamento"},
	} {
		for range 5 {
			resp, err := f.client.CreateChatCompletion(context.Background(), conv(tc.result))
			if err != nil {
				t.Fatal(err)
			}
			c := resp.Choices[0]
			if c.FinishReason != openai.FinishReasonStop || len(c.Message.ToolCalls) != 0 || c.Message.Content == "" {
				t.Fatalf("%s: want a final text reply, got %+v", tc.result, c)
			}
			if !strings.Contains(c.Message.Content, tc.want) || !strings.Contains(c.Message.Content, "NF-123") {
				t.Fatalf("%s: reply %q lacks %q or the invoice", tc.result, c.Message.Content, tc.want)
			}
			failed := strings.Contains(tc.result, "failed")
			if saysFailed := strings.Contains(c.Message.Content, "problema") || strings.Contains(c.Message.Content, "Não consegui"); saysFailed != failed {
				t.Fatalf("%s: reply %q", tc.result, c.Message.Content)
			}
			if resp.Usage.CompletionTokens < 20 || resp.Usage.PromptTokens <= 0 {
				t.Fatalf("usage %+v", resp.Usage)
			}
		}
	}
	// A new request after the settled one starts a new round.
	r := conv(`{"status":"completed"}`)
	r.Messages = append(r.Messages,
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: "Pagamento confirmado."},
		openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: "agora a NF-124, R$ 50,00, mesma chave 529.982.247-25"})
	next, _ := f.toolCall(t, r)
	res, err := f.derive(t, next)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := res.Payload.Get("amount"); a != "5000" {
		t.Fatalf("second round amount %q", a)
	}
}

func TestConversationWithoutEnoughFacts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, model.Config{Seed: 1})
	for _, tc := range []struct{ user, want string }{
		{"oi, tudo bem?", "Olá"},
		{"quero pagar a fatura NF-123", "valor"},
		{"quero pagar R$ 180,00", "chave Pix"},
	} {
		resp, err := f.client.CreateChatCompletion(context.Background(), f.request(tc.user))
		if err != nil {
			t.Fatal(err)
		}
		c := resp.Choices[0]
		if len(c.Message.ToolCalls) != 0 || !strings.Contains(c.Message.Content, tc.want) {
			t.Fatalf("%q: got %+v", tc.user, c.Message)
		}
	}
	// tool_choice "none": the model may not call.
	req := f.request("pagar NF-1 R$ 180,00 chave 529.982.247-25")
	req.ToolChoice = "none"
	resp, err := f.client.CreateChatCompletion(context.Background(), req)
	if err != nil || len(resp.Choices[0].Message.ToolCalls) != 0 {
		t.Fatalf("tool_choice none: %+v %v", resp, err)
	}
	// No customer anywhere: it asks instead of inventing one.
	req = f.request("pagar NF-1 R$ 180,00 chave 529.982.247-25")
	req.Messages[0].Content = "Você é o assistente de cobrança."
	resp, err = f.client.CreateChatCompletion(context.Background(), req)
	if err != nil || !strings.Contains(resp.Choices[0].Message.Content, "cliente") {
		t.Fatalf("no customer: %+v %v", resp, err)
	}
	// ... unless the request's user field names one.
	req.User = "C-7"
	call, _ := f.toolCall(t, req)
	if res, err := f.derive(t, call); err != nil || res.Payload.Map()["customer_id"] != "C-7" {
		t.Fatalf("user field: %v %v", res, err)
	}
}

func TestMalformedAndUnknownTool(t *testing.T) {
	t.Parallel()
	f := newFixture(t, model.Config{Seed: 9, MalformedRate: 1})
	req := f.request("pagar NF-1 R$ 180,00 chave 529.982.247-25")
	for range 15 {
		call, _ := f.toolCall(t, req)
		if json.Valid([]byte(call.Function.Arguments)) {
			t.Fatalf("malformed rate 1 produced valid JSON %s", call.Function.Arguments)
		}
		if _, err := f.reg.ParseToolCall(call); err == nil {
			t.Fatalf("registry accepted %s", call.Function.Arguments)
		}
	}
	if st := f.srv.Stats(); st.Malformed != 15 {
		t.Fatalf("stats %+v", st)
	}

	g := newFixture(t, model.Config{Seed: 9, UnknownToolRate: 1})
	for range 5 {
		call, _ := g.toolCall(t, req)
		if _, err := g.reg.ParseToolCall(call); !errors.Is(err, tools.ErrUnknownTool) {
			t.Fatalf("name %q: %v", call.Function.Name, err)
		}
		if !json.Valid([]byte(call.Function.Arguments)) {
			t.Fatalf("unknown tool with broken JSON %s", call.Function.Arguments)
		}
	}
	if st := g.srv.Stats(); st.UnknownTool != 5 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFailRate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, model.Config{Seed: 2, FailRate: 1})
	statuses := map[int]int{}
	for range 20 {
		_, err := f.client.CreateChatCompletion(context.Background(), f.request("pagar R$ 1,00 chave 529.982.247-25"))
		var apiErr *openai.APIError
		if !errors.As(err, &apiErr) {
			t.Fatalf("want an APIError, got %v", err)
		}
		statuses[apiErr.HTTPStatusCode]++
	}
	if statuses[429] == 0 || statuses[500] == 0 || statuses[429]+statuses[500] != 20 {
		t.Fatalf("statuses %v", statuses)
	}
	if st := f.srv.Stats(); st.Failed != 20 || st.Calls != 0 || st.PromptTokens != 0 {
		t.Fatalf("failed calls must not be billed: %+v", st)
	}
}

// post sends a raw request, for what go-openai cannot express (headers).
func post(t *testing.T, url string, body any, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

func TestFaultHeadersAndStats(t *testing.T) {
	t.Parallel()
	f := newFixture(t, model.Config{Seed: 4})
	url := f.url + "/v1/chat/completions"
	req := f.request("pagar NF-1 R$ 180,00 chave 529.982.247-25")

	resp, body := post(t, url, req, map[string]string{model.FaultHeader: "wrong-amount"})
	var cr openai.ChatCompletionResponse
	if resp == nil || resp.StatusCode != 200 || json.Unmarshal(body, &cr) != nil {
		t.Fatalf("%v %s", resp, body)
	}
	res, err := f.derive(t, cr.Choices[0].Message.ToolCalls[0])
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := res.Payload.Get("amount"); a == "18000" {
		t.Fatal("forced wrong amount gave the right one")
	}
	if resp, _ := post(t, url, req, map[string]string{model.FaultHeader: "rate-limit"}); resp == nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("rate-limit: %v", resp)
	}
	if resp, _ := post(t, url, req, map[string]string{model.FaultHeader: "explode"}); resp == nil || resp.StatusCode != 400 {
		t.Fatalf("bad fault: %v", resp)
	}
	// A transport fault after the answer: billed, never received.
	if resp, _ := post(t, url, req, map[string]string{"X-Sandbox-Fault": "drop-after"}); resp != nil {
		t.Fatalf("drop-after answered %d", resp.StatusCode)
	}

	r, err := http.Get(f.url + "/v1/_stats")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var st model.Stats
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.Calls != 2 || st.Failed != 1 || st.WrongAmount < 1 || st.PromptTokens < int64(cr.Usage.PromptTokens) ||
		st.TotalTokens != st.PromptTokens+st.CompletionTokens {
		t.Fatalf("stats %+v", st)
	}
	if st != f.srv.Stats() {
		t.Fatalf("GET /v1/_stats %+v differs from Stats() %+v", st, f.srv.Stats())
	}
}

func TestStatsMatchUsage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, model.Config{Seed: 8})
	var prompt, completion int64
	for i := range 6 {
		req := f.request("pagar NF-1 R$ 180,00 chave 529.982.247-25")
		if i%2 == 1 {
			req = f.request("oi")
		}
		resp, err := f.client.CreateChatCompletion(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		prompt += int64(resp.Usage.PromptTokens)
		completion += int64(resp.Usage.CompletionTokens)
	}
	st := f.srv.Stats()
	if st.Calls != 6 || st.PromptTokens != prompt || st.CompletionTokens != completion || st.ToolCalls != 3 || st.Replies != 3 {
		t.Fatalf("stats %+v, usage summed %d/%d", st, prompt, completion)
	}
}

func TestStream(t *testing.T) {
	t.Parallel()
	f := newFixture(t, model.Config{Seed: 6})
	req := f.request("pagar NF-1 R$ 180,00 chave 529.982.247-25")
	req.Stream = true
	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	st, err := f.client.CreateChatCompletionStream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var name, args, id string
	var finish openai.FinishReason
	var usage *openai.Usage
	for {
		chunk, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if chunk.Usage != nil {
			usage = chunk.Usage
		}
		for _, c := range chunk.Choices {
			for _, tc := range c.Delta.ToolCalls {
				if tc.ID != "" {
					id = tc.ID
				}
				name += tc.Function.Name
				args += tc.Function.Arguments
			}
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
	}
	if name != "pix_charge" || id == "" || finish != openai.FinishReasonToolCalls || usage == nil || usage.TotalTokens == 0 {
		t.Fatalf("name %q id %q finish %q usage %+v", name, id, finish, usage)
	}
	res, err := f.derive(t, openai.ToolCall{ID: id, Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: name, Arguments: args}})
	if err != nil {
		t.Fatalf("%s: %v", args, err)
	}
	if a, _ := res.Payload.Get("amount"); a != "18000" {
		t.Fatalf("amount %q", a)
	}
}

func TestModelsAndAuth(t *testing.T) {
	t.Parallel()
	f := newFixture(t, model.Config{APIKey: "sk-test"})
	list, err := f.client.ListModels(context.Background())
	if err != nil || len(list.Models) != 1 || list.Models[0].ID != model.DefaultModel {
		t.Fatalf("%+v %v", list, err)
	}
	m, err := f.client.GetModel(context.Background(), "gpt-4o-mini")
	if err != nil || m.ID != "gpt-4o-mini" {
		t.Fatalf("%+v %v", m, err)
	}
	oc := openai.DefaultConfig("sk-wrong")
	oc.BaseURL = f.url + "/v1"
	_, err = openai.NewClientWithConfig(oc).CreateChatCompletion(context.Background(), f.request("oi"))
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 401 {
		t.Fatalf("wrong key: %v", err)
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t, model.Config{})
	for _, body := range []any{json.RawMessage(`{"model":"x","messages":[]}`), json.RawMessage(`{"model":`)} {
		resp, out := post(t, f.url+"/v1/chat/completions", body, nil)
		if resp == nil || resp.StatusCode != 400 || !strings.Contains(string(out), `"error"`) {
			t.Fatalf("%s: %v %s", body, resp, out)
		}
	}
	if _, err := model.New(model.Config{FailRate: 2}); err == nil {
		t.Fatal("FailRate 2 accepted")
	}
}
