package intent

// SQL of the intent store, in one place. Every statement is scoped by
// tenant_id. Names are noun+verb.

// intentColumns is what every intent read returns, in scanIntent's order.
const intentColumns = `tenant_id, intent_ref, action, rules_version, payload, idem_key,
	coalesce(source_ref, ''), revision, created_at, updated_at`

// SyncCommitOn is a select-list expression that makes the transaction it
// runs in wait for its commit's WAL flush (and, with synchronous standbys,
// their flush), whatever the server, database, role or session set:
// set_config(..., true) holds for the current transaction only, so nothing
// leaks into a pooled session. remote_apply, stronger still, is kept. Every
// transaction that freezes an intent or claims an action runs it: once a
// provider has seen a key, the intent and the claim under it must survive a
// crash, or a redelivery could freeze a new extraction under a new key.
const SyncCommitOn = `set_config('synchronous_commit',
	CASE current_setting('synchronous_commit') WHEN 'remote_apply' THEN 'remote_apply' ELSE 'on' END, true)`

// IntentDurable opens every batch or transaction of the intent store that
// writes: one more statement in the same round trip (see SyncCommitOn).
const IntentDurable = `SELECT ` + SyncCommitOn

// IntentFreeze inserts a first extraction. ON CONFLICT without a target also
// absorbs a clash on (tenant_id, idem_key): another ref froze the same key,
// which the read-back reports as ErrKeyInUse.
const IntentFreeze = `INSERT INTO intents
	(tenant_id, intent_ref, action, rules_version, payload, idem_key, source_ref)
VALUES ($1, $2, $3, $4, $5::jsonb, $6, nullif($7, ''))
ON CONFLICT DO NOTHING`

// IntentFreezeMany is IntentFreeze for a group of extractions, as parallel
// arrays (tenant, ref, action, version, payload, key, source ref). A ref
// queued twice is inserted once: the second row conflicts with the first.
// RETURNING names what this statement inserted.
const IntentFreezeMany = FreezeManyInsert + `
RETURNING tenant_id, intent_ref, action`

// FreezeManyInsert is the insert of IntentFreezeMany without its
// RETURNING, for a statement of another package that freezes extractions
// as part of its own (a data-modifying CTE); FreezeManyArgs gives its
// seven parameters, $1 to $7.
const FreezeManyInsert = `INSERT INTO intents
	(tenant_id, intent_ref, action, rules_version, payload, idem_key, source_ref)
SELECT u.t, u.r, u.a, u.v::smallint, u.p::jsonb, u.k, nullif(u.s, '')
FROM unnest($1::text[], $2::text[], $3::text[], $4::int4[], $5::text[], $6::text[], $7::text[]) AS u(t, r, a, v, p, k, s)
ON CONFLICT DO NOTHING`

// IntentGetMany is IntentGet for a group: each row is preceded by the
// 1-based position of its (tenant, ref, action) in the arrays. OFFSET 0
// keeps the lateral subquery from being flattened into a join, whose
// generic plan, prepared on an empty table, could scan it: a primary-key
// lookup per position, whatever the statistics.
const IntentGetMany = `SELECT u.n, i.*
FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS u(t, r, a, n)
CROSS JOIN LATERAL (
	SELECT ` + intentColumns + ` FROM intents WHERE tenant_id = u.t AND intent_ref = u.r AND action = u.a
	OFFSET 0) i`

// IntentGet reads one intent. After IntentFreeze it must be a separate
// statement (a fresh READ COMMITTED snapshot), never a CTE around the insert.
const IntentGet = `SELECT ` + intentColumns + `
FROM intents WHERE tenant_id = $1 AND intent_ref = $2 AND action = $3`

// IntentGetByKey reads the tenant's intent frozen under a key.
const IntentGetByKey = `SELECT ` + intentColumns + `
FROM intents WHERE tenant_id = $1 AND idem_key = $2`

// IntentLock reads and locks an intent for Amend.
const IntentLock = IntentGet + ` FOR UPDATE`

// IntentAmend writes the new payload and key.
const IntentAmend = `UPDATE intents
SET rules_version = $4, payload = $5::jsonb, idem_key = $6, revision = revision + 1, updated_at = now()
WHERE tenant_id = $1 AND intent_ref = $2 AND action = $3
RETURNING ` + intentColumns

// IntentRevisionInsert records the replaced payload and key.
const IntentRevisionInsert = `INSERT INTO intent_revisions
	(tenant_id, intent_ref, action, revision, old_rules_version, old_payload, old_key, new_key, reason, amended_by, overrode)
VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, nullif($11, ''))`

// IntentRevisionList lists an intent's amendments.
const IntentRevisionList = `SELECT revision, old_rules_version, old_payload, old_key, new_key, reason, amended_by, coalesce(overrode, ''), created_at
FROM intent_revisions WHERE tenant_id = $1 AND intent_ref = $2 AND action = $3
ORDER BY revision`

// ActionTombstoneInsert blocks the old key of an amended intent: a claim
// racing the amendment either conflicts with this row or is seen by
// ActionStatusGet. It never overwrites an existing action.
const ActionTombstoneInsert = `INSERT INTO actions
	(tenant_id, idem_key, intent_ref, action, status, attempt, error, finished_at)
VALUES ($1, $2, $3, $4, 'failed', 1, $5::jsonb, now())
ON CONFLICT DO NOTHING`

// ActionStatusGet reads the status of the action under a key.
const ActionStatusGet = `SELECT status FROM actions WHERE tenant_id = $1 AND idem_key = $2`

// ActionTombstoneDelete lifts a tombstone when an amendment returns to a
// key that an earlier amendment superseded.
const ActionTombstoneDelete = `DELETE FROM actions
WHERE tenant_id = $1 AND idem_key = $2 AND status = 'failed' AND error->>'class' = '` + SupersededClass + `'`
