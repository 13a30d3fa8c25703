-- The WhatsApp agent: conversations (the system context), messages (the
-- inbox, deduplicated by the provider's message id) and turns (what the
-- agent answered to each inbound message, first writer wins).
--
-- River's own tables (river_job, ...) live in the same schema; they are
-- installed by internal/riverschema, not here, so that River's bundled
-- migrations stay River's.

-- A conversation is one customer's WhatsApp thread with one tenant. Its
-- open invoice is the system context of every agent step: the intent_ref of
-- a charge comes from here, never from the model.
CREATE TABLE conversations (
    tenant_id        text        NOT NULL,
    conversation_id  text        NOT NULL, -- the customer's WhatsApp id (wa_id: digits, country code first)
    customer_id      text        NOT NULL,
    invoice_ref      text,                 -- the open invoice; NULL when nothing is due
    amount_due_cents bigint,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, conversation_id),
    CHECK (tenant_id <> '' AND conversation_id <> '' AND customer_id <> ''),
    CHECK ((invoice_ref IS NULL) = (amount_due_cents IS NULL)),
    CHECK (invoice_ref IS NULL OR invoice_ref <> ''),
    CHECK (amount_due_cents IS NULL OR amount_due_cents > 0)
);

-- One row per message, inbound (the provider's id, "wamid...") or outbound
-- (the agent's reply, "<inbound id>:reply"). The primary key is what
-- deduplicates a redelivered webhook: the receiver inserts with ON CONFLICT
-- DO NOTHING and enqueues the inbox job only when its row went in.
--
-- claim_* is the processing lease of an inbound message, on the database
-- clock: while it is live, a redelivered inbox job waits instead of calling
-- the model a second time; a worker that died leaves it to expire.
CREATE TABLE messages (
    tenant_id       text        NOT NULL,
    message_id      text        NOT NULL,
    seq             bigint      GENERATED ALWAYS AS IDENTITY, -- conversation order
    conversation_id text        NOT NULL,
    direction       text        NOT NULL CHECK (direction IN ('in', 'out')),
    body            text        NOT NULL,
    phone_number_id text        NOT NULL DEFAULT '', -- the business number it reached or left from
    sent_at         timestamptz,                     -- the provider's timestamp (inbound)
    claim_owner     text,
    claim_until     timestamptz,
    claims          integer     NOT NULL DEFAULT 0,  -- processing attempts; also the claim's fencing token
    processed_at    timestamptz,                     -- inbound: its turn is recorded
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, message_id),
    CHECK (tenant_id <> '' AND message_id <> '' AND conversation_id <> ''),
    CHECK (length(message_id) <= 255),
    CHECK ((claim_owner IS NULL) = (claim_until IS NULL))
);

-- History of a conversation, in order.
CREATE INDEX messages_conversation_idx ON messages (tenant_id, conversation_id, seq);

-- What the agent did with one inbound message. Inserted once, with ON
-- CONFLICT DO NOTHING, in the same transaction as the frozen reply intent,
-- the outbound message row and the reply (outbox) job: of two workers that
-- finished the same message, the first one's reply is the one sent.
CREATE TABLE agent_turns (
    tenant_id       text        NOT NULL,
    message_id      text        NOT NULL, -- the inbound message answered
    conversation_id text        NOT NULL,
    status          text        NOT NULL CHECK (status IN ('answered', 'tool_error', 'model_error', 'no_invoice')),
    steps           integer     NOT NULL CHECK (steps >= 0), -- model steps taken
    error_code      text,                 -- tool_error / model_error: why (no personal data)
    tools           jsonb       NOT NULL DEFAULT '[]', -- per tool call: action, status, key (never the payload)
    reply_ref       text,                 -- intent_ref of the reply
    reply_key       text,                 -- its idempotency key
    reply_status    text        NOT NULL DEFAULT 'pending'
                    CHECK (reply_status IN ('pending', 'sent', 'failed', 'review')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, message_id),
    FOREIGN KEY (tenant_id, message_id) REFERENCES messages (tenant_id, message_id)
);

-- Operators look for replies that did not go out.
CREATE INDEX agent_turns_reply_pending_idx ON agent_turns (tenant_id, updated_at) WHERE reply_status <> 'sent';
