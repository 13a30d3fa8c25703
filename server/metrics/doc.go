// Package metrics holds retrysafe's Prometheus instruments and the
// executor.Observer that feeds them.
//
// # Design
//
// Every instrument lives on one Metrics value with its own
// prometheus.Registry rather than on the global default registry: tests
// build as many servers as they like in one process, and nothing registers
// behind the caller's back.
//
// A *Metrics is an executor.Observer: passed as executor.Config.Observer,
// it hears each provider call and lookup (timed into the two histograms)
// and each execution as the executor returned it (executions, replays,
// divergences, in-flight conflicts, reviews, takeovers), from the executor
// itself: nothing wraps the tools and nothing rides in the context, and a
// takeover is what the executor says it did, not an inference. Executions
// that got no outcome (invalid, error) are counted by the edge that
// answered them (the sidecar, the MCP server), which alone knows which of
// them the caller caused; ObserveReconcile adds what a reconciler pass
// returned. It also hears each of the executor's writes lost with its
// connection and sent again (lost_writes_total, by write and by whether
// it got through): the moment a call is nearest to not knowing what it
// did, whose series all exist at zero from the start.
//
// The first execution counted for a (tenant, action) creates all of that
// pair's counters at zero (executions for each outcome, the edge's
// invalid and error included; replays and takeovers for each of the
// executor's four statuses; divergences, in-flight conflicts and
// reviews), so that a query or alert on any of them sees 0 rather than
// no series, and sees the first increment as one.
//
// Labels are tenant, action and outcome only (and write, of a lost
// write), each from a closed set:
// tenants come from configuration, actions from the tool registry (an
// unknown action is refused before anything is counted) and outcomes from
// the constants below. Field values (a CPF, a Pix key, an amount), intent
// references and keys never become labels: they would be personal data and
// would make every series unique. Provider timings carry action and outcome
// only: a histogram is a series per bucket, and a provider's latency does
// not depend on which tenant asked.
//
// # Imports
//
// metrics imports executor (the Observer interface, its event and result
// types, and the status names) and the Prometheus client.
package metrics
