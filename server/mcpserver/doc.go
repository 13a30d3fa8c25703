// Package mcpserver serves retrysafe's tools over the Model Context
// Protocol, on the official Go SDK (github.com/modelcontextprotocol/go-sdk),
// so that any MCP host (Claude, the OpenAI Agents SDK, LangGraph, an agent
// of one's own) gets the frozen-intent guarantee: the same intent acts once,
// however many times a framework redelivers or retries the tool call.
//
// MCP has no idempotency of its own: tools/call carries no key, and a key a
// model makes up changes from call to call. Each tools/call here goes to
// executor.Executor.Execute with executor.Opts{NoWait: true}, exactly as
// the sidecar's POST /v1/tools/{action}/execute does: the arguments are
// normalized and frozen under the intent reference, the key is derived from
// the frozen row, the action is claimed under a lease and executed at most
// once per key.
//
// # Tools
//
// Every tool of the registry is listed under its function name
// (tools.FunctionName: "pix_charge"; most model APIs refuse dots), titled
// with its action name, with its model-facing parameters as the input
// schema, an output schema describing Result, and annotations
// (DefaultAnnotations unless Config.Annotations says otherwise):
// destructiveHint, idempotentHint and openWorldHint true, readOnlyHint
// false. idempotentHint is true because retrysafe makes it so per intent.
//
// # Who names the intent and the tenant
//
// Never the model alone. The intent reference is, in order:
//
//  1. _meta["io.retrysafe/intent_ref"] on the tools/call request (MetaIntentRef),
//     set by the host application: the model produces only the arguments;
//  2. the Retrysafe-Intent-Ref header of the streamable HTTP request
//     (HeaderIntentRef), a binding the host makes for a connection before
//     the model runs; it must agree with _meta when both are given;
//  3. for the tools the operator lists in Config.ModelRefTools only, an
//     intent_ref argument (added to their input schema) from the model,
//     and then every result says "guarantee": "weaker".
//
// A call with none of these is refused with a tool error (status
// "refused"), before anything is frozen or called. A malformed reference
// (empty, longer than 200 bytes, surrounded by white space, control
// characters) is refused the same way, as the sidecar refuses it.
//
// The tenant comes from the transport, never from a request: over stdio
// (Server.Serve, Server.ForTenant) from the process's configuration; over
// streamable HTTP (Server.HTTPHandler) from the bearer token, in the
// sidecar's credential format and compared in constant time the same way.
// The HTTP handler is stateless (no Mcp-Session-Id), so each request is
// authenticated on its own.
//
// # Results
//
// Every answer carries a Result as structured content, and its Message and
// the same JSON as text for hosts that show the model text only:
//
//	completed   isError false; replayed says whether this call acted
//	failed      isError true: the provider refused; the same call gets the same answer
//	in_flight   isError true: call again with the same arguments after retry_after_ms
//	review      isError true: do not retry; a person settles it (retrysafe resolve)
//	invalid     isError true: the fields (every broken one named, never their values) or the
//	            reference are wrong, the database refused a value, the
//	            payload is frozen under another reference, or the action
//	            is unknown (the sidecar's 400, 409 and 404); nothing
//	            frozen, nothing called, and the same call would be
//	            refused again
//	refused     isError true: no intent reference from the host
//	error       isError true: database or timeout; the same call again is safe
//
// A request that carries a progress token gets progress notifications: one
// when the call starts, one every Config.ProgressInterval while it waits for
// the provider, one when it ends.
//
// The execution runs on a context detached from the request's, bounded by
// Config.ExecuteTimeout: a host that hangs up, or a process stopped
// mid-call, does not cut the provider call halfway (the SDK's session waits
// for its handlers before Serve returns).
//
// # Logs and metrics
//
// The sidecar's counters (server/metrics: executions, replays, divergences,
// in-flight conflicts, reviews, takeovers) with labels tenant, action and
// outcome, counted by the executor's Observer, except the calls answered
// without an outcome (invalid, refused, error), which the server counts
// in Config.Metrics; one log line per call with tenant, action, outcome,
// the idempotency key (an HMAC) and where the reference came from. Never an
// argument, an intent reference or a body.
//
// # Imports
//
// mcpserver imports executor, tools, server/metrics, server/internal/edge
// (what it shares with the sidecar: identifier limits, the constant-time
// token check, the detached execution, the classes of an execution without
// an outcome, the Answer members) and the MCP Go SDK. It knows nothing of
// cmd/, sandbox/ or the sidecar.
package mcpserver
