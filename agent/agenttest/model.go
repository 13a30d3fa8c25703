package agenttest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Behavior is what the model does when asked to act (no tool result yet).
type Behavior int

// Behaviors.
const (
	// Charge: call pix_charge with the amount and the CPF, formatted
	// differently on every call.
	Charge Behavior = iota
	// UnknownTool: call a function no tool has.
	UnknownTool
	// BadJSON: call pix_charge with arguments that are not JSON.
	BadJSON
	// MissingField: call pix_charge without the Pix key.
	MissingField
	// InvalidCPF: call pix_charge with a CPF whose check digits are wrong.
	InvalidCPF
	// CallReplyTool: call whatsapp_send_text, which is not offered.
	CallReplyTool
	// TalkOnly: answer with text, no tool call.
	TalkOnly
	// ChargeForever: call pix_charge even after a tool result.
	ChargeForever
)

// Model is the fake. Point go-openai at BaseURL().
type Model struct {
	*httptest.Server
	// AmountCents and CPF (11 digits) are what Charge extracts.
	AmountCents int64
	CPF         string
	// Delay is added to every answer (to widen race windows).
	Delay time.Duration

	mu       sync.Mutex
	behavior Behavior
	failures []int // statuses for the next calls, in order
	calls    atomic.Int64
	fails    atomic.Int64
	requests []openai.ChatCompletionRequest
}

// NewModel starts the fake with the Charge behavior.
func NewModel() *Model {
	m := &Model{AmountCents: 18000, CPF: "52998224725"}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	return m
}

// BaseURL is what go-openai's ClientConfig.BaseURL must be.
func (m *Model) BaseURL() string { return m.URL + "/v1" }

// SetBehavior changes what the model does from the next call on.
func (m *Model) SetBehavior(b Behavior) {
	m.mu.Lock()
	m.behavior = b
	m.mu.Unlock()
}

// FailNext makes the next len(statuses) calls fail with those HTTP
// statuses, in order.
func (m *Model) FailNext(statuses ...int) {
	m.mu.Lock()
	m.failures = append(m.failures, statuses...)
	m.mu.Unlock()
}

// Calls is the number of answered calls (failures excluded).
func (m *Model) Calls() int64 { return m.calls.Load() }

// Failures is the number of calls answered with an error status.
func (m *Model) Failures() int64 { return m.fails.Load() }

// Requests returns the answered requests, in arrival order.
func (m *Model) Requests() []openai.ChatCompletionRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]openai.ChatCompletionRequest(nil), m.requests...)
}

func (m *Model) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	var req openai.ChatCompletionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad json")
		return
	}
	m.mu.Lock()
	if len(m.failures) > 0 {
		status := m.failures[0]
		m.failures = m.failures[1:]
		m.mu.Unlock()
		m.fails.Add(1)
		writeError(w, status, "injected failure")
		return
	}
	m.requests = append(m.requests, req)
	behavior := m.behavior
	m.mu.Unlock()
	if m.Delay > 0 {
		time.Sleep(m.Delay)
	}
	n := m.calls.Add(1)

	msg := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant}
	finish := openai.FinishReasonStop
	last := req.Messages[len(req.Messages)-1]
	if last.Role == openai.ChatMessageRoleTool && behavior != ChargeForever {
		msg.Content = m.reply(n, last.Content)
	} else if tc := m.toolCall(n, behavior); tc != nil {
		msg.ToolCalls = []openai.ToolCall{*tc}
		finish = openai.FinishReasonToolCalls
	} else {
		msg.Content = "Olá! Para pagar via Pix, me envie sua chave Pix (CPF)."
	}
	prompt := 0
	for _, pm := range req.Messages {
		prompt += len(pm.Content)/4 + 4
	}
	resp := openai.ChatCompletionResponse{
		ID:      fmt.Sprintf("chatcmpl-%d", n),
		Object:  "chat.completion",
		Created: time.Now().Unix(),
		Model:   req.Model + "-fake",
		Choices: []openai.ChatCompletionChoice{{Index: 0, Message: msg, FinishReason: finish}},
		Usage:   openai.Usage{PromptTokens: prompt, CompletionTokens: 20 + int(n%7), TotalTokens: prompt + 20 + int(n%7)},
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// toolCall varies the formatting of the same extraction on every call, as a
// sampled model does.
func (m *Model) toolCall(n int64, b Behavior) *openai.ToolCall {
	var amount any
	reais, cents := m.AmountCents/100, m.AmountCents%100
	switch n % 3 {
	case 0:
		amount = fmt.Sprintf("R$ %d,%02d", reais, cents)
	case 1:
		amount = fmt.Sprintf("%d.%02d", reais, cents)
	default:
		if cents == 0 {
			amount = json.Number(fmt.Sprint(reais))
		} else {
			amount = json.Number(fmt.Sprintf("%d.%02d", reais, cents))
		}
	}
	cpf := m.CPF
	if n%2 == 0 && len(cpf) == 11 {
		cpf = cpf[0:3] + "." + cpf[3:6] + "." + cpf[6:9] + "-" + cpf[9:11]
	}
	args := map[string]any{"amount": amount, "pix_key": cpf, "pix_key_type": "cpf", "customer_id": "whatever-the-model-says"}
	name := "pix_charge"
	switch b {
	case TalkOnly:
		return nil
	case UnknownTool:
		name = "pix_refund"
	case MissingField:
		delete(args, "pix_key")
	case InvalidCPF:
		args["pix_key"] = "529.982.247-26"
	case CallReplyTool:
		name = "whatsapp_send_text"
		args = map[string]any{"to": "+5511999999999", "body": "hi"}
	}
	raw, _ := json.Marshal(args)
	if b == BadJSON {
		raw = []byte(`{"amount": "180,00", "pix_key": `)
	}
	return &openai.ToolCall{ID: fmt.Sprintf("call_%d", n), Type: openai.ToolTypeFunction,
		Function: openai.FunctionCall{Name: name, Arguments: string(raw)}}
}

func (m *Model) reply(n int64, toolResult string) string {
	var res struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal([]byte(toolResult), &res)
	if res.Status != "completed" {
		return "Não consegui gerar a cobrança agora (" + res.Status + "). Vou verificar."
	}
	openers := []string{"Pronto!", "Feito!", "Tudo certo!"}
	return fmt.Sprintf("%s Cobrança Pix de R$ %d,%02d gerada.", openers[n%3], m.AmountCents/100, m.AmountCents%100)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "fake", "code": status}})
}
