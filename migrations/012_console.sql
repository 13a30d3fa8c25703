-- The operator console (server/console): who may sign in, their sessions,
-- and what they did that must be answerable for later (revealing personal
-- data, asking a provider, settling an action).
--
-- Operators are people, not tenants: their tokens are not API tokens, and
-- each is scoped to the tenants it names. Only a SHA-256 of a token or a
-- session id is stored (both are 256 random bits: a fast hash is enough, and
-- a stolen table opens nothing).

CREATE TABLE console_operators (
    name        text        PRIMARY KEY,
    token_hash  bytea       NOT NULL UNIQUE,
    tenants     text[]      NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    disabled_at timestamptz,
    CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$'),
    CHECK (length(token_hash) = 32),
    CHECK (cardinality(tenants) > 0 AND array_position(tenants, '') IS NULL)
);

-- A session lives until expires_at (the database's clock decides) or until
-- its operator signs out or is disabled. csrf_token is sent back in every
-- state-changing form.
CREATE TABLE console_sessions (
    id_hash    bytea       PRIMARY KEY,
    operator   text        NOT NULL REFERENCES console_operators ON DELETE CASCADE,
    csrf_token text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    CHECK (length(id_hash) = 32),
    CHECK (expires_at > created_at)
);

-- Expired sessions are deleted oldest first.
CREATE INDEX console_sessions_expires_idx ON console_sessions (expires_at);

-- One row per reveal, lookup and settlement. detail never holds the
-- revealed values: a reveal records which fields were shown, a lookup what
-- the provider answered (outcome, reference, its stored response), a
-- settlement the decision and its reason.
CREATE TABLE console_audit (
    tenant_id  text        NOT NULL,
    id         bigint      GENERATED ALWAYS AS IDENTITY,
    idem_key   text        NOT NULL,
    operator   text        NOT NULL,
    kind       text        NOT NULL CHECK (kind IN ('reveal', 'lookup', 'settle')),
    detail     jsonb       NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    CHECK (tenant_id <> '' AND idem_key <> '')
);

-- An action's history in the console, and its latest lookup in the queue.
CREATE INDEX console_audit_key_idx ON console_audit (idem_key, kind, created_at);
