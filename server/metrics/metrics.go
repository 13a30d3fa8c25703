package metrics

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/retrysafe/retrysafe/executor"
)

// Namespace prefixes every metric name.
const Namespace = "retrysafe"

// Outcomes of an execution as counted by Executions. The first four are the
// executor's statuses; the last two are calls that got no status.
const (
	OutcomeCompleted = string(executor.StatusCompleted)
	OutcomeFailed    = string(executor.StatusFailed)
	OutcomeInFlight  = string(executor.StatusInFlight)
	OutcomeReview    = string(executor.StatusReview)
	OutcomeInvalid   = "invalid" // refused before anything was frozen (bad fields)
	OutcomeError     = "error"   // no answer could be given (database down, ...)
)

// How a lost write's sending again ended, as counted by LostWrites.
const (
	LostThrough    = "through"
	LostNotThrough = "not_through"
)

// Outcomes of one provider call or lookup, as timed by the provider
// histograms: success, a tools.Class, or (lookups only) not_found.
const (
	ProviderOK       = "ok"
	ProviderNotFound = "not_found"
)

// Metrics is the set of instruments of one process.
type Metrics struct {
	// Registry holds every instrument below plus the Go runtime and
	// process collectors. Serve it with Handler.
	Registry *prometheus.Registry

	// Executions counts execute calls by outcome.
	Executions *prometheus.CounterVec // tenant, action, outcome
	// Replays counts calls answered from a stored outcome without running
	// the tool; outcome is the stored status.
	Replays *prometheus.CounterVec // tenant, action, outcome
	// Divergences counts calls whose extraction differed from the frozen
	// payload (the divergent values were dropped). Field names are not
	// labels: the answer to the caller names them.
	Divergences *prometheus.CounterVec // tenant, action
	// InFlightConflicts counts calls answered 409 because another caller
	// held a live lease on the action.
	InFlightConflicts *prometheus.CounterVec // tenant, action
	// Takeovers counts calls that took over an expired lease and ran the
	// tool again with the same key; outcome is where it ended.
	Takeovers *prometheus.CounterVec // tenant, action, outcome
	// Reviews counts calls answered "review": the action waits for an
	// operator (retrysafe resolve).
	Reviews *prometheus.CounterVec // tenant, action
	// Reconciled counts what reconciler passes did, by outcome
	// (taken_over, completed, failed, review, retrying, lease_lost, error).
	Reconciled *prometheus.CounterVec // outcome
	// ProviderLatency times each tool Execute (the provider call).
	ProviderLatency *prometheus.HistogramVec // action, outcome
	// LookupLatency times each tool Lookup (asking the provider by key).
	LookupLatency *prometheus.HistogramVec // action, outcome
	// LostWrites counts the executor's writes whose connection was lost
	// after they were sent, by write (claim, takeover, completion,
	// release) and by how sending them again ended (through: the
	// database answered; not_through: the call ended in the connection's
	// error and its action waits for its lease to run out). Every series
	// exists from the start, at zero: an alert on the first one sees it.
	LostWrites *prometheus.CounterVec // write, outcome

	// seen holds the (tenant, action) pairs whose series exist (see
	// initPair), copied on write under seenMu: a new pair is rare (the
	// pairs are tenants × actions), a lookup happens on every execution
	// and must neither lock nor allocate, which a sync.Map's any-typed
	// key (the pair boxed on each call) did.
	seen   atomic.Pointer[map[pair]struct{}]
	seenMu sync.Mutex
}

// pair is a (tenant, action) whose per-pair series have been created.
type pair struct{ tenant, action string }

// statuses are the executor's outcomes, the values the outcome label of
// Replays and Takeovers takes; Executions takes these and the edge's two
// (invalid, error).
var statuses = []string{OutcomeCompleted, OutcomeFailed, OutcomeInFlight, OutcomeReview}

// providerBuckets span a fast in-region API (5 ms) to the executor's default
// call timeout (10 s) and a little past it.
var providerBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15}

// New builds the instruments on a fresh registry.
func New() *Metrics {
	tao := []string{"tenant", "action", "outcome"}
	ta := []string{"tenant", "action"}
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Executions: counter("executions_total",
			"Tool executions requested, by outcome (completed, failed, in_flight, review, invalid, error).", tao),
		Replays: counter("replays_total",
			"Executions answered from the stored outcome without calling the provider, by stored outcome.", tao),
		Divergences: counter("divergences_total",
			"Executions whose extraction differed from the frozen payload; the frozen payload was used.", ta),
		InFlightConflicts: counter("in_flight_conflicts_total",
			"Executions answered 409 because another caller holds a live lease on the action.", ta),
		Takeovers: counter("takeovers_total",
			"Executions that took over an expired lease and settled the action with the same key, by outcome.", tao),
		Reviews: counter("reviews_total",
			"Executions answered review: the action waits for an operator.", ta),
		Reconciled: counter("reconciler_actions_total",
			"Actions handled by reconciler passes, by outcome (taken_over, completed, failed, review, retrying, lease_lost, error).", []string{"outcome"}),
		ProviderLatency: histogram("provider_call_duration_seconds",
			"Duration of provider calls (tool Execute), by outcome (ok, definitive, transient, uncertain)."),
		LookupLatency: histogram("provider_lookup_duration_seconds",
			"Duration of provider lookups by key (tool Lookup), by outcome (ok, not_found, definitive, transient, uncertain)."),
		LostWrites: counter("lost_writes_total",
			"Executor writes whose database connection was lost after they were sent, by write (claim, takeover, completion, release) and by how sending them again ended (through, not_through).",
			[]string{"write", "outcome"}),
	}
	for _, w := range []string{executor.WriteClaim, executor.WriteTakeover, executor.WriteCompletion, executor.WriteRelease} {
		m.LostWrites.WithLabelValues(w, LostThrough)
		m.LostWrites.WithLabelValues(w, LostNotThrough)
	}
	m.Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.Executions, m.Replays, m.Divergences, m.InFlightConflicts, m.Takeovers,
		m.Reviews, m.Reconciled, m.ProviderLatency, m.LookupLatency, m.LostWrites,
	)
	return m
}

func counter(name, help string, labels []string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
}

// histogram times provider calls, by action and outcome.
func histogram(name, help string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: name, Help: help, Buckets: providerBuckets,
	}, []string{"action", "outcome"})
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{
		Registry: m.Registry, // counts its own scrape errors
		Timeout:  10 * time.Second,
	})
}

// ObserveReconcile adds one reconciler pass's counts.
func (m *Metrics) ObserveReconcile(r executor.ReconcileResult) {
	for outcome, n := range map[string]int{
		"taken_over": r.TakenOver,
		"completed":  r.Completed,
		"failed":     r.Failed,
		"review":     r.Review,
		"retrying":   r.Retrying,
		"lease_lost": r.LeaseLost,
		"error":      r.Errors,
	} {
		if n > 0 {
			m.Reconciled.WithLabelValues(outcome).Add(float64(n))
		}
	}
}
