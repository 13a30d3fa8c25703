package console

// Every statement of the console, in one file. The console's own tables
// (console_operators, console_sessions, console_audit: migration 012) are
// the console's. The ledger's (intents, actions) it reads through the
// executor (executor.ListReview, ListByKey, ListByRef, ListByReference,
// CountRecent). The others belong to other packages and are read here only
// because their owners expose no such read yet; each says whose it is, so
// that it can move there:
//
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
// and merge joins (the executor's plan settings, for the same reason).
const plansOff = `SELECT set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)`

const sessionGetSQL = `SELECT s.operator, o.tenants, s.csrf_token, s.expires_at
FROM console_sessions s JOIN console_operators o ON o.name = s.operator
WHERE s.id_hash = $1 AND s.expires_at > now() AND o.disabled_at IS NULL`

const sessionDeleteSQL = `DELETE FROM console_sessions WHERE id_hash = $1`

// --- console_audit ---

const auditInsertSQL = `INSERT INTO console_audit (tenant_id, idem_key, operator, kind, detail) VALUES ($1, $2, $3, $4, $5)`

const auditByKeySQL = `SELECT id, operator, kind, detail, created_at FROM console_audit
WHERE idem_key = $2 AND tenant_id = $1 ORDER BY created_at, id`

// auditLatestLookupSQL: the console's latest lookup of each key of the
// tenant's review queue (the keys at 1-based position n). console_audit_key_idx
// serves each.
const auditLatestLookupSQL = `SELECT u.n, l.operator, l.detail, l.created_at
FROM unnest($2::text[]) WITH ORDINALITY AS u(k, n)
CROSS JOIN LATERAL (
	SELECT operator, detail, created_at FROM console_audit c
	WHERE c.idem_key = u.k AND c.kind = 'lookup' AND c.tenant_id = $1
	ORDER BY c.created_at DESC LIMIT 1
) l`

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
