package metrics

import (
	"maps"

	"github.com/retrysafe/retrysafe/executor"
)

// Metrics is the executor's Observer: pass it as executor.Config.Observer
// and every provider call, lookup and execution of that executor is
// counted here, whoever asked for it (the sidecar, the MCP server, the
// agent, the reconciler).
var _ executor.Observer = (*Metrics)(nil)

// ProviderCalled times a tool Execute into ProviderLatency.
func (m *Metrics) ProviderCalled(ev executor.ProviderEvent) {
	m.ProviderLatency.WithLabelValues(ev.Action, providerOutcome(ev)).Observe(ev.Elapsed.Seconds())
}

// LookupDone times a tool Lookup into LookupLatency.
func (m *Metrics) LookupDone(ev executor.ProviderEvent) {
	m.LookupLatency.WithLabelValues(ev.Action, providerOutcome(ev)).Observe(ev.Elapsed.Seconds())
}

func providerOutcome(ev executor.ProviderEvent) string {
	switch {
	case ev.NotFound:
		return ProviderNotFound
	case ev.Err == nil:
		return ProviderOK
	}
	return string(ev.Class)
}

// ExecutionFinished counts one execution's outcome: the execution by
// status, a replay, a divergence, an in-flight conflict, a review, and a
// takeover (this call took over an expired lease and did not merely find
// the action settled). An execution without an outcome is not counted
// here: which of the executor's errors are the caller's (invalid) and
// which are not (error) is for the edge that answers the caller, and it
// counts them.
func (m *Metrics) ExecutionFinished(ev executor.ExecutionEvent) {
	out := ev.Outcome
	if out == nil {
		return
	}
	m.initPair(ev.Tenant, ev.Action)
	status := string(out.Status)
	m.Executions.WithLabelValues(ev.Tenant, ev.Action, status).Inc()
	if out.Replayed {
		m.Replays.WithLabelValues(ev.Tenant, ev.Action, status).Inc()
	}
	if len(out.Divergent) > 0 {
		m.Divergences.WithLabelValues(ev.Tenant, ev.Action).Inc()
	}
	switch out.Status {
	case executor.StatusInFlight:
		m.InFlightConflicts.WithLabelValues(ev.Tenant, ev.Action).Inc()
	case executor.StatusReview:
		m.Reviews.WithLabelValues(ev.Tenant, ev.Action).Inc()
	}
	if ev.TookOver && !out.Replayed {
		m.Takeovers.WithLabelValues(ev.Tenant, ev.Action, status).Inc()
	}
}

// WriteLost counts a lost write by how sending it again ended.
func (m *Metrics) WriteLost(ev executor.WriteEvent) {
	outcome := LostThrough
	if ev.Err != nil {
		outcome = LostNotThrough
	}
	m.LostWrites.WithLabelValues(ev.Write, outcome).Inc()
}

// initPair creates, at zero, every series of a (tenant, action) the first
// time an execution of it is counted. A counter that first appears at 1 is
// one Prometheus's increase() and rate() cannot see rise, and a series
// that never appears cannot tell "none" from "not scraped": an alert on
// in-flight conflicts or reviews would miss the first one, and a dashboard
// would show no data where the answer is 0. The pairs are not known in
// advance here (tenants live in the edge's configuration), so they are
// created when first seen, once: later calls pay one map lookup, with
// no lock and no allocation.
func (m *Metrics) initPair(tenant, action string) {
	k := pair{tenant, action}
	if seen := m.seen.Load(); seen != nil {
		if _, ok := (*seen)[k]; ok {
			return
		}
	}
	m.seenMu.Lock()
	defer m.seenMu.Unlock()
	old := m.seen.Load()
	if old == nil {
		old = &map[pair]struct{}{}
	}
	if _, ok := (*old)[k]; ok {
		return // another call created them first
	}
	next := make(map[pair]struct{}, len(*old)+1)
	maps.Copy(next, *old)
	next[k] = struct{}{}
	defer m.seen.Store(&next) // after the series exist
	for _, s := range statuses {
		m.Executions.WithLabelValues(tenant, action, s)
		m.Replays.WithLabelValues(tenant, action, s)
		m.Takeovers.WithLabelValues(tenant, action, s)
	}
	// The edge counts these two, but "the database went away" is the
	// increase an alert most wants to see from its first occurrence.
	m.Executions.WithLabelValues(tenant, action, OutcomeInvalid)
	m.Executions.WithLabelValues(tenant, action, OutcomeError)
	m.Divergences.WithLabelValues(tenant, action)
	m.InFlightConflicts.WithLabelValues(tenant, action)
	m.Reviews.WithLabelValues(tenant, action)
}

// Of returns ex's Observer when it is a *Metrics, so that an edge given
// no Metrics of its own serves the registry its executor counts into;
// otherwise a fresh New().
func Of(ex *executor.Executor) *Metrics {
	if m, ok := ex.Config().Observer.(*Metrics); ok {
		return m
	}
	return New()
}
