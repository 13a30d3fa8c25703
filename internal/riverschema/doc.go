// Package riverschema installs River's own tables (jobs, leader, queues,
// migrations) into the same schema as retrysafe's tables, so that a job can
// be inserted in the same transaction as the row it is about.
//
// Migrate runs River's bundled migrations (rivermigrate, line "main"), one
// transaction per River version: a version that adds an enum value must
// commit before a later version uses it. Each transaction first takes the
// same transaction-scoped advisory lock as retrysafe's own migrator (package
// migrations) for that schema and reads the applied versions afresh, so
// River's and retrysafe's migrations of one schema never interleave inside a
// version, concurrent migrators apply each version once, and each holds one
// connection at a time (safe on a pool of one). A failed version rolls back
// whole; the versions before it stay applied, and the next run resumes.
//
// Call it after migrations.Migrate (retrysafe migrate, pgtest, the server
// and the worker at start-up); running it again is a no-op.
//
// This package imports pgx, River's migrator and its pgx driver, and
// package migrations (schema name validation).
package riverschema
