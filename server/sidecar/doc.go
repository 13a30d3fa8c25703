// Package sidecar is retrysafe's HTTP API for agents written in any
// language: an agent posts the fields its model extracted for a tool call,
// and the sidecar freezes the intent, executes the tool at most once per
// key, and answers with the outcome.
//
// # Endpoints
//
//	POST /v1/tools/{action}/execute   {"intent_ref","fields","source_ref"}
//	GET  /v1/intents/{intent_ref}/{action}
//	GET  /v1/tools                    the tools and their model-facing parameters
//	GET  /healthz                     the process answers
//	GET  /readyz                      the database answers, migrations are current, fsync is on
//	                                  (reports fsync, synchronous_commit, full_page_writes,
//	                                  synchronous_standby_names and the standbys)
//	GET  /metrics                     Prometheus; behind Config.MetricsToken when set, or
//	                                  left off (Config.NoMetrics) for MetricsHandler elsewhere
//
// The /v1 routes need "Authorization: Bearer <token>". The token names the
// tenant; nothing in the request body or path does, so one tenant's token
// can neither read nor act on another tenant's intents (every read below is
// scoped by the token's tenant, and the same intent_ref under two tenants is
// two intents with two keys). Tokens are compared in constant time, and all
// of them are compared on every request, so timing reveals neither a prefix
// nor which tenant's token was close.
//
// # Execute
//
// Before it is decoded, the body is checked by internal/strictjson: a
// duplicate member (encoding/json keeps the last: "amount":"1,00",
// "amount":"9999,00" would charge 9999,00), invalid UTF-8 or an unpaired
// surrogate escape (replaced by U+FFFD) and a NUL anywhere (PostgreSQL
// refuses it, and would fail the commit group the call joined) are a 400
// naming the field as a dotted path ("fields.amount"), with nothing frozen
// and nothing called. A value the database still refuses
// (executor.ErrRefused) is a 400 too: the same call would be refused
// again, so it is never answered "retrying is safe".
//
// The body is decoded with json.Decoder.UseNumber: an amount such as 180.1
// reaches derive as the literal "180.1", never as a float64, so it is
// normalized digit by digit. Unknown top-level members are refused (a
// misspelt "intent_ref" must not silently freeze under an empty reference).
//
// Status codes:
//
//	200  completed or failed (a definitive failure is an answer, not an error:
//	     the same call will get it again; a new try needs a new intent_ref)
//	202  review: an operator must settle the action (retrysafe resolve)
//	409  in_flight, with Retry-After: another caller holds the lease; a
//	     problem+json (type in-flight) keeping the answer's members
//	400  problem+json: bad body or fields that cannot be normalized (every
//	     one listed in errors; nothing frozen, nothing called)
//	401  unknown or missing token;  404 unknown action
//	503  database unavailable (nothing answered; retrying is safe)
//
// Every problem type is a section of docs/problems.md (ProblemDocs).
//
// The execution runs on a context detached from the client's: an agent that
// hangs up mid-call does not cancel the provider call halfway (which would
// leave the action uncertain until the reconciler settles it); the call
// finishes, is recorded, and the agent's retry gets the replay.
// Config.ExecuteTimeout bounds it instead.
//
// Transient provider failures are not retried inside the request
// (executor.Opts.NoWait): the caller gets 409 with Retry-After and retries
// with the same call, which the executor turns into the same key.
//
// # Logs and metrics
//
// Logs (log/slog) and metric labels carry tenant, action, outcome, status
// and the idempotency key (an HMAC, which reveals nothing of the payload);
// never a field value, an intent_ref or a body. Field errors name the
// field and the rule, never the value.
//
// The executor counts what it answers: Config.Metrics is normally the
// executor's Observer (server/metrics), which hears every execution,
// provider call and takeover from the executor itself. The sidecar counts
// only what never got an outcome: a body refused before the executor ran,
// and executor errors, as invalid (the caller's: fields, a payload frozen
// under another intent_ref, a value the database refuses) or error.
//
// # Shared with the MCP server
//
// What an answer means is decided once, in server/internal/edge, for the
// sidecar and the MCP server alike: the identifier limits, the
// constant-time token check, the detached NoWait execution (and what a
// lost lease returns), the classes of an execution without an outcome, and
// the answer members taken from the Outcome (Answer, embedded in
// ExecuteResponse).
//
// # Imports
//
// sidecar imports derive, intent, executor, tools, migrations,
// server/metrics, server/internal/edge, internal/strictjson, pgx and the
// Prometheus client. It knows nothing of cmd/ or sandbox/.
package sidecar
