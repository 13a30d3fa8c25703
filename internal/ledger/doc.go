// Package ledger holds all the SQL of the ledger's tables (intents,
// intent_revisions and actions): every statement on them, unexported, in
// sql.go, behind Go functions that take a DBTX (a pool, a connection or a
// pgx.Tx) and return the package's own row types. It is the one place to
// read what the ledger does to the database, and to change it.
//
// # Owners
//
// Two packages own the ledger and are its only importers, with the
// executor's test API (internal/importrule enforces it): intent, the frozen
// intent store (Freeze, Amend, Get, Revisions), and executor, the claims,
// leases and outcomes (Execute, Get, List, Resolve, Purge, the reconciler).
// Every other package reaches these tables through their Go API. The
// ledger knows nothing of either: its rows carry the columns as stored (an
// action's failure is the JSON the executor wrote), and its functions
// decide nothing beyond the statement they run.
//
// # Batches
//
// The executor's hot path shares round trips: the freeze and the claim go
// to the server in one pgx batch, one implicit transaction, one commit, and
// concurrent calls' batches are grouped into one. So most of the package
// is Queue functions, which queue their statements on a caller's
// *pgx.Batch and return where their results land once the batch's results
// are closed (QueueFreeze, QueueClaim, QueueFreshClaims, QueueLookups,
// QueueComplete, ...); the caller decides what goes in a batch and when it
// is sent. The rest are functions that run one statement, or a
// transaction's worth, on the DBTX they are given.
//
// Every statement keeps the text, and so the plan, it was tuned with: the
// plan settings every executor batch but a fresh claim's, a lone
// asynchronous completion's (QueueCompletePlans) and a completions
// group's (QueueCompleteGroupPlans, which leaves its join one plan) opens
// with (QueuePlans), the synchronous commit every writing batch forces
// (QueueDurable, and the same expression inside QueuePlans' statement and
// in the fresh claims' select list), the scalar subqueries and
// OFFSET 0 that keep generic plans to primary-key lookups. The doc
// comments in sql.go say why each is written as it is; the plan tests
// (plans_test.go) keep them honest on new and on vacuumed tables.
//
// Name maps a statement's text to its name, so that tests and tracers can
// tell which statements reached the server without the text leaving the
// package.
//
// # Imports
//
// ledger imports derive (the payload type) and pgx only.
package ledger
