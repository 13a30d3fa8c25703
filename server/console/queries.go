package console

// Every statement of the console, in one file. The console's own tables
// (console_operators, console_sessions, console_audit: migration 012) are
// the console's. The others belong to other packages and are read here only
// because their owners expose no such read yet; each says whose it is, so
// that it can move there:
//
//	actions            executor: queueSQL, nowActionsSQL, actionByRefSQL, searchReferenceSQL
//	intents            intent:   searchRefSQL
//
// The webhook's and the agent's tables are read through their owners'
// functions (webhook.EffectsOfOrder, webhook.CountDuplicates,
// agent.TurnsOfKey, agent.ModelCallsOf, agent.CountTools,
// agent.LedgerModels, agent.Ledger).
//
// Every read is scoped by tenant: a statement over several tenants takes the
// signed-in operator's list, never one from the request.

// --- console_operators / console_sessions ---

const operatorInsertSQL = `INSERT INTO console_operators (name, token_hash, tenants) VALUES ($1, $2, $3)`

const operatorRotateSQL = `UPDATE console_operators SET token_hash = $2, tenants = $3, disabled_at = NULL WHERE name = $1`

const operatorDisableSQL = `WITH d AS (
	UPDATE console_operators SET disabled_at = now() WHERE name = $1 AND disabled_at IS NULL RETURNING name
)
DELETE FROM console_sessions WHERE operator IN (SELECT name FROM d)`

const operatorExistsSQL = `SELECT EXISTS (SELECT 1 FROM console_operators WHERE name = $1 AND disabled_at IS NULL)`

const operatorListSQL = `SELECT name, tenants, created_at, disabled_at FROM console_operators ORDER BY name`

const operatorByTokenSQL = `SELECT name, tenants FROM console_operators WHERE token_hash = $1 AND disabled_at IS NULL`

const sessionInsertSQL = `INSERT INTO console_sessions (id_hash, operator, csrf_token, expires_at)
VALUES ($1, $2, $3, now() + make_interval(secs => $4))
RETURNING expires_at`

// sessionPurgeSQL deletes a few expired sessions, oldest first: each
// sign-in runs it, which keeps the table small without a purge job. It
// runs after plansOff, so that the plan cached on a new table walks
// console_sessions_expires_idx instead of the table.
const sessionPurgeSQL = `DELETE FROM console_sessions WHERE id_hash IN (
	SELECT id_hash FROM console_sessions WHERE expires_at <= now() ORDER BY expires_at LIMIT 100)`

// plansOff keeps a statement's transaction off sequential scans and hash
// and merge joins (the executor's GroupPlans, for the same reason).
const plansOff = `SELECT set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)`

const sessionGetSQL = `SELECT s.operator, o.tenants, s.csrf_token, s.expires_at
FROM console_sessions s JOIN console_operators o ON o.name = s.operator
WHERE s.id_hash = $1 AND s.expires_at > now() AND o.disabled_at IS NULL`

const sessionDeleteSQL = `DELETE FROM console_sessions WHERE id_hash = $1`

// --- console_audit ---

const auditInsertSQL = `INSERT INTO console_audit (tenant_id, idem_key, operator, kind, detail) VALUES ($1, $2, $3, $4, $5)`

const auditByKeySQL = `SELECT id, operator, kind, detail, created_at FROM console_audit
WHERE idem_key = $2 AND tenant_id = $1 ORDER BY created_at, id`

// --- actions (executor) ---

// queueSQL: the tenant's actions in review, oldest first, each with the
// console's latest lookup of its key. actions_review_idx serves the order.
const queueSQL = `SELECT a.tenant_id, a.idem_key, a.intent_ref, a.action, a.attempt, a.error, a.created_at, a.updated_at,
	extract(epoch FROM now() - a.updated_at)::float8,
	l.operator, l.detail, l.created_at
FROM actions a
LEFT JOIN LATERAL (
	SELECT operator, detail, created_at FROM console_audit c
	WHERE c.idem_key = a.idem_key AND c.kind = 'lookup' AND c.tenant_id = a.tenant_id
	ORDER BY c.created_at DESC LIMIT 1
) l ON true
WHERE a.tenant_id = $1 AND a.status = 'review'
ORDER BY a.updated_at, a.idem_key
LIMIT $2`

// actionByRefSQL finds the actions frozen under an intent_ref, for search.
// The action's status is a scalar subquery, which the planner does not
// flatten into a join: each intent's action is one primary-key lookup.
const actionByRefSQL = `SELECT i.intent_ref, i.action, i.idem_key,
	coalesce((SELECT a.status FROM actions a WHERE a.tenant_id = i.tenant_id AND a.idem_key = i.idem_key), ''), i.created_at
FROM intents i
WHERE i.tenant_id = $1 AND i.intent_ref = $2
ORDER BY i.action`

// searchKeySQL finds an action by key, current or amended away (the
// tombstone keeps the intent_ref).
const searchKeySQL = `SELECT intent_ref, action, idem_key, status, created_at FROM actions
WHERE tenant_id = $1 AND idem_key = $2`

// searchReferenceSQL finds actions by the provider's reference in their
// stored response (a charge id, a txid). No index serves it: it reads the
// tenant's actions through the primary key's tenant prefix, newest first,
// and is bounded. The executor should own it, with an expression index.
const searchReferenceSQL = `SELECT intent_ref, action, idem_key, status, created_at FROM actions
WHERE tenant_id = $1 AND (response->>'id' = $2 OR response->>'txid' = $2 OR response->>'end_to_end_id' = $2)
ORDER BY created_at DESC LIMIT 20`

// nowActionsSQL counts what the actions table records over the last hour
// and day. No index on created_at: it reads the tenant's rows, which is
// fine for an operator's page and not for a dashboard refreshing every
// second. The executor should own it.
const nowActionsSQL = `SELECT
	count(*) FILTER (WHERE created_at >= now() - interval '1 hour'),
	count(*) FILTER (WHERE created_at >= now() - interval '1 day'),
	count(*) FILTER (WHERE status = 'completed' AND finished_at >= now() - interval '1 hour'),
	count(*) FILTER (WHERE status = 'completed' AND finished_at >= now() - interval '1 day'),
	count(*) FILTER (WHERE status = 'failed' AND finished_at >= now() - interval '1 hour'),
	count(*) FILTER (WHERE status = 'failed' AND finished_at >= now() - interval '1 day'),
	count(*) FILTER (WHERE attempt > 1 AND updated_at >= now() - interval '1 hour'),
	count(*) FILTER (WHERE attempt > 1 AND updated_at >= now() - interval '1 day'),
	count(*) FILTER (WHERE status = 'review' AND updated_at >= now() - interval '1 hour'),
	count(*) FILTER (WHERE status = 'review' AND updated_at >= now() - interval '1 day'),
	count(*) FILTER (WHERE status = 'review'),
	count(*) FILTER (WHERE error ? 'resolution' AND finished_at >= now() - interval '1 hour'),
	count(*) FILTER (WHERE error ? 'resolution' AND finished_at >= now() - interval '1 day')
FROM actions
WHERE tenant_id = $1 AND (updated_at >= now() - interval '1 day' OR status = 'review')`
