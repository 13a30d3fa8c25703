// Package idempotency is a net/http middleware that makes a POST route safe
// to retry: a request repeated with the same Idempotency-Key header gets the
// first request's stored answer instead of running the handler again. Wrap
// your own routes with it (see the example): New once on a pgx pool, then
// Middleware.Transactional for a handler whose effects are database writes,
// Middleware.Reservation for one whose effects leave the database.
//
// It follows the IETF "The Idempotency-Key HTTP Header Field" draft (-07)
// and Stripe's documented behaviour.
//
// # Key scope
//
// A key is scoped by (tenant, operation, key), the primary key of its row.
// The tenant comes from Config.Tenant, a hook that reads the authenticated
// caller, never from the body, so a key used by tenant A is invisible to
// tenant B; the operation is Route.Operation, one name per route. Keys are
// printable ASCII of at most 255 characters; the draft's quoted sf-string
// form ("abc") is accepted and unquoted (ParseKey).
//
// # Request fingerprint
//
// The first request's fingerprint is stored with its key: SHA-256 over the
// method, the path, the sorted query and the body in canonical JSON, so key
// order, white space and string escapes do not change it; a body that is
// not JSON is hashed as raw bytes (Fingerprint, CanonicalJSON). Headers are
// not part of it.
//
// # Answers
//
// A request with a key gets one of:
//
//   - no row yet: the handler runs, and its status, the headers that
//     matter (Config.StoreHeaders) and its body are stored and sent.
//   - the same fingerprint, finished: the stored answer, byte for byte,
//     with Idempotent-Replayed: true. 4xx and 5xx answers are stored too,
//     with one exception: a 5xx given after the client's request was
//     canceled reached no one and is most often the cancellation's echo (a
//     query refused for a canceled context), so it is rolled back
//     (transactional) or its lease ended (reservation), and the retry runs
//     the handler again.
//   - the same fingerprint, still running (a concurrent duplicate): 409
//     with Retry-After (Config.RetryAfter), or, when the route sets
//     Route.Wait, the first request's answer once it finishes within that
//     bound. Config.OnInFlight hears each such find (for a metric of
//     retries that overtake their first request).
//   - another fingerprint: 422, nothing executed.
//   - a missing key (unless Route.KeyOptional), an invalid one or an
//     unreadable body: 400; no tenant: 401; a body over
//     Config.MaxBodyBytes: 413; the store unreachable: 503 with
//     Retry-After. Nothing was executed for any of them. A transactional
//     request whose commit failed: 500, its effects rolled back. One whose
//     connection was lost with the COMMIT sent may have committed: what it
//     left is read on another connection once no transaction writes the
//     key (sent again while the database cannot be reached, up to
//     Config.LostWriteRetry, 10 s by default):
//     committed, the stored answer; rolled back, 500; still unknown, 503
//     commit-unknown with Retry-After (a retry with the key gets the
//     stored answer if it committed, and runs afresh if not).
//
// Every answer the middleware gives on its own is an RFC 9457
// application/problem+json whose type is a section of the repository's
// docs/problems.md (ProblemDocs, ProblemTypes); WriteProblem answers a
// handler's own errors in the same form.
//
// # Two modes
//
// Transactional (Middleware.Transactional): the key is inserted in a
// transaction that the handler receives and writes through; the stored
// answer is written in the same transaction and only then is it sent.
// Key, effects and answer commit together or not at all: a process killed
// mid-handler leaves no row, and the next request runs afresh.
//
// A duplicate that arrives while the first is uncommitted blocks on the
// primary key's unique index inside PostgreSQL. The middleware bounds that
// wait with SET LOCAL lock_timeout (Config.LockTimeout, restored before the
// handler runs) instead of letting the duplicate sit on a pool connection
// for the whole of the first handler: a short wait turns most duplicates of
// a fast handler into replays, and a long handler costs duplicates one
// LockTimeout of connection time before their 409. Route.Wait then polls,
// with no connection held between polls and a jittered pause that doubles
// from Config.PollInterval, so that a crowd of duplicates does not poll in
// step.
//
// Reservation (Middleware.Reservation): the key is inserted and committed
// as running with a lease before the handler runs, and the handler runs
// with no connection held by the middleware. Its handler must tolerate a
// second run for one key, normally by passing Info.Key on to the provider
// as the provider's own idempotency key.
//
// # Lease and fencing
//
// A reservation's lease (Config.Lease) is measured by the database clock,
// never the Go one: the row's lease_until is set with now() + lease and
// every decision (expired, lease over, time left) is computed by the
// statement that reads the row. If the process dies, the row stays running
// until its lease ends; the next request with the key then takes it over,
// with an UPDATE that is a compare-and-set on the attempt counter it read,
// so of several concurrent takers exactly one wins, and runs the handler
// again with Info.Attempt incremented. The attempt is the fencing token:
// completion writes only WHERE attempt = its own attempt, so a handler
// whose lease was taken over cannot overwrite the newer attempt's answer
// (its own answer still goes to its client, and is not kept). The
// handler's context ends with its lease, so that it stops before anyone may
// take it over; a handler that panics ends its lease at once.
//
// Each write of a reservation goes on a connection that may break under it
// (PostgreSQL restarting, crashing or failing over): the write may then
// have committed or not. It is sent again, and again after a pause while
// the database cannot be reached (internal/lostconn: 50 ms doubling to
// 1 s), for up to Config.LostWriteRetry (10 s by default: set it to the
// database's failover time), and the client's answer waits for it. The
// reservation sent again reserves the key, or finds it running under the
// request's own holder (a random number stored with the rows it reserves
// or takes over, migration 017), which only its own lost reservation can
// be, and runs the handler under it. The answer and the end of the lease
// sent again are fenced by the attempt as before, and a try that matches
// nothing because the lost one committed is told apart by the row (this
// attempt, done). Only then, the database still away, is the reservation
// answered 503, or the answer sent unstored: the row stays running, and a
// retry after the lease runs the handler again (which it tolerates). Each
// such loss is logged, and Config.OnLostWrite, when set, hears how sending
// the write again (or reading what a lost COMMIT left) ended: the
// middleware keeps no metrics of its own, and a route's owner counts
// them where it counts the rest.
//
// This is the protocol of the executor's actions table too (package
// executor: a lease by the database clock, a takeover by compare-and-set on
// the attempt, completion fenced by it), but not its SQL, which differs per
// table: an action's fence names its lease owner and its row lives on
// through review and retries by the action's own state machine, while an
// idempotency key's fence is its attempt alone and its row carries a
// fingerprint and a retention deadline that make an expired or reused key
// its own decision. The shared pieces that are code, not SQL, are shared:
// the jittered backoff (internal/backoff), what a lost connection leaves
// and the write sent again (internal/lostconn), and the problem+json
// writer (internal/problem).
//
// # Connections
//
// A request never takes a second pool connection while holding one:
// transactional mode does everything (reserve, read back, handler, store,
// commit) on the one connection of its transaction, and reservation mode
// holds none while the handler runs. With hundreds of concurrent duplicates
// on a pool of 2-4 connections nothing deadlocks.
//
// # Retention and purge
//
// A stored key lives Config.Retention (default 24 h, never less than
// Config.Lease) after its answer was stored. An expired key is treated as
// absent (a new request with it runs the handler, whatever its old
// request). Middleware.Purge, or RunPurger in one or more processes,
// deletes expired rows in batches of Config.PurgeBatch, each a single short
// statement that skips locked rows, so the purge never waits on, or
// blocks, a request; a running row is purged only once its lease is over
// too. Config.Policy describes the policy in words for --help output.
//
// # The table
//
// This package owns the idempotency_requests table, created by migration
// 002 (package migrations): its statements are unexported here and
// nothing else reads or writes it.
//
// # Imports
//
// This package imports the standard library, pgx, and three leaves of
// retrysafe's own: internal/problem, internal/backoff and
// internal/lostconn. It knows nothing else of retrysafe; the sandboxes and
// users' own services build on it.
package idempotency
