package executor

import "github.com/retrysafe/retrysafe/intent"

// SQL of the executor, in one place. Every statement is scoped by tenant_id;
// every lease time comes from the database's clock, never a worker's: a new
// lease_until is clock_timestamp() + lease, so that time a statement spent
// waiting on a lock is not taken from the lease, and expiry is tested against
// now() (the statement's transaction start: the conservative side). Durations
// are passed as microseconds ($n::bigint * interval '1 microsecond').

// actionColumns is what every action read returns, in scanAction's order.
const actionColumns = `tenant_id, idem_key, intent_ref, action, status, attempt,
	coalesce(lease_owner, ''), lease_until, coalesce(lease_until <= now(), false),
	coalesce(extract(epoch FROM lease_until - now()), 0)::float8,
	response, error, created_at, updated_at, finished_at`

// ActionClaim inserts the started row for an intent's frozen key, reading
// the key from intents in this statement (never from the caller's
// derivation: the first frozen key wins). It returns a row only when this
// call claimed.
const ActionClaim = `INSERT INTO actions
	(tenant_id, idem_key, intent_ref, action, status, attempt, lease_owner, lease_until)
SELECT tenant_id, idem_key, intent_ref, action, 'started', 1, $4, clock_timestamp() + $5::bigint * interval '1 microsecond'
FROM intents WHERE tenant_id = $1 AND intent_ref = $2 AND action = $3
ON CONFLICT DO NOTHING
RETURNING idem_key, attempt`

// ActionGetForIntent reads the action under an intent's current key. Queued
// after ActionClaim as its own statement, so it sees a row a concurrent
// claimer committed while the claim waited.
//
// The key comes from a scalar subquery, not a join: both lookups are then
// full primary-key equalities, whatever the statistics. A join let the
// generic plan of a statement prepared while the tables were small probe
// actions_pkey on tenant_id alone and filter every action of the tenant
// (thousands of buffers per call once the table grew).
const ActionGetForIntent = `SELECT ` + prefixed + `
FROM actions a
WHERE a.tenant_id = $1 AND a.idem_key = (
	SELECT i.idem_key FROM intents i WHERE i.tenant_id = $1 AND i.intent_ref = $2 AND i.action = $3)`

// GroupPlans opens every batch of the hot path (claims, lookups and
// completions, grouped or alone), for that batch's transaction only: no
// sequential scans, no hash or merge joins, so that the only plans left are
// index lookups. Prepared while a table looked empty (vacuumed empty, then
// filling up), statements got sequential scans, which the plan cache kept
// as the table grew: 7 ms per group statement in the benchmark's
// empty-table run, and a generic plan of a single-row lookup made on a
// vacuumed empty table scans the whole table for as long as the connection
// lives, or until an ANALYZE of the table (autovacuum's or by hand)
// invalidates it.
// Since these statements only ever run after this one, their cached plans
// are always made under it. It costs one statement per batch; a batch of
// one call measured the same with it and without, within noise. The
// failure paths' one-offs (takeover, retake, release, heartbeat) and the
// reconciler's take run under it too (Executor.planned).
//
// The group statements' plans are not forced generic: PostgreSQL keeps
// planning them for the arrays at hand, which costs CPU (a forced generic
// plan took about 17 % less PostgreSQL time per replay at 8 callers) but
// keeps every plan true to the tables as they are, where a generic plan
// would be made once for a table as it looked at its first use.
//
// It also makes the batch's transaction commit synchronously
// (intent.SyncCommitOn), whatever the server, database, role or session
// says: a claim, a takeover, a retake, the reconciler's take and every
// failure or review outcome wait for their WAL flush even under
// ALTER DATABASE ... SET synchronous_commit = off. The asynchronous
// completions turn it off again for their own transaction, later in the
// batch (ActionCompleteAsync). Being part of a statement every batch sends
// anyway, it costs no statement and no round trip.
const GroupPlans = `SELECT set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', true),
	set_config('enable_mergejoin', 'off', true), ` + intent.SyncCommitOn

// IntentActionClaimNewMany is the first executions' claims group: one
// statement that freezes the extractions (intent.FreezeManyInsert, $1 to
// $7) and claims an action for each intent it inserted, returning, for
// each inserted intent, the claimed attempt (0 when the action could not be
// claimed), its tenant, ref, action and key, and its created_at: the rest
// of the row is what the call with that key sent (intent.Store.InsertedAt),
// so it does not come back. Nothing else is read: an extraction whose
// intent was already there returns nothing, and goes on to the
// freeze-and-claim statements, which read what others committed (see
// Executor.fresh).
const IntentActionClaimNewMany = `WITH ins AS (
` + intent.FreezeManyInsert + `
	RETURNING tenant_id, intent_ref, action, idem_key, created_at
), cl AS (
	INSERT INTO actions (tenant_id, idem_key, intent_ref, action, status, attempt, lease_owner, lease_until)
	SELECT tenant_id, idem_key, intent_ref, action, 'started', 1, $8, clock_timestamp() + $9::bigint * interval '1 microsecond'
	FROM ins
	ON CONFLICT DO NOTHING
	RETURNING tenant_id, idem_key, attempt
)
SELECT coalesce(cl.attempt, 0), ins.tenant_id, ins.intent_ref, ins.action, ins.idem_key, ins.created_at
FROM ins LEFT JOIN cl ON cl.tenant_id = ins.tenant_id AND cl.idem_key = ins.idem_key`

// ActionClaimMany is ActionClaim for a claims group, as parallel arrays of
// (tenant, ref, action). An intent queued twice is claimed once.
const ActionClaimMany = `INSERT INTO actions
	(tenant_id, idem_key, intent_ref, action, status, attempt, lease_owner, lease_until)
SELECT i.tenant_id, i.idem_key, i.intent_ref, i.action, 'started', 1, $4, clock_timestamp() + $5::bigint * interval '1 microsecond'
FROM unnest($1::text[], $2::text[], $3::text[]) AS u(t, r, a)
CROSS JOIN LATERAL (
	SELECT tenant_id, idem_key, intent_ref, action FROM intents
	WHERE tenant_id = u.t AND intent_ref = u.r AND action = u.a OFFSET 0) i
ON CONFLICT DO NOTHING
RETURNING tenant_id, intent_ref, action, idem_key, attempt`

// ActionGetForIntentMany is ActionGetForIntent for a claims group: each row
// is preceded by the 1-based position of its intent in the arrays.
//
// The group statements' lateral subqueries end in OFFSET 0, which keeps the
// planner from flattening them into joins: flattened, the generic plan of a
// statement prepared while the tables were empty hashed a sequential scan of
// actions (milliseconds per call once the table grew). Kept apart, each is a
// primary-key lookup per array element, whatever the statistics.
const ActionGetForIntentMany = `SELECT u.n, x.*
FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS u(t, r, a, n)
CROSS JOIN LATERAL (
	SELECT ` + prefixed + `
	FROM actions a
	WHERE a.tenant_id = u.t AND a.idem_key = (
		SELECT i.idem_key FROM intents i WHERE i.tenant_id = u.t AND i.intent_ref = u.r AND i.action = u.a)
	OFFSET 0) x`

// IntentActionGetMany is the read-first lookup of replays (see
// Executor.lookups): for each (tenant, ref, action) in the arrays that has
// an intent and an action under its current key, the 1-based position, the
// intent (intent.Columns) and the action. One statement, reading only: a
// redelivery of a settled intent needs nothing else, where the freeze and
// claim are four statements whose inserts can only conflict.
const IntentActionGetMany = `SELECT u.n, i.*, x.*
FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS u(t, r, a, n)
CROSS JOIN LATERAL (
	SELECT ` + intent.Columns + ` FROM intents WHERE tenant_id = u.t AND intent_ref = u.r AND action = u.a
	OFFSET 0) i
CROSS JOIN LATERAL (
	SELECT ` + prefixed + ` FROM actions a WHERE a.tenant_id = u.t AND a.idem_key = i.idem_key
	OFFSET 0) x`

// IntentActionGet is IntentActionGetMany for a single call, with scalar
// parameters: two primary-key lookups, which a group of one would
// otherwise pay array planning for. Its leading 1 stands for the position.
const IntentActionGet = `SELECT 1::int8, i.*, x.*
FROM (SELECT ` + intent.Columns + ` FROM intents WHERE tenant_id = $1 AND intent_ref = $2 AND action = $3) i
CROSS JOIN LATERAL (
	SELECT ` + prefixed + ` FROM actions a WHERE a.tenant_id = $1 AND a.idem_key = i.idem_key
	OFFSET 0) x`

// IntentGetByKeyMany reads the intents of the actions a reconciler pass
// took over, by (tenant, key) at 1-based position n: one statement for the
// batch instead of one per lease. A key without an intent has no row.
const IntentGetByKeyMany = `SELECT u.n, i.*
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(t, k, n)
CROSS JOIN LATERAL (
	SELECT ` + intent.Columns + ` FROM intents WHERE idem_key = u.k AND tenant_id = u.t
	OFFSET 0) i`

const prefixed = `a.tenant_id, a.idem_key, a.intent_ref, a.action, a.status, a.attempt,
	coalesce(a.lease_owner, ''), a.lease_until, coalesce(a.lease_until <= now(), false),
	coalesce(extract(epoch FROM a.lease_until - now()), 0)::float8,
	a.response, a.error, a.created_at, a.updated_at, a.finished_at`

// ActionGet reads the tenant's action under a key.
const ActionGet = `SELECT ` + actionColumns + ` FROM actions WHERE tenant_id = $1 AND idem_key = $2`

// ActionList lists a tenant's actions.
const ActionList = `SELECT ` + actionColumns + ` FROM actions
WHERE tenant_id = $1 AND ($2 = '' OR status = $2)
ORDER BY updated_at DESC, idem_key LIMIT $3`

// ActionComplete records a final (or review) outcome, fenced: only the
// lease owner at its own attempt may write, so a worker whose lease was
// taken over changes nothing.
//
// The fenced statements that name their row by primary key say "still
// started" as lease_until IS NOT NULL, which the schema's CHECK makes the
// same rows, and never as status = 'started': that matches the predicate
// of actions_started_lease_idx, and the plan a connection cached while the
// table was new then read the whole index (every started lease, and every
// entry completions had left dead in it) instead of the key
// (TestGenericPlansReadWhatTheyName). Only the reconciler's scan, which
// wants that index, names the status.
const ActionComplete = `UPDATE actions
SET status = $5, response = $6::jsonb, error = $7::jsonb, lease_owner = NULL, lease_until = NULL,
	finished_at = CASE WHEN $5 IN ('completed', 'failed') THEN now() END, updated_at = now()
WHERE tenant_id = $1 AND idem_key = $2 AND lease_owner = $3 AND attempt = $4 AND lease_until IS NOT NULL`

// ActionCompleteAsync is ActionComplete committed without waiting for its
// WAL flush: set_config(..., true) changes synchronous_commit for this
// statement's own implicit transaction only, so one round trip still does
// it and nothing leaks into the pooled session. It sits in RETURNING, which
// runs exactly for the updated row (a fenced-out completion writes nothing
// and has nothing to flush). Used for successes that a database crash may
// lose safely, because the provider tells them again by the key (see
// Config.SyncCompletion).
const ActionCompleteAsync = ActionComplete + `
RETURNING set_config('synchronous_commit', 'off', true)`

// ActionCompleteMany is ActionComplete for a completions group, as
// parallel arrays (tenant, key, attempt, status, response, error) under one
// owner: one statement for the group instead of one per call. RETURNING
// names, by 1-based position, the completions that matched their fence.
const ActionCompleteMany = `UPDATE actions a
SET status = u.s, response = u.resp::jsonb, error = u.err::jsonb, lease_owner = NULL, lease_until = NULL,
	finished_at = CASE WHEN u.s IN ('completed', 'failed') THEN now() END, updated_at = now()
FROM unnest($1::text[], $2::text[], $3::int4[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS u(t, k, at, s, resp, err, n)
WHERE a.tenant_id = u.t AND a.idem_key = u.k AND a.lease_owner = $7 AND a.attempt = u.at AND a.lease_until IS NOT NULL
RETURNING u.n`

// ActionCompleteManyAsync is ActionCompleteMany committed without waiting
// for its WAL flush, as ActionCompleteAsync.
const ActionCompleteManyAsync = ActionCompleteMany + `, set_config('synchronous_commit', 'off', true)`

// ActionRelease keeps the row started after a transient failure but cuts the
// lease to the backoff, so the next attempt (this worker after its sleep,
// a later caller or the reconciler) may take over when it ends. Fenced.
const ActionRelease = `UPDATE actions
SET lease_until = clock_timestamp() + $5::bigint * interval '1 microsecond', error = $6::jsonb, updated_at = now()
WHERE tenant_id = $1 AND idem_key = $2 AND lease_owner = $3 AND attempt = $4 AND lease_until IS NOT NULL`

// ActionHeartbeat extends a live lease during a long call. Fenced.
const ActionHeartbeat = `UPDATE actions
SET lease_until = clock_timestamp() + $5::bigint * interval '1 microsecond', updated_at = now()
WHERE tenant_id = $1 AND idem_key = $2 AND lease_owner = $3 AND attempt = $4 AND lease_until IS NOT NULL`

// actionAge is how long ago, by the database's clock, the action was first
// claimed (its row created): the retry horizon is measured from there
// (Config.RetryHorizon), so that neither a worker's clock nor the number
// of callers decides when retrying stops.
const actionAge = `extract(epoch FROM now() - created_at)::float8`

// ActionTakeover is the compare-and-set takeover of an expired lease: the
// attempt the taker saw is in the WHERE, so of two takers one wins.
const ActionTakeover = `UPDATE actions
SET attempt = attempt + 1, lease_owner = $4, lease_until = clock_timestamp() + $5::bigint * interval '1 microsecond', updated_at = now()
WHERE tenant_id = $1 AND idem_key = $2 AND attempt = $3 AND lease_until <= now()
RETURNING attempt, error, ` + actionAge

// ActionRetake lets the owner of a released lease take the next attempt at
// the end of its own backoff without waiting for the database clock to pass
// lease_until: nobody else took over while owner and attempt still match.
const ActionRetake = `UPDATE actions
SET attempt = attempt + 1, lease_until = clock_timestamp() + $5::bigint * interval '1 microsecond', updated_at = now()
WHERE tenant_id = $1 AND idem_key = $2 AND attempt = $3 AND lease_owner = $4 AND lease_until IS NOT NULL
RETURNING attempt, error, ` + actionAge

// ActionReconcileTake takes over a batch of expired leases in one
// statement: SKIP LOCKED lets several reconcilers share the work, and the
// attempt comparison keeps the takeover a compare-and-set. The update
// finds each row it took by ctid: due locked them, so nothing can move
// them before this statement commits, and a TID scan is the one plan for
// it even when the statistics say the table is empty (a join on the key
// was planned there as a read of the whole primary key per pass).
//
// $4, when not NULL, lists the actions this process has tools for: a
// process must not take over (and spend an attempt of) an action it cannot
// settle, or a server without the reply tool would push replies to review.
const ActionReconcileTake = `WITH due AS (
	SELECT tenant_id, idem_key, attempt, ctid FROM actions
	WHERE status = 'started' AND lease_until <= now()
		AND ($4::text[] IS NULL OR action = ANY($4::text[]))
	ORDER BY lease_until
	LIMIT $1
	FOR UPDATE SKIP LOCKED
)
UPDATE actions a
SET attempt = a.attempt + 1, lease_owner = $2, lease_until = clock_timestamp() + $3::bigint * interval '1 microsecond', updated_at = now()
FROM due
WHERE a.ctid = due.ctid AND a.tenant_id = due.tenant_id AND a.idem_key = due.idem_key AND a.attempt = due.attempt
RETURNING a.tenant_id, a.idem_key, a.attempt, a.error, extract(epoch FROM now() - a.created_at)::float8`

// ActionResolve applies an operator's decision to an action in review (or,
// when forced, to a started one whose lease expired).
const ActionResolve = `UPDATE actions
SET status = $3,
	response = CASE WHEN $3 = 'completed' THEN $4::jsonb ELSE response END,
	error = coalesce(error, '{}'::jsonb)
		|| CASE WHEN $3 = 'failed' THEN '{"class":"definitive"}'::jsonb ELSE '{}'::jsonb END
		|| jsonb_build_object('resolution', jsonb_build_object('status', $3::text, 'reason', $5::text, 'by', $6::text, 'at', now())),
	lease_owner = NULL, lease_until = NULL, finished_at = now(), updated_at = now()
WHERE tenant_id = $1 AND idem_key = $2
	AND (status = 'review' OR ($7 AND status = 'started' AND lease_until <= now()))
RETURNING ` + actionColumns
