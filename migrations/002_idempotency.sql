-- Idempotency-Key records of the middleware (package idempotency, which
-- alone reads and writes this table).
--
-- One row per (tenant, operation, key). The primary key is what decides a
-- race between duplicates: the middleware inserts, never selects first.
-- In transactional mode a row only becomes visible already 'done', committed
-- with the handler's own writes; in reservation mode it is committed
-- 'running' with a lease before the handler runs, and completed afterwards.

CREATE TABLE idempotency_requests (
    tenant_id        text        NOT NULL,
    operation        text        NOT NULL,
    idem_key         text        NOT NULL,
    fingerprint      bytea       NOT NULL, -- sha256 of method, path, canonical body
    status           text        NOT NULL CHECK (status IN ('running', 'done')),
    attempt          integer     NOT NULL DEFAULT 1 CHECK (attempt >= 1), -- fencing token
    lease_until      timestamptz,          -- running only: after it, the next request takes over
    response_status  smallint,
    response_headers jsonb,
    response_body    bytea,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    expires_at       timestamptz NOT NULL, -- retention: the purge deletes the row after it
    PRIMARY KEY (tenant_id, operation, idem_key),
    CHECK (tenant_id <> '' AND operation <> ''),
    CHECK (length(idem_key) BETWEEN 1 AND 255),
    CHECK ((status = 'running') = (lease_until IS NOT NULL)),
    CHECK ((status = 'done') = (response_status IS NOT NULL)),
    CHECK (lease_until IS NULL OR expires_at >= lease_until)
);

-- The purge walks expired rows oldest first in small batches.
CREATE INDEX idempotency_requests_expires_idx ON idempotency_requests (expires_at);
