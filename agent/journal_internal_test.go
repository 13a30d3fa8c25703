package agent

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrysafe/retrysafe/agent/agenttest"
	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// journalAgent is an Agent with only what complete needs.
func journalAgent(t *testing.T, mode JournalMode) (*Agent, *agenttest.Model, func(string) (int, int, int)) {
	t.Helper()
	pool, _ := pgtest.Schema(t, &pgtest.Opts{MaxConns: 4})
	m := agenttest.NewModel()
	t.Cleanup(m.Close)
	m.Delay = 100 * time.Millisecond // every call overlaps the others
	oc := openai.DefaultConfig("k")
	oc.BaseURL = m.BaseURL()
	a := &Agent{
		cfg: Config{DB: pool, Model: openai.NewClientWithConfig(oc), ModelName: "gpt-test", Journal: mode, ModelTimeout: 10 * time.Second},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	counts := func(source string) (real, replayed, journal int) {
		err := pool.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM model_calls WHERE source_ref = $1 AND NOT replayed),
			(SELECT count(*) FROM model_calls WHERE source_ref = $1 AND replayed),
			(SELECT count(*) FROM model_journal WHERE source_ref = $1)`, source).Scan(&real, &replayed, &journal)
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	return a, m, counts
}

var prompt = []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "quero pagar, CPF 529.982.247-25"}}

// TestJournalConcurrentCallsConverge: workers that call the model for the
// same step at once each pay for their call, but all act on the answer
// journaled first: the same tool call, byte for byte.
func TestJournalConcurrentCallsConverge(t *testing.T) {
	a, m, counts := journalAgent(t, JournalOn)
	ctx := context.Background()
	const workers = 6
	calls := make([]*call, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() { defer wg.Done(); calls[i], errs[i] = a.complete(ctx, "acme", "wamid.race", 0, prompt) }()
	}
	wg.Wait()
	for i := range calls {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if calls[i].CallID != calls[0].CallID || calls[i].Answer.Message.ToolCalls[0].Function.Arguments != calls[0].Answer.Message.ToolCalls[0].Function.Arguments {
			t.Fatalf("worker %d acts on call %d (%s), worker 0 on call %d (%s)", i, calls[i].CallID,
				calls[i].Answer.Message.ToolCalls[0].Function.Arguments, calls[0].CallID, calls[0].Answer.Message.ToolCalls[0].Function.Arguments)
		}
	}
	// Every real call is in the ledger; a worker that started after the
	// first answer was journaled (a loaded machine staggers them) replays it
	// instead of calling: either way each worker is counted exactly once.
	real, replayed, journal := counts("wamid.race")
	if real != int(m.Calls()) || journal != 1 || real+replayed != workers {
		t.Fatalf("real %d (model %d), replayed %d, journal %d, workers %d", real, m.Calls(), replayed, journal, workers)
	}
	if real < 2 {
		t.Fatalf("only %d real calls: the workers did not race", real)
	}
	t.Logf("%d concurrent workers: %d real calls, one journaled answer used by all", workers, real)

	// Later redeliveries replay: no call, a replayed ledger row each, with
	// the journaled call's tokens.
	before := m.Calls()
	for i := 0; i < 3; i++ {
		c, err := a.complete(ctx, "acme", "wamid.race", 0, prompt)
		if err != nil || !c.Replayed || c.CallID != calls[0].CallID {
			t.Fatalf("redelivery %d: %+v, %v", i, c, err)
		}
	}
	if m.Calls() != before {
		t.Fatal("a journaled step called the model again")
	}
	if _, after, _ := counts("wamid.race"); after != replayed+3 {
		t.Fatalf("%d replayed rows, want %d", after, replayed+3)
	}
	var diff int
	if err := a.cfg.DB.QueryRow(ctx, `SELECT count(*) FROM model_calls r, model_calls o
		WHERE r.replayed AND o.id = $1 AND (r.prompt_tokens, r.completion_tokens, r.model) IS DISTINCT FROM (o.prompt_tokens, o.completion_tokens, o.model)`,
		calls[0].CallID).Scan(&diff); err != nil || diff != 0 {
		t.Fatalf("replayed rows not priced as the original: %d (%v)", diff, err)
	}
}

// TestJournalOff: every call is made and recorded, the journal never read
// or written.
func TestJournalOff(t *testing.T) {
	a, m, counts := journalAgent(t, JournalOff)
	m.Delay = 0
	ctx := context.Background()
	args := map[string]bool{}
	for i := 0; i < 3; i++ {
		c, err := a.complete(ctx, "acme", "wamid.off", 0, prompt)
		if err != nil || c.Replayed {
			t.Fatalf("call %d: %+v %v", i, c, err)
		}
		args[c.Answer.Message.ToolCalls[0].Function.Arguments] = true
	}
	real, replayed, journal := counts("wamid.off")
	if real != 3 || replayed != 0 || journal != 0 || m.Calls() != 3 {
		t.Fatalf("real %d replayed %d journal %d model %d", real, replayed, journal, m.Calls())
	}
	if len(args) < 2 {
		t.Fatal("the fake model was deterministic; the test proves nothing")
	}
}

func TestRetryPolicyDelay(t *testing.T) {
	p := &RetryPolicy{Base: time.Second, Max: 10 * time.Second}
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 5: 10 * time.Second, 40: 10 * time.Second} {
		for i := 0; i < 20; i++ {
			d := p.Delay(attempt)
			if d < want/2 || d > want {
				t.Fatalf("attempt %d: delay %s outside [%s, %s]", attempt, d, want/2, want)
			}
		}
	}
}

func TestFormatBRL(t *testing.T) {
	for in, want := range map[int64]string{0: "0,00", 5: "0,05", 18000: "180,00", 180000: "1.800,00", 123456789: "1.234.567,89", -1050: "-10,50"} {
		if got := FormatBRL(in); got != want {
			t.Errorf("FormatBRL(%d) = %q, want %q", in, got, want)
		}
	}
}
