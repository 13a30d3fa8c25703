package labcli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/internal/cli"
	"github.com/retrysafe/retrysafe/tools"
)

// lineWriter hands the command's stdout lines to the test as they come.
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line)
			return len(p), nil
		}
		select {
		case w.lines <- strings.TrimSuffix(line, "\n"):
		default:
		}
	}
}

// startStandIn runs a sandbox service in-process and returns its URL and a
// stop function that cancels it and returns its error.
func startStandIn(t *testing.T, name string, run func(context.Context, *cli.Env, []string) error, args ...string) (string, func() error) {
	t.Helper()
	out := &lineWriter{lines: make(chan string, 4)}
	errb := &lockedBuffer{}
	e := &cli.Env{Stdin: strings.NewReader(""), Stdout: out, Stderr: errb, Getenv: func(string) string { return "" }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, e, args) }()
	prefix := "retrysafe sandbox " + name + ": listening on "
	select {
	case line := <-out.lines:
		if !strings.HasPrefix(line, prefix) {
			cancel()
			t.Fatalf("ready line %q", line)
		}
		// Once: the test's own stop takes the exit status, and the cleanup's
		// second call must not wait for a status already taken.
		stop := sync.OnceValue(func() error {
			cancel()
			select {
			case err := <-done:
				return err
			case <-time.After(15 * time.Second):
				return errors.New("not stopped after 15s")
			}
		})
		t.Cleanup(func() { stop() }) //nolint:errcheck // a second stop returns the first's result
		return strings.TrimPrefix(line, prefix), stop
	case err := <-done:
		cancel()
		t.Fatalf("exited before listening: %v\n%s", err, errb)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("not listening after 30s\n%s", errb)
	}
	return "", nil
}

func TestSandboxModelCommand(t *testing.T) {
	t.Parallel()
	url, stop := startStandIn(t, "model", runSandboxModel, "--addr", "127.0.0.1:0", "--seed", "5", "--wrong-amount-rate", "0", "--log-level", "warn")
	oc := openai.DefaultConfig("sk-any")
	oc.BaseURL = url + "/v1"
	client := openai.NewClientWithConfig(oc)
	pix, err := tools.NewPixCharge(tools.HTTPConfig{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.NewRegistry(pix)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: "customer_id: C-1"},
			{Role: openai.ChatMessageRoleUser, Content: "pagar a fatura NF-123, R$ 180,00, chave Pix 529.982.247-25"},
		},
		Tools: reg.OpenAITools(),
	})
	if err != nil || len(resp.Choices) != 1 || len(resp.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("%+v %v", resp, err)
	}
	call, err := reg.ParseToolCall(resp.Choices[0].Message.ToolCalls[0])
	if err != nil {
		t.Fatal(err)
	}
	call.Fields[tools.RefField] = "NF-123"
	der, err := reg.Deriver([]byte(strings.Repeat("k", derive.MinSecretLen)))
	if err != nil {
		t.Fatal(err)
	}
	res, err := der.Derive("t", call.Action, call.Fields, nil)
	if err != nil || res.Payload.Map()["amount"] != "18000" {
		t.Fatalf("%v %v", res, err)
	}
	r, err := http.Get(url + "/v1/_stats")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Calls        int `json:"calls"`
		PromptTokens int `json:"prompt_tokens"`
	}
	err = json.NewDecoder(r.Body).Decode(&st)
	r.Body.Close()
	if err != nil || st.Calls != 1 || st.PromptTokens != resp.Usage.PromptTokens {
		t.Fatalf("stats %+v %v", st, err)
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

func TestSandboxWhatsAppCommand(t *testing.T) {
	t.Parallel()
	url, stop := startStandIn(t, "whatsapp", runSandboxWhatsApp, "--addr", "127.0.0.1:0", "--token", "tok", "--fault", "fail-after", "--log-level", "warn")
	wa, err := tools.NewWhatsAppTemplate(tools.HTTPConfig{BaseURL: url, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	p := derive.PayloadFromMap(map[string]string{"to": "+5511987654321", "template": "pagamento_confirmado", tools.RefField: "NF-1"})
	// --fault fail-after: the message goes out, the answer says 500.
	_, err = wa.Execute(context.Background(), "k1", p)
	var te *tools.Error
	if !errors.As(err, &te) || te.Class != tools.ClassUncertain {
		t.Fatalf("want an uncertain failure, got %v", err)
	}
	if b, err := wa.Lookup(context.Background(), "k1"); err != nil || !strings.Contains(string(b), "wamid.") {
		t.Fatalf("lookup %s %v", b, err)
	}
	r, err := http.Get(url + "/_sandbox/messages")
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Data []json.RawMessage `json:"data"`
	}
	err = json.NewDecoder(r.Body).Decode(&l)
	r.Body.Close()
	if err != nil || len(l.Data) != 1 {
		t.Fatalf("%d messages, %v", len(l.Data), err)
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

func TestSandboxStandInFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		run  func(context.Context, *cli.Env, []string) error
		args []string
		want []string
	}{
		{runSandboxModel, []string{"--help"}, []string{"POST /v1/chat/completions", "-seed", "-wrong-amount-rate", "-malformed-rate", "-unknown-tool-rate", "-fail-rate", "-latency", "-api-key", "X-Sandbox-Model-Fault", "/v1/_stats", "listening on"}},
		{runSandboxWhatsApp, []string{"--help"}, []string{"POST /v1/messages", "/messages", "Idempotency-Key", "422", "X-Sandbox-Fault", "-fault-rate", "-token", "/_sandbox/messages", "listening on"}},
	} {
		e, out, _ := testEnv(strings.NewReader(""), nil)
		if err := tc.run(context.Background(), e, tc.args); !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("--help: %v", err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("--help lacks %q", w)
			}
		}
	}
	for _, tc := range []struct {
		run  func(context.Context, *cli.Env, []string) error
		args []string
	}{
		{runSandboxModel, []string{"--fail-rate", "2"}},
		{runSandboxModel, []string{"--seed", "x"}},
		{runSandboxModel, []string{"extra"}},
		{runSandboxModel, []string{"--addr", "nonsense"}},
		{runSandboxWhatsApp, []string{"--fault", "explode"}},
		{runSandboxWhatsApp, []string{"--fault-rate", "-1"}},
		{runSandboxWhatsApp, []string{"extra"}},
	} {
		e, _, _ := testEnv(strings.NewReader(""), nil)
		if err := tc.run(context.Background(), e, tc.args); err == nil {
			t.Errorf("%v: accepted", tc.args)
		}
	}
}
