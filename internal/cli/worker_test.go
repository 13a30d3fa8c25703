package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/agent/agenttest"
	"github.com/retrysafe/retrysafe/dbpool"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

// wkEnv's buffers are read by the test while the command, in a goroutine,
// writes them.
func wkEnv(vars map[string]string) (*Env, *lockedBuffer, *lockedBuffer) {
	out, errb := &lockedBuffer{}, &lockedBuffer{}
	return &Env{Stdin: strings.NewReader(""), Stdout: out, Stderr: errb, Getenv: func(k string) string { return vars[k] }}, out, errb
}

const wkSecret = "worker-test-hmac-secret-0123456789abcdef"

func TestWorkerHelp(t *testing.T) {
	e, out, _ := wkEnv(nil)
	if code := Run(context.Background(), e, []string{"worker", "--help"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"-journal", "-concurrency", "OPENAI_BASE_URL", "-rescue-after", "-migrate", "-claim-ttl", "RETRYSAFE_FAILPOINTS"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// TestWorkerRefusesBadConfig: each mistake fails at start-up, before any
// database, naming the setting.
func TestWorkerRefusesBadConfig(t *testing.T) {
	good := map[string]string{
		"RETRYSAFE_HMAC_KEY": wkSecret, "RETRYSAFE_PSP_URL": "http://127.0.0.1:1", "RETRYSAFE_PSP_TOKEN": "t",
		"RETRYSAFE_WHATSAPP_URL": "http://127.0.0.1:2", "OPENAI_BASE_URL": "http://127.0.0.1:3/v1",
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no hmac key", map[string]string{"RETRYSAFE_HMAC_KEY": ""}, nil, "RETRYSAFE_HMAC_KEY"},
		{"short hmac key", map[string]string{"RETRYSAFE_HMAC_KEY": "short"}, nil, "at least 32"},
		{"no whatsapp", map[string]string{"RETRYSAFE_WHATSAPP_URL": ""}, nil, "RETRYSAFE_WHATSAPP_URL"},
		{"no model endpoint", map[string]string{"OPENAI_BASE_URL": ""}, nil, "OPENAI_API_KEY"},
		{"bad base url", map[string]string{"OPENAI_BASE_URL": "localhost:3"}, nil, "OPENAI_BASE_URL"},
		{"bad journal", nil, []string{"--journal", "maybe"}, "--journal"},
		{"unknown model tool", nil, []string{"--model-tools", "pix.refund"}, "--model-tools"},
		{"rescue before timeout", nil, []string{"--rescue-after", "1m", "--job-timeout", "2m"}, "RescueStuckJobsAfter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]string{}
			for k, v := range good {
				vars[k] = v
			}
			for k, v := range tc.env {
				vars[k] = v
			}
			e, _, errb := wkEnv(vars)
			if code := Run(context.Background(), e, append([]string{"worker"}, tc.args...)); code != ExitUsage {
				t.Fatalf("exit %d, want 2; stderr %s", code, errb)
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("stderr %q does not name %q", errb, tc.want)
			}
		})
	}
}

// TestWorkerEndToEnd runs `retrysafe worker --migrate` in process against
// fake PSP, WhatsApp and model: a message received twice is answered with
// one charge and one reply; SIGTERM (the context) stops it with exit 0.
func TestWorkerEndToEnd(t *testing.T) {
	psp := toolstest.NewProvider()
	psp.Token = "psp-token"
	defer psp.Close()
	wa := toolstest.NewProvider()
	defer wa.Close()
	model := agenttest.NewModel()
	defer model.Close()

	schema := scratchSchema(t, "wk_")
	dbURL := pgtest.URL(t)
	e, out, errb := wkEnv(map[string]string{
		"DATABASE_URL": dbURL, "RETRYSAFE_HMAC_KEY": wkSecret,
		"RETRYSAFE_PSP_URL": psp.URL, "RETRYSAFE_PSP_TOKEN": "psp-token",
		"RETRYSAFE_WHATSAPP_URL": wa.URL, "OPENAI_BASE_URL": model.BaseURL(),
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, e, []string{"worker", "--schema", schema, "--migrate", "--concurrency", "2",
			"--max-conns", "6", "--poll", "100ms", "--log-level", "warn", "--model", "gpt-test"})
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "retrysafe: worker running") {
		select {
		case code := <-done:
			t.Fatalf("worker exited %d: %s", code, errb)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker not ready: %s", errb)
		}
		time.Sleep(20 * time.Millisecond)
	}

	pool, err := dbpool.Open(ctx, dbURL, schema, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	q, err := agent.NewInserter(pool, schema)
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.UpsertConversation(ctx, pool, agent.Conversation{Tenant: "acme", ID: "5511987654321", CustomerID: "c1", InvoiceRef: "INV-1", AmountDueCents: 18000}); err != nil {
		t.Fatal(err)
	}
	in := []agent.Inbound{{Tenant: "acme", MessageID: "wamid.worker1", ConversationID: "5511987654321", PhoneNumberID: "1", Body: "pagar, CPF 529.982.247-25"}}
	for i := 0; i < 2; i++ {
		if _, err := agent.Receive(ctx, pool, q, in); err != nil {
			t.Fatal(err)
		}
	}
	for {
		turn, err := agent.GetTurn(ctx, pool, "acme", "wamid.worker1")
		if err == nil && turn.ReplyStatus == agent.ReplySent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reply sent (turn %+v, err %v); stderr: %s", turn, err, errb)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d after SIGTERM: %s", code, errb)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop")
	}
	if psp.Count("/v1/pix/charges") != 1 || wa.Count("/v1/messages") != 1 || model.Calls() != 2 {
		t.Fatalf("charges %d, replies %d, model calls %d", psp.Count("/v1/pix/charges"), wa.Count("/v1/messages"), model.Calls())
	}
}
