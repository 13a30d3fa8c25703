-- Frozen intents and the actions executed for them.
-- Every primary and unique key leads with tenant_id: reads are always scoped
-- by tenant, and the schema can be sharded by tenant without changing a
-- constraint.

CREATE TABLE intents (
    tenant_id     text        NOT NULL,
    intent_ref    text        NOT NULL,
    action        text        NOT NULL,
    rules_version smallint    NOT NULL,
    payload       jsonb       NOT NULL, -- normalized fields only
    idem_key      text        NOT NULL, -- versioned HMAC of the canonical bytes
    source_ref    text,                 -- transport id that froze it: audit only, never in the key
    revision      integer     NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, intent_ref, action),
    UNIQUE (tenant_id, idem_key),
    CHECK (tenant_id <> '' AND intent_ref <> '' AND action <> ''),
    CHECK (length(idem_key) BETWEEN 1 AND 255)
);

CREATE TABLE intent_revisions (
    tenant_id         text        NOT NULL,
    intent_ref        text        NOT NULL,
    action            text        NOT NULL,
    revision          integer     NOT NULL, -- the revision this amendment replaced
    old_rules_version smallint    NOT NULL,
    old_payload       jsonb       NOT NULL,
    old_key           text        NOT NULL,
    new_key           text        NOT NULL,
    reason            text        NOT NULL CHECK (reason <> ''),
    amended_by        text        NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, intent_ref, action, revision),
    FOREIGN KEY (tenant_id, intent_ref, action) REFERENCES intents ON DELETE CASCADE
);

CREATE TABLE actions (
    tenant_id    text        NOT NULL,
    idem_key     text        NOT NULL,
    intent_ref   text        NOT NULL,
    action       text        NOT NULL,
    status       text        NOT NULL CHECK (status IN ('started', 'completed', 'failed', 'review')),
    attempt      integer     NOT NULL DEFAULT 1 CHECK (attempt >= 1), -- also the fencing token
    lease_owner  text,
    lease_until  timestamptz,
    response     jsonb,
    error        jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    PRIMARY KEY (tenant_id, idem_key),
    CHECK ((status = 'started') = (lease_until IS NOT NULL))
);

-- The reconciler's scan: only unfinished rows, ordered by lease expiry.
CREATE INDEX actions_started_lease_idx ON actions (lease_until) WHERE status = 'started';
-- Operators list what waits for a human.
CREATE INDEX actions_review_idx ON actions (tenant_id, updated_at) WHERE status = 'review';
