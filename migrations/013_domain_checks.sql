-- The column rules of intents and actions move from table CHECK
-- constraints to domains; the rules themselves do not change.
--
-- Why: PostgreSQL 15 rebuilds a table's CHECK constraints for every
-- statement that writes the table (ExecRelCheck: each constraint's stored
-- expression is parsed from its text form and planned again, once per
-- statement). A lone call writes intents and actions in its claim and
-- actions again in its completion, so it paid for eight constraint
-- expressions per execution: in profiles of those statements (perf), 10 %
-- of the backend's time went to ExecConstraints when pgbench sent them and
-- 20 % in a loop of them inside one backend, most of it to stringToNode. A
-- domain's constraints are parsed and planned once per backend (the type
-- cache) and only evaluated per row; with the same rules as domains, that
-- share fell to 6.5 %, what the one cross-column rule left as a table
-- CHECK costs. End to end (./scripts/bench, one caller, four runs before
-- and after, interleaved), PostgreSQL's CPU per first execution fell from
-- 578-621 to 533-578 us; the p50 against commit + tool + commit moved
-- within the runs' noise (1.04-1.27 before, 1.00-1.20 after).
--
-- The domains start without constraints so that changing the columns' types
-- rewrites nothing (a binary-compatible type; the indexes are kept, the two
-- partial indexes on status are rebuilt); the constraints are then added,
-- which checks every existing row, and the table constraints dropped.
-- status = 'started' exactly when a lease is held spans two columns: it
-- stays a table CHECK.
--
-- The migration holds an exclusive lock on intents and actions while it
-- rebuilds those two indexes and checks the rows: on 1,000,000 intents
-- with their actions (470 and 326 MB) it took 2.9 s. Run it when a pause
-- of that order per million rows is acceptable.

CREATE DOMAIN intent_name AS text;   -- tenant_id, intent_ref, action of an intent
CREATE DOMAIN intent_key AS text;    -- an intent's idem_key
CREATE DOMAIN action_status AS text;
CREATE DOMAIN action_attempt AS integer;

ALTER TABLE intents
    ALTER COLUMN tenant_id TYPE intent_name,
    ALTER COLUMN intent_ref TYPE intent_name,
    ALTER COLUMN action TYPE intent_name,
    ALTER COLUMN idem_key TYPE intent_key;
ALTER TABLE actions
    ALTER COLUMN status TYPE action_status,
    ALTER COLUMN attempt TYPE action_attempt;

ALTER DOMAIN intent_name ADD CONSTRAINT intent_name_check CHECK (VALUE <> '');
ALTER DOMAIN intent_key ADD CONSTRAINT intent_key_check CHECK (length(VALUE) BETWEEN 1 AND 255);
ALTER DOMAIN action_status ADD CONSTRAINT action_status_check
    CHECK (VALUE IN ('started', 'completed', 'failed', 'review'));
-- The attempt is also the lease's fencing token.
ALTER DOMAIN action_attempt ADD CONSTRAINT action_attempt_check CHECK (VALUE >= 1);

ALTER TABLE intents DROP CONSTRAINT intents_check, DROP CONSTRAINT intents_idem_key_check;
ALTER TABLE actions DROP CONSTRAINT actions_status_check, DROP CONSTRAINT actions_attempt_check;
