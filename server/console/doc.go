// Package console is retrysafe's operator console: a small server-rendered
// web application, mounted by `retrysafe serve` at /console, for the work
// that needs a person.
//
// # Pages
//
//	/console/          the review queue: per tenant, actions in review,
//	                   oldest first, with the tool, the attempts, the last
//	                   error and its class, what the provider says now
//	                   (the tool's tools.Looker, asked when the queue is
//	                   shown about actions whose last answer is older than
//	                   Config.FreshLookup, and again by a button; every
//	                   answer recorded) and the age; settling goes through
//	                   a confirmation page
//	/console/intent    an intent's story: the frozen payload (personal data
//	                   masked until revealed, and the reveal is recorded),
//	                   the key and provider reference, amendments, the
//	                   action's history, provider requests (when a
//	                   RequestLog is configured), webhook effects and
//	                   outbox rows, the agent turns and model calls behind it
//	/console/search    by tenant and intent ref, key or provider reference
//	/console/now       counts over the last hour and day, from what the
//	                   database records (and saying which counts it does
//	                   not record), and duplicate and avoided model spend
//	                   per day, measured by internal/tokens
//
// Settling calls executor.Resolve, the function `retrysafe resolve` calls,
// in a transaction that also writes the console's audit row: the action's
// row ends exactly as the command leaves it (status, response, the
// resolution with who and why), which a test checks.
//
// # Operators, sessions, forgery
//
// Operators are not tenants: each has its own token (`retrysafe operator
// add`), stored as a SHA-256, and is scoped to the tenants it names. Every
// read and write checks the tenant against that list; another tenant's
// intent answers exactly as a missing one does (404). Signing in makes a
// session (a random id, stored hashed, in an HttpOnly SameSite=Strict
// cookie, Secure over TLS) that expires on the database's clock after
// Config.SessionTTL. A request without a live session gets the sign-in page
// with 401.
//
// Every state-changing request passes two checks: net/http's
// CrossOriginProtection (Sec-Fetch-Site, or Origin against Host, as
// browsers send them) and the session's own CSRF token, a hidden field of
// every form compared in constant time. A forged cross-site POST fails the
// first; a request that carries the cookie by some other route still lacks
// the second.
//
// # What is logged
//
// Log lines carry the operator's name, the tenant, the action, the key and
// the outcome. Never a payload value, an intent_ref, a reason, a provider
// response or a token. Pages are sent with Cache-Control: no-store and a
// Content-Security-Policy that allows only the console's own files.
//
// # Whose SQL
//
// The console owns console_operators, console_sessions and console_audit
// (migration 012). The ledger's tables (actions, intents) it reads
// through the executor's API (ListReview, ListByKey, ListByRef,
// ListByReference, CountRecent), with a statement of its own for the
// console's latest lookup of each queued key; the webhook's and the
// agent's tables through their owners (webhook.EffectsOfOrder,
// agent.TurnsOfKey, ...).
//
// This package imports derive, intent, executor, tools, agent, webhook,
// internal/tokens, pgx, govalues/decimal and the standard library. Its assets (templates, CSS, a few lines of
// JavaScript) are embedded: it needs no network and no build step.
package console
