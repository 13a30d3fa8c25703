package metrics

import (
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

// Of returns ex's Observer when it is a *Metrics, so that an edge given
// no Metrics of its own serves the registry its executor counts into;
// otherwise a fresh New().
func Of(ex *executor.Executor) *Metrics {
	if m, ok := ex.Config().Observer.(*Metrics); ok {
		return m
	}
	return New()
}
