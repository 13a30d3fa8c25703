// Package edge holds what the two edges that execute tools for a remote
// caller, the sidecar (HTTP) and the MCP server, share: the limits on the
// identifiers they accept, the constant-time token check, running a call
// detached from the caller, the classes of an execution that got no
// outcome, and the answer members that come from the executor's Outcome.
// Each edge words its own answers (problem+json, MCP results); what a call
// means is decided here once, so that the two cannot drift apart.
//
// # Imports
//
// edge imports derive, intent and tools (their error sentinels) and
// executor.
package edge
