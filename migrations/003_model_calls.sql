-- The model ledger and journal.
--
-- model_calls is the ledger: one row per model call actually made, plus one
-- row per call the journal avoided (replayed = true; its tokens are what the
-- call would have cost). Nothing is ever updated, so duplicate spend can be
-- measured after the fact.
--
-- model_journal maps (tenant, source message, step) to the first recorded
-- answer. A redelivered message reads its answer from here instead of calling
-- the model again.

CREATE TABLE model_calls (
    tenant_id         text        NOT NULL,
    id                bigint      GENERATED ALWAYS AS IDENTITY,
    source_ref        text        NOT NULL, -- the inbound message id
    step              integer     NOT NULL CHECK (step >= 0),
    model             text        NOT NULL,
    prompt_tokens     integer     NOT NULL CHECK (prompt_tokens >= 0),
    completion_tokens integer     NOT NULL CHECK (completion_tokens >= 0),
    replayed          boolean     NOT NULL DEFAULT false,
    answer            jsonb,
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);

-- Measurement scans a time range and groups by (tenant, message, step):
-- the covering index lets it run from the index alone.
CREATE INDEX model_calls_measure_idx ON model_calls (created_at)
    INCLUDE (tenant_id, source_ref, step, model, prompt_tokens, completion_tokens, replayed);

CREATE TABLE model_journal (
    tenant_id  text        NOT NULL,
    source_ref text        NOT NULL,
    step       integer     NOT NULL,
    call_id    bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, source_ref, step),
    FOREIGN KEY (tenant_id, call_id) REFERENCES model_calls (tenant_id, id)
);
