-- Indexes that let every lookup by key use its key.
--
-- A pooled connection caches the plan of a statement it runs often, made
-- from the statistics of the moment. On tables no ANALYZE has seen yet (a
-- new deployment, a server with autovacuum off) the planner costs any index
-- that shares a column with the condition about the same, and a secondary
-- index that leads with tenant_id served "tenant_id = $1 AND message_id =
-- $2" as a scan of every message of the tenant, filtered. Secondary indexes
-- that no lookup by key needs to scope by tenant now leave tenant_id out,
-- so a lookup by primary key has nothing else to take. The statements that
-- use them still say tenant_id = $1; the index narrows, the tenant filters.
-- The rebuilds lock messages, processed_effects and conversations against
-- writes while they run (migrations run in one transaction, where CREATE
-- INDEX CONCURRENTLY cannot).

-- A conversation's history, in order (agent.MessageListConversation).
DROP INDEX messages_conversation_idx;
CREATE INDEX messages_conversation_idx ON messages (conversation_id, seq);

-- An order's effects, in arrival order (for operators; no statement of
-- retrysafe's reads it).
DROP INDEX processed_effects_order_idx;
CREATE INDEX processed_effects_order_idx ON processed_effects (order_ref, created_at);

-- A payment notification finds the customer's conversation by the invoice
-- it paid (webhook.ConversationByInvoice: tenant and invoice, newest first).
-- Without an index on invoice_ref that read every conversation of the
-- tenant, once per paid order, whatever the statistics. Only conversations
-- with something due carry an invoice_ref.
CREATE INDEX conversations_invoice_idx ON conversations (tenant_id, invoice_ref, updated_at)
    WHERE invoice_ref IS NOT NULL;
