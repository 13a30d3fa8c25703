// Package idempotency is a net/http middleware that makes a POST route safe
// to retry: a request repeated with the same Idempotency-Key header gets the
// first request's stored answer instead of running the handler again.
//
// It follows the IETF "The Idempotency-Key HTTP Header Field" draft (-07)
// and Stripe's documented behaviour:
//
//   - Scope is (tenant, operation, key). The tenant comes from Config.Tenant,
//     a hook that reads the authenticated caller, never from the body, so a
//     key used by tenant A is invisible to tenant B.
//   - A missing key (on a route that requires one), an empty key or one
//     longer than 255 characters: 400 application/problem+json, nothing
//     written. Keys are printable ASCII; the draft's quoted sf-string form
//     ("abc") is accepted and unquoted.
//   - Same key, same fingerprint, finished: the stored status, the headers
//     that matter (Config.StoreHeaders) and the body byte for byte, with
//     Idempotent-Replayed: true. 4xx and 5xx answers are stored too,
//     with one exception: a 5xx given after the client's request was
//     canceled (it hung up or timed out) reached no one and is most often
//     the cancellation's echo (a query refused for a canceled context), so
//     it is rolled back (transactional) or its lease ended (reservation),
//     and the client's retry runs the handler again. Stored, it would
//     answer every retry with a failure that never happened to anyone.
//   - Same key, same fingerprint, still running: 409 with Retry-After, or,
//     when the route sets Route.Wait, the answer of the first request once
//     it finishes within that bound.
//   - Same key, different fingerprint: 422, nothing executed. The
//     fingerprint is SHA-256 over the method, the path, the sorted query and
//     the body in canonical JSON (key order, white space and string escapes
//     do not change it; a body that is not JSON is hashed as raw bytes).
//
// Every answer the middleware gives on its own is a problem+json whose
// type is a section of the repository's docs/problems.md (ProblemDocs).
//
// # Two modes
//
// Transactional (Middleware.Transactional): the key is inserted in a
// transaction that the handler receives and writes through; the stored
// response is written in the same transaction and only then is the answer
// sent. Key, effects and response commit together or not at all: a process
// killed mid-handler leaves no row, and the next request runs afresh.
//
// A duplicate that arrives while the first is uncommitted blocks on the
// primary key's unique index inside PostgreSQL. The middleware bounds that
// wait with SET LOCAL lock_timeout (Config.LockTimeout, restored before the
// handler runs) instead of letting the duplicate sit on a pool connection
// for the whole of the first handler: a short wait turns most duplicates of
// a fast handler into replays, and a long handler costs duplicates one
// LockTimeout of connection time before their 409. Route.Wait then polls
// with no connection held between polls.
//
// Reservation (Middleware.Reservation): for handlers whose effects leave the
// database (a call to a payment provider). The key is inserted and committed
// as 'running' with a lease before the handler runs, and the handler runs
// with no connection held by the middleware. If the process dies, the row
// stays 'running' until its lease (Config.Lease, measured on the database
// clock) expires; the next request with that key then takes the row over
// with a compare-and-set on the attempt counter and runs the handler again.
// Handlers of reservation routes must therefore tolerate a second run for
// one key, normally by passing Info.Key on to the provider as its own
// idempotency key. The attempt counter fences completion: a handler whose
// lease was taken over cannot overwrite the newer attempt's response.
// The handler's context is cancelled when its lease ends, so that it stops
// before anyone may take it over.
//
// # Connections
//
// A request never takes a second pool connection while holding one:
// transactional mode does everything (reserve, read back, handler, store,
// commit) on the one connection of its transaction, and reservation mode
// holds none while the handler runs. With hundreds of concurrent duplicates
// on a pool of 2-4 connections nothing deadlocks.
//
// # Retention
//
// A stored key lives Config.Retention (default 24 h, never less than
// Config.Lease) after its answer was stored. An expired key is treated as
// absent (a new request with it runs the handler) and Middleware.Purge (or
// RunPurger) deletes expired rows in batches of Config.PurgeBatch, each a
// single short statement that skips locked rows, so the purge never waits
// on, or blocks, a request. Config.Policy describes the policy in words for
// --help output.
//
// # Imports
//
// This package imports only the standard library and pgx. It knows nothing
// of the rest of retrysafe; the server, the sandbox and users' own services
// build on it. Its table is created by migration 002 (migrations package).
package idempotency
