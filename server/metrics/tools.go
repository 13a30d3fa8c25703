package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"time"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/tools"
)

// InstrumentTools returns a ToolSource that hands out src's tools wrapped so
// that every Execute and Lookup is timed into ProviderLatency and
// LookupLatency, and counted on the context's Probe if it carries one.
//
// A wrapped tool is a tools.Looker exactly when the original can really be
// asked about a key (tools.CanLookup): the executor decides between a lookup
// and a second call from that, and wrapping must not change its decision.
func (m *Metrics) InstrumentTools(src executor.ToolSource) executor.ToolSource {
	return &toolSource{src: src, m: m}
}

type toolSource struct {
	src executor.ToolSource
	m   *Metrics
}

// Names lists the wrapped source's tools, so that the reconciler takes
// over only actions this process can settle.
func (s *toolSource) Names() []string {
	if l, ok := s.src.(executor.ToolLister); ok {
		return l.Names()
	}
	return nil
}

func (s *toolSource) Tool(name string) (tools.Tool, bool) {
	t, ok := s.src.Tool(name)
	if !ok {
		return nil, false
	}
	w := &timedTool{Tool: t, m: s.m}
	if l, ok := tools.CanLookup(t); ok {
		return &timedLooker{timedTool: w, l: l}, true
	}
	return w, true
}

// timedTool embeds the Tool interface, so it has no Lookup method of its own
// (an interface embedding exposes only the interface's methods).
type timedTool struct {
	tools.Tool
	m *Metrics
}

func (t *timedTool) Execute(ctx context.Context, key string, p derive.Payload) (json.RawMessage, error) {
	if pr := probeFrom(ctx); pr != nil {
		pr.calls.Add(1)
	}
	start := time.Now()
	out, err := t.Tool.Execute(ctx, key, p)
	t.m.ProviderLatency.WithLabelValues(t.Name(), providerOutcome(err)).Observe(time.Since(start).Seconds())
	return out, err
}

type timedLooker struct {
	*timedTool
	l tools.Looker
}

func (t *timedLooker) Lookup(ctx context.Context, key string) (json.RawMessage, error) {
	if pr := probeFrom(ctx); pr != nil {
		pr.lookups.Add(1)
	}
	start := time.Now()
	out, err := t.l.Lookup(ctx, key)
	t.m.LookupLatency.WithLabelValues(t.Name(), providerOutcome(err)).Observe(time.Since(start).Seconds())
	return out, err
}

func providerOutcome(err error) string {
	switch {
	case err == nil:
		return ProviderOK
	case errors.Is(err, tools.ErrNotFound):
		return ProviderNotFound
	default:
		return string(tools.Classify(err).Class)
	}
}

// Probe counts the provider calls and lookups made under one context: the
// executor's Outcome says where an action ended, not whether this caller
// touched the provider on the way (a takeover does).
type Probe struct {
	calls, lookups atomic.Int32
}

// Calls is the number of tool Executes under the probe's context.
func (p *Probe) Calls() int { return int(p.calls.Load()) }

// Lookups is the number of tool Lookups under the probe's context.
func (p *Probe) Lookups() int { return int(p.lookups.Load()) }

type probeKey struct{}

// WithProbe returns a context whose instrumented tool calls are counted on
// the returned Probe.
func WithProbe(ctx context.Context) (context.Context, *Probe) {
	p := &Probe{}
	return context.WithValue(ctx, probeKey{}, p), p
}

func probeFrom(ctx context.Context) *Probe {
	p, _ := ctx.Value(probeKey{}).(*Probe)
	return p
}
