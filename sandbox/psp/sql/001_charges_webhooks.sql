-- The sandbox Pix provider's own tables, next to idempotency_requests in
-- its schema. Keys lead with the merchant (the tenant).

CREATE TABLE charges (
    merchant_id     text        NOT NULL,
    id              text        NOT NULL,
    seq             bigint      GENERATED ALWAYS AS IDENTITY, -- newest first, even within one now()
    amount_cents    bigint      NOT NULL CHECK (amount_cents > 0),
    pix_key         text        NOT NULL,
    pix_key_type    text        NOT NULL CHECK (pix_key_type IN ('cpf', 'cnpj', 'email', 'phone', 'evp')),
    description     text        NOT NULL DEFAULT '',
    status          text        NOT NULL CHECK (status IN ('paid')),
    -- Not unique: the idempotency middleware decides duplicates, and a key
    -- whose retention ended may legitimately create a second charge.
    idempotency_key text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, id)
);

CREATE INDEX charges_key_idx ON charges (merchant_id, idempotency_key, seq DESC);
CREATE INDEX charges_newest_idx ON charges (merchant_id, seq DESC);

-- One row per event to deliver: written in the charge's transaction (so an
-- event exists exactly when its charge does), sent by a background loop.
CREATE TABLE webhook_deliveries (
    merchant_id     text        NOT NULL,
    event_id        text        NOT NULL,
    event_type      text        NOT NULL,
    url             text        NOT NULL,
    payload         text        NOT NULL, -- the exact bytes sent on every attempt
    status          text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_status     integer,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    PRIMARY KEY (merchant_id, event_id)
);

CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
