// Package lostconn decides what a write whose connection failed means, and
// sends such a write again while the database cannot be reached.
//
// A write sent to PostgreSQL whose connection breaks before the answer
// (the server crashed, restarted, failed over, or the network dropped) may
// or may not have committed: Lost tells such an error from the server's own
// refusal of the statement (a *pgconn.PgError: what it refused it rolled
// back) and from the end of the caller's context. A connection refused
// because the server is starting up, recovering from a crash, shutting
// down or full (FATAL 57P03, 57P01, 53300 in answer to the startup
// message) counts as lost too: nothing was sent, and the write is sent
// again like a lost one.
//
// SendAgain sends a lost write again, pausing between tries (50 ms doubling
// to 1 s, the upper half random: internal/backoff) for as long as each try
// cannot reach the server either (Unreachable), up to a bound or the end of
// the caller's context. A PostgreSQL that restarts or fails over is back
// within seconds, and what the caller holds (an outcome, an answer, a
// lease to end) would otherwise wait for a lease to run out. Only a write
// that is safe to repeat may be sent so: one fenced by an owner or an
// attempt, a compare-and-set, or an insert that finds its own row. Each
// caller says why its writes are (package executor: completions, releases,
// claims and takeovers; package idempotency: a reservation's answer and
// the end of its lease).
//
// # Imports
//
// This package imports the standard library, pgx's pgconn, and
// internal/backoff.
package lostconn
