-- The WhatsApp Cloud API as it is in 2026 (package agent owns these
-- tables): who sent an inbound message (phone number, business-scoped user
-- id, group), what kind of message it was, the inbound messages that were
-- recorded and not answered, and what became of each reply after it was
-- accepted (status webhooks, resends).

-- messages: the sender's identifiers as the webhook gave them. The
-- conversation id is the phone number (wa_id) when there is one, else the
-- business-scoped user id (BSUID, "US.1349..."), and "group:<group_id>" for
-- a group message, whose participant is recorded here.
ALTER TABLE messages
    ADD COLUMN kind           text NOT NULL DEFAULT 'text', -- text, button, interactive.button_reply, image, ...
    ADD COLUMN sender_wa_id   text,
    ADD COLUMN sender_user_id text,
    ADD COLUMN group_id       text;

-- Inbound messages recorded but not answered: a type the agent does not
-- read (audio, sticker, reaction, ...) or a message that is malformed.
-- Recorded once (the primary key), in the delivery's transaction, so that
-- one bad message never makes the provider redeliver the whole batch.
-- message_id is the provider's id, or "sha256:<hex of the raw message>"
-- when it has none.
CREATE TABLE inbound_ignored (
    tenant_id       text        NOT NULL,
    message_id      text        NOT NULL,
    type            text        NOT NULL, -- the message's type as sent ("audio", "interactive.nfm_reply", "?")
    reason          text        NOT NULL, -- why it was not answered (no personal data)
    phone_number_id text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, message_id),
    CHECK (tenant_id <> '' AND message_id <> '' AND length(message_id) <= 255)
);

-- agent_turns: a refusal is a turn status of its own; the reply's form
-- (free text inside the 24-hour customer-service window, the tenant's
-- approved template outside it) and its delivery as the status webhooks
-- tell it. reply_delivery merges statuses that arrive out of order: it only
-- moves forward (sent < delivered < read; read implies delivered), and a
-- failed status does not undo a delivery. 'resending' marks a reply whose
-- failed send is being retried (once, with the same key).
ALTER TABLE agent_turns DROP CONSTRAINT agent_turns_status_check;
ALTER TABLE agent_turns ADD CONSTRAINT agent_turns_status_check
    CHECK (status IN ('answered', 'tool_error', 'model_error', 'no_invoice', 'refused', 'group_refused'));
ALTER TABLE agent_turns
    ADD COLUMN reply_kind         text    NOT NULL DEFAULT 'text' CHECK (reply_kind IN ('text', 'template')),
    ADD COLUMN reply_wamid        text,
    ADD COLUMN reply_delivery     text    NOT NULL DEFAULT ''
               CHECK (reply_delivery IN ('', 'sent', 'delivered', 'read', 'failed', 'resending')),
    ADD COLUMN reply_delivered_at timestamptz,
    ADD COLUMN reply_read_at      timestamptz,
    ADD COLUMN reply_error_code   integer,
    ADD COLUMN reply_resends      integer NOT NULL DEFAULT 0 CHECK (reply_resends >= 0);

-- Status webhooks find their reply by key (biz_opaque_callback_data) or by
-- the provider's message id.
CREATE INDEX agent_turns_reply_key_idx ON agent_turns (tenant_id, reply_key) WHERE reply_key IS NOT NULL;
CREATE INDEX agent_turns_reply_wamid_idx ON agent_turns (tenant_id, reply_wamid) WHERE reply_wamid IS NOT NULL;
