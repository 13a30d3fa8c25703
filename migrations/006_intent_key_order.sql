-- The intents' key constraint leads with the key: UNIQUE (idem_key,
-- tenant_id) instead of (tenant_id, idem_key). Both still contain tenant_id
-- (the schema can still be sharded by tenant without changing a constraint),
-- and a lookup by (tenant, key) uses it as before. What changes is that a
-- lookup by (tenant, ref, action) now has one index whose leading column it
-- matches, the primary key. With two, a plan made while intents looked empty
-- (vacuumed empty, then filling up) could take the key index on tenant_id
-- alone and filter every intent of the tenant, for as long as the plan was
-- cached (17 to 34 ms per statement in the benchmark's empty-table run).
-- The rebuild locks intents while it runs.
ALTER TABLE intents DROP CONSTRAINT intents_tenant_id_idem_key_key;
ALTER TABLE intents ADD CONSTRAINT intents_idem_key_tenant_id_key UNIQUE (idem_key, tenant_id);
