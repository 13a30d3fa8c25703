// Package metrics holds retrysafe's Prometheus instruments and the tool
// wrapper that times provider calls.
//
// # Design
//
// Every instrument lives on one Metrics value with its own
// prometheus.Registry rather than on the global default registry: tests
// build as many servers as they like in one process, and nothing registers
// behind the caller's back.
//
// Labels are tenant, action and outcome only, each from a closed set:
// tenants come from configuration, actions from the tool registry (an
// unknown action is refused before anything is counted) and outcomes from
// the constants below. Field values (a CPF, a Pix key, an amount), intent
// references and keys never become labels: they would be personal data and
// would make every series unique. Provider timings carry action and outcome
// only, because a tool call does not know which tenant it serves.
//
// # Imports
//
// metrics imports tools, derive (through tools' interface), executor (only
// for the ToolSource and ReconcileResult types) and the Prometheus client.
package metrics
