// Package migrations holds retrysafe's versioned SQL and the one migrator
// that applies it.
//
// Files are named NNN_description.sql and embedded into the binary, so a
// deployed `retrysafe migrate` always carries exactly the schema its code
// expects. Every migration runs inside a single transaction that first takes
// a transaction-scoped advisory lock derived from the target schema name: two
// processes migrating at once serialize on the lock, and the second one finds
// nothing left to do. A failed migration rolls back whole, leaving the schema
// at the previous version.
//
// Tables are created unqualified in the target schema (default "retrysafe")
// through search_path, so the same files serve any schema name and tests can
// give each package its own database.
//
// A rule on one column of intents or actions is a domain (intent_name,
// intent_key, action_status, action_attempt: 013), not a table CHECK:
// PostgreSQL parses and plans a table's CHECK constraints again for every
// statement that writes the table, which every call's claim and completion
// would pay, and plans a domain's once per backend. Only the rule across
// two columns (a started action holds a lease) is a table CHECK
// (TestLedgerTablesCheckOnlyAcrossColumns).
//
// Index order is part of the schema where costs tie: on intents vacuumed
// while empty, a lookup by (tenant_id, idem_key) costs the same through the
// primary key as through the key index, and PostgreSQL keeps the newer
// index's path. The key index is the newest index on intents (014, after
// 013's type change had made both again in an order of the catalog's
// choosing; TestIntentKeyIndexIsNewest); a migration that makes an index on
// intents again must keep it so.
//
// Every key is collated "C", whatever the database's locale: the text
// columns that primary keys, unique keys, foreign keys and indexes order
// by, and a column a query compares with one of them (015 for the ledger,
// 016 for the rest; TestKeyColumnsCollateC finds any other). Byte order is
// an order no C library upgrade can change under a unique index (an index
// that misses its duplicate lets a second charge, webhook effect or reply
// in), and each B-tree comparison is a memcmp instead of a strcoll. On a
// pt_BR.UTF-8 database with 1,000,000 rows per table that took 21 % of the
// backend's instructions off a first execution, 30 % off a webhook
// effect's claim and 9 % off an Idempotency-Key's reservation, and made
// them cost what they cost on C.UTF-8 (bench/collation/run). A migration
// that adds a key column gives it COLLATE "C"; one that changes columns'
// collation keeps each table's indexes in the order they were made (016,
// TestKeyCollationRestMigration).
//
// This package imports only pgx.
package migrations
