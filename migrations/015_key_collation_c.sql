-- The key columns of intents, intent_revisions and actions (tenant,
-- intent ref, action, key) take the "C" collation: byte order.
--
-- Why: they are identifiers, compared for equality and ordered only to
-- find them again, and every claim descends three B-trees over them (the
-- intents' primary key and key index, the actions' primary key), each
-- twice (ON CONFLICT's check, then the insert). Under any other collation
-- (the databases' default here is libc's C.UTF-8, which PostgreSQL 15
-- does not treat as C) each comparison goes through strcoll; under "C" it
-- is a memcmp. The indexes' order then also no longer depends on the
-- operating system's locale data: an upgrade of the C library that changes
-- a collation silently corrupts indexes ordered by it, and a unique key
-- that misses its duplicate is a second charge.
--
-- The types do not change, so no table is rewritten
-- (TestKeyCollationMigration); the indexes on these columns are rebuilt,
-- under an exclusive lock on the three tables, and the rows are not
-- checked again. The rebuild makes the intents' two indexes anew in an
-- order the catalog decides: the key index is made once more at the end
-- when it did not come out newest (see 014).
--
-- On 1,000,000 intents and their actions (397 and 309 MB) it took 3.4 and
-- 4.1 s, the three tables locked throughout (the shared test server,
-- 2026-12-03, two runs rolled back).

ALTER TABLE intents
    ALTER COLUMN tenant_id TYPE intent_name COLLATE "C",
    ALTER COLUMN intent_ref TYPE intent_name COLLATE "C",
    ALTER COLUMN action TYPE intent_name COLLATE "C",
    ALTER COLUMN idem_key TYPE intent_key COLLATE "C";
ALTER TABLE intent_revisions
    ALTER COLUMN tenant_id TYPE text COLLATE "C",
    ALTER COLUMN intent_ref TYPE text COLLATE "C",
    ALTER COLUMN action TYPE text COLLATE "C";
ALTER TABLE actions
    ALTER COLUMN tenant_id TYPE text COLLATE "C",
    ALTER COLUMN idem_key TYPE text COLLATE "C",
    ALTER COLUMN intent_ref TYPE text COLLATE "C",
    ALTER COLUMN action TYPE text COLLATE "C";

DO $$
BEGIN
    IF (SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = 'intents'::regclass ORDER BY c.oid DESC LIMIT 1) <> 'intents_idem_key_tenant_id_key' THEN
        CREATE UNIQUE INDEX intents_idem_key_tenant_id_key_015 ON intents (idem_key, tenant_id);
        ALTER TABLE intents
            DROP CONSTRAINT intents_idem_key_tenant_id_key,
            ADD CONSTRAINT intents_idem_key_tenant_id_key UNIQUE USING INDEX intents_idem_key_tenant_id_key_015;
    END IF;
END
$$;
