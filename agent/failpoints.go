package agent

import (
	"context"
	"encoding/json"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/internal/failpoint"
	"github.com/retrysafe/retrysafe/tools"
)

// Failpoint names (see internal/failpoint). The tool points are also hit
// with ".<action>" appended ("agent.provider-answered.pix.charge"), so a
// crash test can target one tool.
const (
	// FailModelAnswered: a model answer is in hand (recorded in the ledger
	// and, journal on, in the journal), nothing done with it yet.
	FailModelAnswered = "agent.model-answered"
	// FailIntentFrozen: the tool call's intent is frozen (committed), the
	// action not claimed yet.
	FailIntentFrozen = "agent.intent-frozen"
	// FailActionClaimed: the executor committed the claim (started +
	// lease) and is about to call the provider.
	FailActionClaimed = "agent.action-claimed"
	// FailProviderAnswered: the provider answered, the executor has not
	// recorded the completion.
	FailProviderAnswered = "agent.provider-answered"
	// FailActionCompleted: the executor recorded the outcome; the turn is
	// not recorded yet.
	FailActionCompleted = "agent.action-completed"
	// FailTurnRecorded: the turn, the reply intent and the reply job are
	// committed; the inbox job is not acknowledged.
	FailTurnRecorded = "agent.turn-recorded"
	// FailInboxBeforeAck: the inbox handler is about to return success.
	FailInboxBeforeAck = "agent.inbox-before-ack"
	// FailReplyBeforeAck: the reply is sent and its status recorded; the
	// reply job is not acknowledged.
	FailReplyBeforeAck = "agent.reply-before-ack"
)

// WithFailpoints wraps src so that every tool it returns hits
// FailActionClaimed before calling its provider (the executor calls a tool
// only after committing its claim) and FailProviderAnswered after. Lookup is
// passed through unchanged. hit is typically failpoint.Hit.
//
// When RETRYSAFE_FAILPOINTS arms FailNaiveRandomKey (only `retrysafe
// restart-test --naive` does), the wrapper also replaces the key of every
// provider call with a random one: the broken control. See naive.go.
func WithFailpoints(src executor.ToolSource, hit func(string)) executor.ToolSource {
	return &failpointSource{src: src, hit: hit, naive: failpoint.Armed(FailNaiveRandomKey)}
}

type failpointSource struct {
	src   executor.ToolSource
	hit   func(string)
	naive bool
}

// Names lists the wrapped source's tools, so that the reconciler takes
// over only actions this process can settle.
func (s *failpointSource) Names() []string {
	if l, ok := s.src.(executor.ToolLister); ok {
		return l.Names()
	}
	return nil
}

func (s *failpointSource) Tool(name string) (tools.Tool, bool) {
	t, ok := s.src.Tool(name)
	if !ok {
		return nil, false
	}
	return &failpointTool{Tool: t, hit: s.hit, naive: s.naive}, true
}

type failpointTool struct {
	tools.Tool
	hit   func(string)
	naive bool // the broken control: a fresh key per call (naive.go)
}

func (t *failpointTool) Execute(ctx context.Context, key string, p derive.Payload) (json.RawMessage, error) {
	name := t.Tool.Name()
	t.hit(FailActionClaimed)
	t.hit(FailActionClaimed + "." + name)
	if t.naive {
		key = naiveKey()
	}
	resp, err := t.Tool.Execute(ctx, key, p)
	t.hit(FailProviderAnswered)
	t.hit(FailProviderAnswered + "." + name)
	return resp, err
}

// Lookup keeps the wrapped tool a Looker: embedding alone would hide it.
func (t *failpointTool) Lookup(ctx context.Context, key string) (json.RawMessage, error) {
	l, ok := tools.CanLookup(t.Tool)
	if !ok {
		return nil, tools.ErrLookupUnsupported
	}
	return l.Lookup(ctx, key)
}

// CanLookup reports what the wrapped tool can do.
func (t *failpointTool) CanLookup() bool {
	_, ok := tools.CanLookup(t.Tool)
	return ok
}
