-- Every other key of the schema takes the "C" collation too, as the
-- ledger's did in 015: the columns of each table's primary key, unique
-- keys, foreign keys and indexes on text (tenant, operation, key, message,
-- effect, order, payment and event identifiers, operator names), and a
-- column a query compares with one of them (orders.last_effect_key with
-- processed_effects.effect_key).
--
-- Why: these are the keys that deduplicate. The Idempotency-Key
-- middleware's primary key (idempotency_requests) stops a user's route
-- from running twice; processed_effects' stops a payment webhook's effect
-- from applying twice; messages', inbound_ignored's and agent_turns' stop
-- an inbound WhatsApp message from being answered twice. Under a libc
-- collation their order is the operating system's locale data: a C
-- library upgrade that changes it silently corrupts them, and a unique
-- index that misses its duplicate is a second effect. And every B-tree
-- comparison goes through strcoll. On a database made with pt_BR.UTF-8,
-- 1,000,000 rows per table, backend instructions per statement
-- (bench/collation/run, callgrind, three rounds): a payment webhook's
-- effect claim 453k-466k with every key under the locale, 310k-321k with
-- every key "C"; an Idempotency-Key's reservation 400k-405k, 361k-367k; a
-- first execution's claim and completion (015's keys) 828k-857k,
-- 667k-694k. On C.UTF-8: 351k-355k, 309k-316k; 368k-378k, 357k-367k;
-- 704k-711k, 668k-691k (docs/benchmarks.md, 2026-12-03).
--
-- The types do not change, so no table is rewritten. Every index on a
-- changed column, and every index its table got after it, is built again
-- (a scan of the table each), in the order the table's indexes were first
-- made (TestKeyCollationRestMigration): ALTER COLUMN ... TYPE rebuilds the
-- indexes on a column in an order the catalog decides, and where two
-- indexes' costs tie the planner keeps the newer one's path (see 014). So
-- the indexes that are not a constraint's are dropped first and made again
-- after the columns change, in their first order, and the one unique
-- constraint that does not involve a changed column (console_operators'
-- token_hash) is made again after its table's primary key.
--
-- Like every migration this runs in one transaction, with an exclusive
-- lock on each table from its change to the end: the tables take no reads
-- or writes while their indexes are built. With 1,000,000 rows each in
-- processed_effects, payment_notifications and idempotency_requests it
-- took 13.6 s (`retrysafe migrate` through `go run`, its build included;
-- the shared test server, 2026-12-03).

DROP INDEX idempotency_requests_expires_idx, model_calls_measure_idx, conversations_invoice_idx,
    messages_conversation_idx, agent_turns_reply_pending_idx, agent_turns_reply_key_idx,
    agent_turns_reply_wamid_idx, processed_effects_created_idx, processed_effects_order_idx,
    processed_effects_payment_idx, processed_effects_charge_idx, payment_notifications_open_idx,
    payment_webhook_log_event_idx, payment_webhook_log_received_idx, console_audit_key_idx;

ALTER TABLE idempotency_requests
    ALTER COLUMN tenant_id TYPE text COLLATE "C",
    ALTER COLUMN operation TYPE text COLLATE "C",
    ALTER COLUMN idem_key TYPE text COLLATE "C";
CREATE INDEX idempotency_requests_expires_idx ON idempotency_requests (expires_at);

ALTER TABLE model_calls ALTER COLUMN tenant_id TYPE text COLLATE "C";
CREATE INDEX model_calls_measure_idx ON model_calls (created_at)
    INCLUDE (tenant_id, source_ref, step, model, prompt_tokens, completion_tokens, replayed);
ALTER TABLE model_journal
    ALTER COLUMN tenant_id TYPE text COLLATE "C",
    ALTER COLUMN source_ref TYPE text COLLATE "C";

ALTER TABLE conversations
    ALTER COLUMN tenant_id TYPE text COLLATE "C",
    ALTER COLUMN conversation_id TYPE text COLLATE "C",
    ALTER COLUMN invoice_ref TYPE text COLLATE "C";
CREATE INDEX conversations_invoice_idx ON conversations (tenant_id, invoice_ref, updated_at)
    WHERE invoice_ref IS NOT NULL;
ALTER TABLE messages
    ALTER COLUMN tenant_id TYPE text COLLATE "C",
    ALTER COLUMN message_id TYPE text COLLATE "C",
    ALTER COLUMN conversation_id TYPE text COLLATE "C";
CREATE INDEX messages_conversation_idx ON messages (conversation_id, seq);
ALTER TABLE agent_turns
    ALTER COLUMN tenant_id TYPE text COLLATE "C",
    ALTER COLUMN message_id TYPE text COLLATE "C",
    ALTER COLUMN reply_key TYPE text COLLATE "C",
    ALTER COLUMN reply_wamid TYPE text COLLATE "C";
CREATE INDEX agent_turns_reply_pending_idx ON agent_turns (tenant_id, updated_at) WHERE reply_status <> 'sent';
CREATE INDEX agent_turns_reply_key_idx ON agent_turns (tenant_id, reply_key) WHERE reply_key IS NOT NULL;
CREATE INDEX agent_turns_reply_wamid_idx ON agent_turns (tenant_id, reply_wamid) WHERE reply_wamid IS NOT NULL;
ALTER TABLE inbound_ignored
    ALTER COLUMN tenant_id TYPE text COLLATE "C",
    ALTER COLUMN message_id TYPE text COLLATE "C";

ALTER TABLE orders
    ALTER COLUMN tenant_id TYPE text COLLATE "C",
    ALTER COLUMN order_ref TYPE text COLLATE "C",
    ALTER COLUMN last_effect_key TYPE text COLLATE "C";
ALTER TABLE processed_effects
    ALTER COLUMN tenant_id TYPE text COLLATE "C",
    ALTER COLUMN effect_key TYPE text COLLATE "C",
    ALTER COLUMN order_ref TYPE text COLLATE "C",
    ALTER COLUMN payment_ref TYPE text COLLATE "C",
    ALTER COLUMN charge_ref TYPE text COLLATE "C";
CREATE INDEX processed_effects_created_idx ON processed_effects (created_at);
CREATE INDEX processed_effects_order_idx ON processed_effects (order_ref, created_at);
CREATE INDEX processed_effects_payment_idx ON processed_effects (payment_ref);
CREATE INDEX processed_effects_charge_idx ON processed_effects (charge_ref) WHERE charge_ref IS NOT NULL;
ALTER TABLE stale_events
    ALTER COLUMN tenant_id TYPE text COLLATE "C",
    ALTER COLUMN effect_key TYPE text COLLATE "C";
ALTER TABLE payment_notifications
    ALTER COLUMN tenant_id TYPE text COLLATE "C",
    ALTER COLUMN effect_key TYPE text COLLATE "C";
CREATE INDEX payment_notifications_open_idx ON payment_notifications (tenant_id, updated_at) WHERE status <> 'sent';
ALTER TABLE payment_webhook_log
    ALTER COLUMN tenant_id TYPE text COLLATE "C",
    ALTER COLUMN event_id TYPE text COLLATE "C";
CREATE INDEX payment_webhook_log_event_idx ON payment_webhook_log (tenant_id, event_id);
CREATE INDEX payment_webhook_log_received_idx ON payment_webhook_log (received_at);

ALTER TABLE console_operators
    ALTER COLUMN name TYPE text COLLATE "C",
    DROP CONSTRAINT console_operators_token_hash_key;
ALTER TABLE console_operators ADD CONSTRAINT console_operators_token_hash_key UNIQUE (token_hash);
ALTER TABLE console_sessions ALTER COLUMN operator TYPE text COLLATE "C";
ALTER TABLE console_audit
    ALTER COLUMN tenant_id TYPE text COLLATE "C",
    ALTER COLUMN idem_key TYPE text COLLATE "C",
    ALTER COLUMN kind TYPE text COLLATE "C";
CREATE INDEX console_audit_key_idx ON console_audit (idem_key, kind, created_at);
