package console

// Every statement of the console, in one file. The console's own tables
// (console_operators, console_sessions, console_audit: migration 012) are
// the console's. The others belong to other packages and are read here only
// because their owners expose no such read yet; each says whose it is, so
// that it can move there:
//
//	actions            executor: queueSQL, nowActionsSQL, actionByRefSQL, searchReferenceSQL
//	intents            intent:   searchRefSQL
//	processed_effects, stale_events, payment_notifications, payment_webhook_log
//	                   webhook:  effectsSQL, notificationsSQL, nowWebhookSQL
//	agent_turns, model_calls, model_journal
//	                   agent:    turnsSQL, modelCallsSQL, nowAgentSQL
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

// --- webhook's tables ---

// effectsSQL: the payment webhooks' effects on the intent's order (its
// intent_ref) or naming its provider reference, with the customer
// notification (outbox row) each owed.
const effectsSQL = `SELECT e.effect_key, e.provider, e.transition, e.order_ref, e.payment_ref, e.event_id, e.event_type,
	e.event_at, e.outcome, e.created_at,
	n.action, n.status, n.attempt, coalesce(n.error_code, ''), n.idem_key, n.sent_at
FROM processed_effects e
LEFT JOIN payment_notifications n ON n.tenant_id = e.tenant_id AND n.effect_key = e.effect_key
WHERE e.tenant_id = $1 AND (e.order_ref = $2 OR ($3 <> '' AND e.order_ref IN (
	SELECT order_ref FROM processed_effects WHERE tenant_id = $1 AND payment_ref = $3)))
ORDER BY e.created_at`

// nowWebhookSQL: duplicate deliveries the webhook absorbed.
const nowWebhookSQL = `SELECT
	count(*) FILTER (WHERE verdict = 'duplicate' AND received_at >= now() - interval '1 hour'),
	count(*) FILTER (WHERE verdict = 'duplicate')
FROM payment_webhook_log
WHERE tenant_id = $1 AND received_at >= now() - interval '1 day'`

// --- agent's tables ---

// turnsSQL: the agent turns whose tool calls carried the key, with their
// reply (the agent's outbox).
const turnsSQL = `SELECT t.message_id, t.status, t.steps, coalesce(t.reply_ref, ''), coalesce(t.reply_key, ''), t.reply_status,
	t.created_at, coalesce(tc->>'status', ''), coalesce((tc->>'replayed')::boolean, false), coalesce(jsonb_array_length(tc->'divergent'), 0)
FROM agent_turns t, jsonb_array_elements(t.tools) tc
WHERE t.tenant_id = $1 AND (tc->>'key' = $2 OR t.message_id = $3)
ORDER BY t.created_at`

// modelCallsSQL: the model calls made (or replayed) for the message that
// froze the intent. model_calls has no index on source_ref; the measure
// index on created_at bounds the read to a window around the freeze.
const modelCallsSQL = `SELECT id, step, model, prompt_tokens, completion_tokens, replayed, created_at
FROM model_calls
WHERE created_at >= $3::timestamptz - interval '1 hour' AND created_at < $3::timestamptz + interval '7 days'
	AND tenant_id = $1 AND source_ref = $2
ORDER BY created_at, id`

// nowAgentSQL: replays and divergences, as recorded for agent turns only
// (the sidecar's and the library's executions are counted by /metrics, not
// stored).
const nowAgentSQL = `SELECT
	count(*) FILTER (WHERE (tc->>'replayed')::boolean AND t.created_at >= now() - interval '1 hour'),
	count(*) FILTER (WHERE (tc->>'replayed')::boolean),
	count(*) FILTER (WHERE jsonb_array_length(coalesce(tc->'divergent', '[]')) > 0 AND t.created_at >= now() - interval '1 hour'),
	count(*) FILTER (WHERE jsonb_array_length(coalesce(tc->'divergent', '[]')) > 0)
FROM agent_turns t, jsonb_array_elements(t.tools) tc
WHERE t.tenant_id = $1 AND t.created_at >= now() - interval '1 day'`

// modelsInWindowSQL names the models in the ledger for the chart's window,
// so that a model without a configured price is priced by default and
// said so, instead of failing the page.
const modelsInWindowSQL = `SELECT DISTINCT model FROM model_calls WHERE created_at >= $1 AND created_at < $2 AND tenant_id = ANY($3)`
