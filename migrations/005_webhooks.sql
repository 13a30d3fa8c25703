-- Inbound payment webhooks (package webhook): the effects already decided,
-- the orders they move, the events that arrived too late, the customer
-- notifications owed (the outbox rows; the River job is inserted in the same
-- transaction), and a log of every delivery attempt.
--
-- No table here may share a name with the sandbox PSP's own tables
-- (charges, webhook_deliveries): its schema is migrated with these files too.

-- The webhook's view of an order's payment state. A row is created by the
-- first event that names the order (upsert): an event must never be lost
-- because the order was not known yet, and the order reference comes from
-- a signed event. last_event_at / last_sequence are what the ordering guard
-- compares a later event with.
CREATE TABLE orders (
    tenant_id       text        NOT NULL,
    order_ref       text        NOT NULL,
    status          text        NOT NULL CHECK (status IN ('paid', 'refunded', 'disputed')),
    last_event_at   timestamptz NOT NULL, -- the provider's creation time of the event that set status
    last_sequence   bigint,               -- its sequence number, when the provider numbers events
    last_effect_key text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, order_ref),
    CHECK (tenant_id <> '' AND order_ref <> '' AND length(order_ref) <= 255)
);

-- One row per effect, whatever the number of events that announced it. The
-- primary key decides duplicates: the handler inserts first (ON CONFLICT DO
-- NOTHING) and only the transaction whose row went in goes on, so two
-- concurrent deliveries of one effect serialize on the key.
--
-- effect_key is hex SHA-256 of (provider, transition, order_ref,
-- payment_ref): two events about one payment collapse, a second payment
-- (another payment_ref) is another effect. event_id is the first
-- announcing event, for audit only.
CREATE TABLE processed_effects (
    tenant_id   text        NOT NULL,
    effect_key  text        NOT NULL,
    provider    text        NOT NULL,
    transition  text        NOT NULL,
    order_ref   text        NOT NULL,
    payment_ref text        NOT NULL,
    event_id    text        NOT NULL,
    event_type  text        NOT NULL,
    event_at    timestamptz NOT NULL,
    sequence    bigint,
    outcome     text        NOT NULL CHECK (outcome IN ('applied', 'stale')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, effect_key),
    CHECK (tenant_id <> '' AND length(effect_key) = 64)
);

-- An order's effects, in arrival order.
CREATE INDEX processed_effects_order_idx ON processed_effects (tenant_id, order_ref, created_at);
-- Retention walks old rows first.
CREATE INDEX processed_effects_created_idx ON processed_effects (created_at);

-- Effects that changed nothing: older than the order's last event (reason
-- older) or a transition the order's status does not allow (not_allowed).
-- What the order looked like when the event was refused is kept beside it.
CREATE TABLE stale_events (
    tenant_id      text        NOT NULL,
    effect_key     text        NOT NULL,
    event_id       text        NOT NULL,
    order_ref      text        NOT NULL,
    transition     text        NOT NULL,
    reason         text        NOT NULL CHECK (reason IN ('older', 'not_allowed')),
    event_at       timestamptz NOT NULL,
    sequence       bigint,
    order_status   text        NOT NULL,
    order_event_at timestamptz NOT NULL,
    order_sequence bigint,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, effect_key),
    FOREIGN KEY (tenant_id, effect_key) REFERENCES processed_effects ON DELETE CASCADE
);

-- The customer notification an applied effect owes: the outbox row. Its
-- intent (intent_ref "<effect_key>:notify") is frozen and its River job
-- inserted in the effect's transaction; the relay executes the key and
-- records here how it ended. failed and review wait for an operator.
CREATE TABLE payment_notifications (
    tenant_id  text        NOT NULL,
    effect_key text        NOT NULL,
    order_ref  text        NOT NULL,
    action     text        NOT NULL,          -- the tool, e.g. whatsapp.send_template
    intent_ref text,                          -- NULL when nothing could be frozen
    idem_key   text,                          -- the frozen intent's key
    status     text        NOT NULL DEFAULT 'pending'
               CHECK (status IN ('pending', 'sent', 'failed', 'review')),
    attempt    integer     NOT NULL DEFAULT 0, -- the executor's attempt that settled it
    error_code text,                          -- failed / review: why (never personal data)
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz,
    PRIMARY KEY (tenant_id, effect_key),
    FOREIGN KEY (tenant_id, effect_key) REFERENCES processed_effects ON DELETE CASCADE,
    CHECK (status <> 'pending' OR idem_key IS NOT NULL),
    CHECK ((status = 'sent') = (sent_at IS NOT NULL))
);

-- Operators list what did not go out.
CREATE INDEX payment_notifications_open_idx ON payment_notifications (tenant_id, updated_at) WHERE status <> 'sent';

-- Every delivery attempt that reached a verdict, without its payload.
-- Deliveries refused for their signature (401) are not logged here: an
-- unauthenticated request must not cost a write. Refused shapes (400) from
-- an authenticated sender are logged with verdict rejected when the tenant
-- is known.
CREATE TABLE payment_webhook_log (
    tenant_id   text        NOT NULL,
    id          bigint      GENERATED ALWAYS AS IDENTITY,
    provider    text        NOT NULL,
    event_id    text,
    event_type  text,
    effect_key  text,
    verdict     text        NOT NULL CHECK (verdict IN ('processed', 'duplicate', 'stale', 'ignored', 'rejected')),
    reason      text,
    http_status smallint    NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);

-- Every attempt of one event.
CREATE INDEX payment_webhook_log_event_idx ON payment_webhook_log (tenant_id, event_id);
-- Retention walks old rows first.
CREATE INDEX payment_webhook_log_received_idx ON payment_webhook_log (received_at);
