package console

// Every statement of the console, in one file: on the console's own tables
// (console_operators, console_sessions, console_audit: migration 012) only.
// The ledger's (actions, intents) are read through the executor
// (executor.ListReview, ListByKey, ListByRef, ListByReference,
// CountRecent); the webhook's and the agent's through their owners'
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
// and merge joins (the executor's plan settings, for the same reason).
const plansOff = `SELECT set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)`

const sessionGetSQL = `SELECT s.operator, o.tenants, s.csrf_token, s.expires_at
FROM console_sessions s JOIN console_operators o ON o.name = s.operator
WHERE s.id_hash = $1 AND s.expires_at > now() AND o.disabled_at IS NULL`

const sessionDeleteSQL = `DELETE FROM console_sessions WHERE id_hash = $1`

// --- console_audit ---

const auditInsertSQL = `INSERT INTO console_audit (tenant_id, idem_key, operator, kind, detail) VALUES ($1, $2, $3, $4, $5)`

// auditCountSQL counts what one operator did of one kind, every tenant: a
// scan, for tests and audits by hand, never a page.
const auditCountSQL = `SELECT count(*) FROM console_audit WHERE kind = $1 AND operator = $2`

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
