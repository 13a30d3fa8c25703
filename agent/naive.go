package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/tools"
)

// FailNaiveRandomKey is not a crash point: armed in RETRYSAFE_FAILPOINTS, it
// turns the worker into the deliberately broken control of `retrysafe
// restart-test --naive`. Every provider call then carries a fresh random
// Idempotency-Key instead of the frozen one — the bug retrysafe exists to
// prevent (a key drawn inside the attempt) — so that the restart test can
// show that it catches duplicate charges when they happen. The action row,
// the intent and Lookup still use the frozen key, exactly as a runtime that
// froze the intent but let the HTTP client draw its own key would.
//
// Only the restart test arms it; the worker then gives the executor its
// tools through NaiveKeys. Unarmed (every normal process) nothing wraps
// them.
const FailNaiveRandomKey = "agent.naive-random-key"

// NaiveKeys returns src's tools made into the broken control: each
// Execute sends a random key instead of the one it is given, as an HTTP
// client that draws its own key would. It is a tool that misbehaves, not
// instrumentation, which is why it wraps the tools rather than hooking
// into the executor. Lookup, the tool names and whether a tool can look up
// are src's.
func NaiveKeys(src executor.ToolSource) executor.ToolSource {
	return &naiveSource{src: src}
}

type naiveSource struct{ src executor.ToolSource }

// Names lists the wrapped source's tools, so that the reconciler takes
// over only actions this process can settle.
func (s *naiveSource) Names() []string {
	if l, ok := s.src.(executor.ToolLister); ok {
		return l.Names()
	}
	return nil
}

func (s *naiveSource) Tool(name string) (tools.Tool, bool) {
	t, ok := s.src.Tool(name)
	if !ok {
		return nil, false
	}
	return &naiveTool{Tool: t}, true
}

type naiveTool struct{ tools.Tool }

func (t *naiveTool) Execute(ctx context.Context, _ string, p derive.Payload) (json.RawMessage, error) {
	return t.Tool.Execute(ctx, naiveKey(), p)
}

// Lookup keeps the wrapped tool a Looker: embedding alone would hide it.
func (t *naiveTool) Lookup(ctx context.Context, key string) (json.RawMessage, error) {
	l, ok := tools.CanLookup(t.Tool)
	if !ok {
		return nil, tools.ErrLookupUnsupported
	}
	return l.Lookup(ctx, key)
}

// CanLookup reports what the wrapped tool can do.
func (t *naiveTool) CanLookup() bool {
	_, ok := tools.CanLookup(t.Tool)
	return ok
}

// naiveKey is what the broken control sends instead of the frozen key: 64
// random hex characters, the shape of a real key, different every call.
func naiveKey() string {
	b := make([]byte, 32)
	rand.Read(b) //nolint:errcheck // crypto/rand does not fail on Linux
	return hex.EncodeToString(b)
}
