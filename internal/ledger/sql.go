package ledger

// The ledger's SQL, in one place: every statement on intents,
// intent_revisions and actions. Every statement is scoped by tenant_id
// (the reconciler's take and the purge, which walk every tenant, say so);
// every lease time comes from the database's clock, never a worker's: a
// new lease_until is clock_timestamp() + lease, so that time a statement
// spent waiting on a lock is not taken from the lease, and expiry is tested
// against now() (the statement's transaction start: the conservative side).
// Durations are passed as microseconds ($n::bigint * interval '1
// microsecond'). Names are noun+verb.

// --- the session settings every writing batch opens with ---

// syncCommitOn is a select-list expression that makes the transaction it
// runs in wait for its commit's WAL flush (and, with synchronous standbys,
// their flush), whatever the server, database, role or session set:
// set_config(..., true) holds for the current transaction only, so nothing
// leaks into a pooled session. remote_apply, stronger still, is kept. Every
// transaction that freezes an intent or claims an action runs it: once a
// provider has seen a key, the intent and the claim under it must survive a
// crash, or a redelivery could freeze a new extraction under a new key.
const syncCommitOn = `set_config('synchronous_commit',
	CASE current_setting('synchronous_commit') WHEN 'remote_apply' THEN 'remote_apply' ELSE 'on' END, true)`

// intentDurable opens every batch or transaction of the intent store
// that writes, and an operator's resolution: one more statement in the
// same round trip (see syncCommitOn).
const intentDurable = `SELECT ` + syncCommitOn

// groupPlans opens the executor's batches (claims, lookups and
// completions, grouped or alone, the failure paths' one-offs, the
// reconciler's statements) but the fresh claims' (actionClaimNewTail) and
// a lone asynchronous completion's (completePlans), for that batch's
// transaction only: no sequential scans, no hash or merge joins, so that
// the only plans left are index lookups. Prepared while a table looked
// empty (vacuumed empty, then filling up), statements got sequential
// scans, which the plan cache kept as the table grew: 7 ms per group
// statement in the benchmark's empty-table run; a generic plan of a
// single-row lookup made on a vacuumed empty table scans the whole table
// for the connection's life, or until an ANALYZE invalidates it. Since
// these statements only ever run after this one, their cached plans are
// always made under it. It costs a statement per batch (with its GUC
// changes, 20k to 30k PostgreSQL instructions).
//
// Claims groups probe per element whatever the plan (OFFSET 0 laterals);
// lookupPlans and completeGroupPlans force their groups' generic plans.
// It also makes the batch's transaction commit synchronously
// (syncCommitOn), whatever the server, database, role or session says:
// claims, takeovers, retakes, the reconciler's take and every failure or
// review outcome wait for their WAL flush even under ALTER DATABASE ... SET
// synchronous_commit = off (actionCompleteAsync turns it off again for its
// own transaction), at no extra statement or round trip.
const groupPlans = `SELECT set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', true),
	set_config('enable_mergejoin', 'off', true), ` + syncCommitOn

// completeGroupPlans is groupPlans for a completions group, with plain
// index scans off and its generic plan forced. Its UPDATE joins actions to
// the arrays; behind groupPlans alone a generic plan cached while a new
// table held a few rows read the whole primary key per group for the
// connection's life (the benchmark's slow empty side, 2026-12-04,
// docs/benchmarks.md). With only bitmap probes left every plan probes the
// primary key per element: safe to force generic, so no group is planned.
const completeGroupPlans = groupPlans + `, set_config('enable_indexscan', 'off', true),
	set_config('plan_cache_mode', 'force_generic_plan', true)`

// completePlans opens a lone asynchronous completion's batch instead: a
// primary-key lookup, no join, that turns synchronous_commit off itself
// (584k and 585k PostgreSQL instructions per lone first execution against
// 605k and 607k behind groupPlans, ./scripts/bench --instructions --quick).
const completePlans = `SELECT set_config('enable_seqscan', 'off', true)`

// lookupPlans is groupPlans for a group of read-first lookups
// (intentActionGetMany, QueueLookups), forcing its generic plan for the
// batch's transaction: planned for the arrays at hand every time, replays
// at 8 callers took 60 to 68 µs of PostgreSQL CPU each, and 39 to 44 with
// the generic plan, their rate going from 1.08 to 1.30 times the single-row
// floor to 1.51 to 1.68 (four runs each, interleaved, 2026-12-01; first
// executions unchanged). What the generic plan risks is what the single
// lookup's (intentActionGet, generic by PostgreSQL's own choice) risks
// already: on tables vacuumed empty, its intent lookup takes the key index
// on tenant_id (TestGenericPlansOnVacuumedTables), until the next ANALYZE.
const lookupPlans = groupPlans + `, set_config('plan_cache_mode', 'force_generic_plan', true)`

// --- intents ---

// intentColumns is what every intent read returns, in scanIntent's order.
const intentColumns = `tenant_id, intent_ref, action, rules_version, payload, idem_key,
	coalesce(source_ref, ''), revision, created_at, updated_at`

// intentFreeze inserts a first extraction. ON CONFLICT without a target
// also absorbs a clash on (tenant_id, idem_key): another ref froze the same
// key, which the read-back reports as no row for this ref.
// The ::text casts: domain-typed parameters are read by domain_in, which
// sets the domain's checks up again for every value; text ones are checked
// as the row goes in (the same checks): 605k and 607k backend instructions
// per lone first execution against 611k and 611k (--instructions --quick).
const intentFreeze = `INSERT INTO intents
	(tenant_id, intent_ref, action, rules_version, payload, idem_key, source_ref)
VALUES ($1::text, $2::text, $3::text, $4, $5::jsonb, $6::text, nullif($7, ''))
ON CONFLICT DO NOTHING`

// intentFreezeInsert is intentFreeze for a group of extractions, as
// parallel arrays (tenant, ref, action, version, payload, key, source ref),
// $1 to $7, without a RETURNING: intentFreezeMany and the fresh claim
// (intentActionClaimNewMany) add theirs. A ref queued twice is inserted
// once: the second row conflicts with the first.
const intentFreezeInsert = `INSERT INTO intents
	(tenant_id, intent_ref, action, rules_version, payload, idem_key, source_ref)
SELECT u.t, u.r, u.a, u.v::smallint, u.p::jsonb, u.k, nullif(u.s, '')
FROM unnest($1::text[], $2::text[], $3::text[], $4::int4[], $5::text[], $6::text[], $7::text[]) AS u(t, r, a, v, p, k, s)
ON CONFLICT DO NOTHING`

// intentFreezeMany is intentFreeze for a group. RETURNING names what this
// statement inserted.
const intentFreezeMany = intentFreezeInsert + `
RETURNING tenant_id, intent_ref, action`

// intentGetMany is intentGet for a group: each row is preceded by the
// 1-based position of its (tenant, ref, action) in the arrays. OFFSET 0
// keeps the lateral subquery from being flattened into a join, whose
// generic plan, prepared on an empty table, could scan it: a primary-key
// lookup per position, whatever the statistics.
const intentGetMany = `SELECT u.n, i.*
FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS u(t, r, a, n)
CROSS JOIN LATERAL (
	SELECT ` + intentColumns + ` FROM intents WHERE tenant_id = u.t AND intent_ref = u.r AND action = u.a
	OFFSET 0) i`

// intentGet reads one intent. After intentFreeze it must be a separate
// statement (a fresh READ COMMITTED snapshot), never a CTE around the insert.
const intentGet = `SELECT ` + intentColumns + `
FROM intents WHERE tenant_id = $1 AND intent_ref = $2 AND action = $3`

// intentGetByKey reads the tenant's intent frozen under a key.
const intentGetByKey = `SELECT ` + intentColumns + `
FROM intents WHERE tenant_id = $1 AND idem_key = $2`

// intentGetByKeyMany reads the intents of the actions a reconciler pass
// took over, by (tenant, key) at 1-based position n: one statement for the
// batch instead of one per lease. A key without an intent has no row.
const intentGetByKeyMany = `SELECT u.n, i.*
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(t, k, n)
CROSS JOIN LATERAL (
	SELECT ` + intentColumns + ` FROM intents WHERE idem_key = u.k AND tenant_id = u.t
	OFFSET 0) i`

// intentLock reads and locks an intent for an amendment.
const intentLock = intentGet + ` FOR UPDATE`

// intentAmend writes the new payload and key.
const intentAmend = `UPDATE intents
SET rules_version = $4, payload = $5::jsonb, idem_key = $6, revision = revision + 1, updated_at = now()
WHERE tenant_id = $1 AND intent_ref = $2 AND action = $3
RETURNING ` + intentColumns

// intentRefsByKeyPrefix finds the intents of an action whose key starts
// with a prefix (a Pix txid is its charge key's first characters). The
// range on idem_key (the prefix padded with the lowest and the highest hex
// digit) lets the (idem_key, tenant_id) unique index serve it; left() makes
// it exact. Two rows are enough to tell one from several.
const intentRefsByKeyPrefix = `SELECT intent_ref FROM intents
WHERE tenant_id = $1 AND idem_key >= $2 AND idem_key <= $3 AND left(idem_key, $4) = $5 AND action = $6
LIMIT 2`

// --- intent_revisions ---

// intentRevisionInsert records the replaced payload and key.
const intentRevisionInsert = `INSERT INTO intent_revisions
	(tenant_id, intent_ref, action, revision, old_rules_version, old_payload, old_key, new_key, reason, amended_by, overrode)
VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9, $10, nullif($11, ''))`

// intentRevisionList lists an intent's amendments.
const intentRevisionList = `SELECT revision, old_rules_version, old_payload, old_key, new_key, reason, amended_by, coalesce(overrode, ''), created_at
FROM intent_revisions WHERE tenant_id = $1 AND intent_ref = $2 AND action = $3
ORDER BY revision`

// --- actions ---

// actionColumns is what every action read returns, in scanAction's order.
const actionColumns = `tenant_id, idem_key, intent_ref, action, status, attempt,
	coalesce(lease_owner, ''), lease_until, coalesce(lease_until <= now(), false),
	coalesce(extract(epoch FROM lease_until - now()), 0)::float8,
	response, error, created_at, updated_at, finished_at`

// actionPrefixed is actionColumns of actions aliased a.
const actionPrefixed = `a.tenant_id, a.idem_key, a.intent_ref, a.action, a.status, a.attempt,
	coalesce(a.lease_owner, ''), a.lease_until, coalesce(a.lease_until <= now(), false),
	coalesce(extract(epoch FROM a.lease_until - now()), 0)::float8,
	a.response, a.error, a.created_at, a.updated_at, a.finished_at`

// actionClaim inserts the started row for an intent's frozen key, reading
// the key from intents in this statement (never from the caller's
// derivation: the first frozen key wins). It returns a row only when this
// call claimed.
const actionClaim = `INSERT INTO actions
	(tenant_id, idem_key, intent_ref, action, status, attempt, lease_owner, lease_until)
SELECT tenant_id, idem_key, intent_ref, action, 'started', 1, $4, clock_timestamp() + $5::bigint * interval '1 microsecond'
FROM intents WHERE tenant_id = $1 AND intent_ref = $2 AND action = $3
ON CONFLICT DO NOTHING
RETURNING idem_key, attempt`

// actionGetForIntent reads the action under an intent's current key. Queued
// after actionClaim as its own statement, so it sees a row a concurrent
// claimer committed while the claim waited.
//
// The key comes from a scalar subquery, not a join: both lookups are then
// full primary-key equalities, whatever the statistics. A join let the
// generic plan of a statement prepared while the tables were small probe
// actions_pkey on tenant_id alone and filter every action of the tenant
// (thousands of buffers per call once the table grew).
const actionGetForIntent = `SELECT ` + actionPrefixed + `
FROM actions a
WHERE a.tenant_id = $1 AND a.idem_key = (
	SELECT i.idem_key FROM intents i WHERE i.tenant_id = $1 AND i.intent_ref = $2 AND i.action = $3)`

// intentActionClaimNewMany is the first executions' claims group: it
// freezes the extractions (intentFreezeInsert, $1 to $7) and claims an
// action for each intent it inserted, for its call's owner ($8, an array).
// Of two extractions with the same values, the intent goes in once and its
// action is claimed (in the arrays' order) for the first one's owner.
const intentActionClaimNewMany = `WITH ins AS (
` + intentFreezeInsert + `
	RETURNING tenant_id, intent_ref, action, idem_key, created_at
)` + actionClaimNewInsert + `o.w
	FROM ins JOIN unnest($1::text[], $2::text[], $3::text[], $6::text[], $8::text[]) WITH ORDINALITY AS o(t, r, a, k, w, n)
		ON o.t = ins.tenant_id AND o.r = ins.intent_ref AND o.a = ins.action AND o.k = ins.idem_key
	ORDER BY o.n` + actionClaimNewTail

// intentActionClaimNew is intentActionClaimNewMany for one extraction, as
// scalars ($1 to $7 intentFreeze's, $8 the owner): a lone call's. Seven
// one-element arrays made its round trip 2 to 4 % longer (BenchmarkFreshClaimForms).
const intentActionClaimNew = `WITH ins AS (
` + intentFreeze + `
	RETURNING tenant_id, intent_ref, action, idem_key, created_at
)` + actionClaimNewInsert + `$8 FROM ins` + actionClaimNewTail

// actionClaimNewInsert and actionClaimNewTail, around a form's owner and
// rows, claim an action for each intent its ins inserted ($9: the lease,
// µs) and return for each the attempt (0: a row held the key), tenant,
// ref, action, key, created_at and owner claimed for (or empty), then
// syncCommitOn (for every intent inserted; not read); the rest is what the
// caller sent (QueueFreshClaims). An intent that was there returns nothing
// (the freeze and claim read what others committed). No groupPlans before
// it (a lone first execution: three statements, not four): its plans read
// no table, and no foreign key or trigger runs a query (TestFreshClaimsFireNoTrigger).
const (
	actionClaimNewInsert = `, cl AS (
	INSERT INTO actions (tenant_id, idem_key, intent_ref, action, status, attempt, lease_until, lease_owner)
	SELECT tenant_id, idem_key, intent_ref, action, 'started', 1, clock_timestamp() + $9::bigint * interval '1 microsecond', `
	actionClaimNewTail = `
	ON CONFLICT DO NOTHING
	RETURNING tenant_id, idem_key, attempt, lease_owner
)
SELECT coalesce(cl.attempt, 0), ins.tenant_id, ins.intent_ref, ins.action, ins.idem_key, ins.created_at,
	coalesce(cl.lease_owner, ''), ` + syncCommitOn + `
FROM ins LEFT JOIN cl ON cl.tenant_id = ins.tenant_id AND cl.idem_key = ins.idem_key`
)

// actionClaimMany is actionClaim for a claims group, as parallel arrays of
// (tenant, ref, action, owner). An intent queued twice is claimed once.
const actionClaimMany = `INSERT INTO actions
	(tenant_id, idem_key, intent_ref, action, status, attempt, lease_owner, lease_until)
SELECT i.tenant_id, i.idem_key, i.intent_ref, i.action, 'started', 1, u.w, clock_timestamp() + $5::bigint * interval '1 microsecond'
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(t, r, a, w)
CROSS JOIN LATERAL (
	SELECT tenant_id, idem_key, intent_ref, action FROM intents
	WHERE tenant_id = u.t AND intent_ref = u.r AND action = u.a OFFSET 0) i
ON CONFLICT DO NOTHING
RETURNING lease_owner, idem_key, attempt`

// actionGetForIntentMany is actionGetForIntent for a claims group: each row
// is preceded by the 1-based position of its intent in the arrays.
//
// The group statements' lateral subqueries end in OFFSET 0, which keeps the
// planner from flattening them into joins: flattened, the generic plan of a
// statement prepared while the tables were empty hashed a sequential scan of
// actions (milliseconds per call once the table grew). Kept apart, each is a
// primary-key lookup per array element, whatever the statistics.
const actionGetForIntentMany = `SELECT u.n, x.*
FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS u(t, r, a, n)
CROSS JOIN LATERAL (
	SELECT ` + actionPrefixed + `
	FROM actions a
	WHERE a.tenant_id = u.t AND a.idem_key = (
		SELECT i.idem_key FROM intents i WHERE i.tenant_id = u.t AND i.intent_ref = u.r AND i.action = u.a)
	OFFSET 0) x`

// intentActionGetMany is the read-first lookup of replays: for each
// (tenant, ref, action) in the arrays that has an intent and an action
// under its current key, the 1-based position, the intent (intentColumns)
// and the action. One statement, reading only: a redelivery of a settled
// intent needs nothing else, where the freeze and claim are four
// statements whose inserts can only conflict.
const intentActionGetMany = `SELECT u.n, i.*, x.*
FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS u(t, r, a, n)
CROSS JOIN LATERAL (
	SELECT ` + intentColumns + ` FROM intents WHERE tenant_id = u.t AND intent_ref = u.r AND action = u.a
	OFFSET 0) i
CROSS JOIN LATERAL (
	SELECT ` + actionPrefixed + ` FROM actions a WHERE a.tenant_id = u.t AND a.idem_key = i.idem_key
	OFFSET 0) x`

// intentActionGet is intentActionGetMany for a single call, with scalar
// parameters: two primary-key lookups, which a group of one would
// otherwise pay array planning for. Its leading 1 stands for the position.
const intentActionGet = `SELECT 1::int8, i.*, x.*
FROM (SELECT ` + intentColumns + ` FROM intents WHERE tenant_id = $1 AND intent_ref = $2 AND action = $3) i
CROSS JOIN LATERAL (
	SELECT ` + actionPrefixed + ` FROM actions a WHERE a.tenant_id = $1 AND a.idem_key = i.idem_key
	OFFSET 0) x`

// actionGet reads the tenant's action under a key.
const actionGet = `SELECT ` + actionColumns + ` FROM actions WHERE tenant_id = $1 AND idem_key = $2`

// actionList lists a tenant's actions.
const actionList = `SELECT ` + actionColumns + ` FROM actions
WHERE tenant_id = $1 AND ($2 = '' OR status = $2)
ORDER BY updated_at DESC, idem_key LIMIT $3`

// actionComplete records a final (or review) outcome, fenced: only the
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
const actionComplete = `UPDATE actions
SET status = $5::text, response = $6::jsonb, error = $7::jsonb, lease_owner = NULL, lease_until = NULL,
	finished_at = CASE WHEN $5::text IN ('completed', 'failed') THEN now() END, updated_at = now()
WHERE tenant_id = $1 AND idem_key = $2 AND lease_owner = $3 AND attempt = $4 AND lease_until IS NOT NULL`

// actionCompleteAsync is actionComplete committed without waiting for its
// WAL flush: set_config(..., true) changes synchronous_commit for this
// statement's own implicit transaction only, so one round trip still does
// it and nothing leaks into the pooled session. It sits in RETURNING, which
// runs exactly for the updated row (a fenced-out completion writes nothing
// and has nothing to flush). Used for successes that a database crash may
// lose safely, because the provider tells them again by the key.
const actionCompleteAsync = actionComplete + `
RETURNING set_config('synchronous_commit', 'off', true)`

// actionCompleteMany is actionComplete for a completions group, as
// parallel arrays (tenant, key, attempt, status, response, error, owner):
// one statement for the group instead of one per call. RETURNING names, by
// 1-based position, the completions that matched their fence.
const actionCompleteMany = `UPDATE actions a
SET status = u.s, response = u.resp::jsonb, error = u.err::jsonb, lease_owner = NULL, lease_until = NULL,
	finished_at = CASE WHEN u.s IN ('completed', 'failed') THEN now() END, updated_at = now()
FROM unnest($1::text[], $2::text[], $3::int4[], $4::text[], $5::text[], $6::text[], $7::text[]) WITH ORDINALITY AS u(t, k, at, s, resp, err, o, n)
WHERE a.tenant_id = u.t AND a.idem_key = u.k AND a.lease_owner = u.o AND a.attempt = u.at AND a.lease_until IS NOT NULL
RETURNING u.n`

// actionCompleteManyAsync is actionCompleteMany committed without waiting
// for its WAL flush, as actionCompleteAsync.
const actionCompleteManyAsync = actionCompleteMany + `, set_config('synchronous_commit', 'off', true)`

// actionRelease keeps the row started after a transient failure but cuts
// the lease to the backoff, so the next attempt (this worker after its
// sleep, a later caller or the reconciler) may take over when it ends.
// Fenced.
const actionRelease = `UPDATE actions
SET lease_until = clock_timestamp() + $5::bigint * interval '1 microsecond', error = $6::jsonb, updated_at = now()
WHERE tenant_id = $1 AND idem_key = $2 AND lease_owner = $3 AND attempt = $4 AND lease_until IS NOT NULL`

// actionHeartbeat extends a live lease during a long call. Fenced.
const actionHeartbeat = `UPDATE actions
SET lease_until = clock_timestamp() + $5::bigint * interval '1 microsecond', updated_at = now()
WHERE tenant_id = $1 AND idem_key = $2 AND lease_owner = $3 AND attempt = $4 AND lease_until IS NOT NULL`

// actionAge is how long ago, by the database's clock, the action was first
// claimed (its row created): the retry horizon is measured from there, so
// that neither a worker's clock nor the number of callers decides when
// retrying stops.
const actionAge = `extract(epoch FROM now() - created_at)::float8`

// actionTakeover is the compare-and-set takeover of an expired lease: the
// attempt the taker saw is in the WHERE, so of two takers one wins.
const actionTakeover = `UPDATE actions
SET attempt = attempt + 1, lease_owner = $4, lease_until = clock_timestamp() + $5::bigint * interval '1 microsecond', updated_at = now()
WHERE tenant_id = $1 AND idem_key = $2 AND attempt = $3 AND lease_until <= now()
RETURNING attempt, error, ` + actionAge

// actionRetake lets the owner of a released lease take the next attempt at
// the end of its own backoff without waiting for the database clock to pass
// lease_until: nobody else took over while owner and attempt still match.
const actionRetake = `UPDATE actions
SET attempt = attempt + 1, lease_until = clock_timestamp() + $5::bigint * interval '1 microsecond', updated_at = now()
WHERE tenant_id = $1 AND idem_key = $2 AND attempt = $3 AND lease_owner = $4 AND lease_until IS NOT NULL
RETURNING attempt, error, ` + actionAge

// actionReconcileTake takes over a batch of expired leases in one
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
const actionReconcileTake = `WITH due AS (
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

// actionResolve applies an operator's decision to an action in review (or,
// when forced, to a started one whose lease expired).
const actionResolve = `UPDATE actions
SET status = $3::text,
	response = CASE WHEN $3 = 'completed' THEN $4::jsonb ELSE response END,
	error = coalesce(error, '{}'::jsonb)
		|| CASE WHEN $3 = 'failed' THEN '{"class":"definitive"}'::jsonb ELSE '{}'::jsonb END
		|| jsonb_build_object('resolution', jsonb_build_object('status', $3::text, 'reason', $5::text, 'by', $6::text, 'at', now())),
	lease_owner = NULL, lease_until = NULL, finished_at = now(), updated_at = now()
WHERE tenant_id = $1 AND idem_key = $2
	AND (status = 'review' OR ($7 AND status = 'started' AND lease_until <= now()))
RETURNING ` + actionColumns

// actionTombstoneInsert blocks the old key of an amended intent: a claim
// racing the amendment either conflicts with this row or is seen by
// actionStatusGet. It never overwrites an existing action.
const actionTombstoneInsert = `INSERT INTO actions
	(tenant_id, idem_key, intent_ref, action, status, attempt, error, finished_at)
VALUES ($1, $2, $3, $4, 'failed', 1, $5::jsonb, now())
ON CONFLICT DO NOTHING`

// actionStatusGet reads the status of the action under a key.
const actionStatusGet = `SELECT status FROM actions WHERE tenant_id = $1 AND idem_key = $2`

// actionTombstoneDelete lifts a tombstone when an amendment returns to a
// key that an earlier amendment superseded.
const actionTombstoneDelete = `DELETE FROM actions
WHERE tenant_id = $1 AND idem_key = $2 AND status = 'failed' AND error->>'class' = '` + SupersededClass + `'`

// actionReviewCount counts, for every tenant, the actions waiting for an
// operator, per action: the partial index actions_review_idx holds them.
const actionReviewCount = `SELECT tenant_id, action, count(*) FROM actions WHERE status = 'review' GROUP BY tenant_id, action`

// --- reads for operators and the payment webhooks ---

// actionListReview lists a tenant's actions in review, oldest first, each
// with how long it has waited since its last update: actions_review_idx
// serves the order.
const actionListReview = `SELECT extract(epoch FROM now() - updated_at)::float8, ` + actionColumns + `
FROM actions
WHERE tenant_id = $1 AND status = 'review'
ORDER BY updated_at, idem_key
LIMIT $2`

// intentActionListByRef finds the intents frozen under an intent_ref,
// each with the status of the action under its key (empty for none). The
// status is a scalar subquery, which the planner does not flatten into a
// join: each intent's action is one primary-key lookup.
const intentActionListByRef = `SELECT i.intent_ref, i.action, i.idem_key,
	coalesce((SELECT a.status FROM actions a WHERE a.tenant_id = i.tenant_id AND a.idem_key = i.idem_key), ''), i.created_at
FROM intents i
WHERE i.tenant_id = $1 AND i.intent_ref = $2
ORDER BY i.action`

// actionListByReference finds actions by the provider's reference in
// their stored response (a charge id, a txid). No index serves it: it
// reads the tenant's actions through the primary key's tenant prefix,
// newest first, and is bounded. An operator's search, not a hot path.
const actionListByReference = `SELECT intent_ref, action, idem_key, status, created_at FROM actions
WHERE tenant_id = $1 AND (response->>'id' = $2 OR response->>'txid' = $2 OR response->>'end_to_end_id' = $2)
ORDER BY created_at DESC LIMIT 20`

// actionCountRecent counts what the actions table records of a tenant
// over the last hour and day. No index on created_at: it reads the
// tenant's rows of the last day (and those in review), which is fine for
// an operator's page and not for a dashboard refreshing every second.
const actionCountRecent = `SELECT
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

// actionRefByPayment finds the intent_ref of the action whose stored
// response names a Stripe PaymentIntent ($2) or charge ($3), as
// tools/stripe's payment tool records them. The response ? '...' terms
// match the partial indexes of migration 010.
const actionRefByPayment = `(SELECT intent_ref FROM actions
	WHERE tenant_id = $1 AND response ? 'payment_intent' AND response->>'payment_intent' = $2 LIMIT 1)
UNION ALL
(SELECT intent_ref FROM actions
	WHERE tenant_id = $1 AND response ? 'latest_charge' AND response->>'latest_charge' = $3 LIMIT 1)
LIMIT 1`

// --- purge ---

// actionPurgeSize reads the size of actions in blocks and the planner's
// estimate of rows per block (0 before the first ANALYZE).
const actionPurgeSize = `SELECT pg_relation_size('actions'::regclass) / current_setting('block_size')::bigint,
	coalesce((SELECT (reltuples / nullif(relpages, 0))::bigint FROM pg_class
		WHERE oid = 'actions'::regclass AND reltuples > 0), 0)`

// actionPurge deletes up to $4 settled actions of any tenant finished more
// than $3 microseconds ago (database clock) among the heap blocks [$1, $2),
// and the intents frozen under their keys, in one statement. The TID range
// bounds the scan; FOR UPDATE SKIP LOCKED leaves rows a live transaction
// holds; ctid = ANY(ARRAY(...)) keeps the delete a TID scan (ctid IN
// (SELECT ...) may be planned as a join over the whole table).
const actionPurge = `WITH victims AS (
	SELECT ctid FROM actions
	WHERE ctid >= format('(%s,0)', $1::bigint)::tid AND ctid < format('(%s,0)', $2::bigint)::tid
		AND status IN ('completed', 'failed')
		AND finished_at < now() - $3::bigint * interval '1 microsecond'
	LIMIT $4
	FOR UPDATE SKIP LOCKED
), gone AS (
	DELETE FROM actions WHERE ctid = ANY (ARRAY(SELECT ctid FROM victims))
	RETURNING tenant_id, idem_key
), gone_intents AS (
	DELETE FROM intents i USING gone g
	WHERE i.tenant_id = g.tenant_id AND i.idem_key = g.idem_key
	RETURNING 1
)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM gone_intents)`

// --- test support (executor/executortest) ---

// actionLeaseExpireAll ends every live lease of every tenant now: what a
// crashed worker's leases come to once they run out, for tests that stand
// in for that wait.
const actionLeaseExpireAll = `UPDATE actions SET lease_until = now() WHERE status = 'started' AND lease_until > now()`

// intentInsertAged records an intent with an empty payload, created
// $4 microseconds ago.
const intentInsertAged = `INSERT INTO intents (tenant_id, intent_ref, action, rules_version, payload, idem_key, created_at, updated_at)
VALUES ($1, $2, $3, 1, '{}', $5, now() - $4::bigint * interval '1 microsecond', now() - $4::bigint * interval '1 microsecond')`

// actionInsertAged records an action in status $5, created (and, when
// settled, finished) $6 microseconds ago; a started one under a dead
// worker's lease that ran out 30 seconds after it began.
const actionInsertAged = `INSERT INTO actions (tenant_id, idem_key, intent_ref, action, status, lease_owner, lease_until, created_at, updated_at, finished_at)
VALUES ($1, $2, $3, $4, $5::text,
	CASE WHEN $5 = 'started' THEN 'dead-worker' END,
	CASE WHEN $5 = 'started' THEN now() - $6::bigint * interval '1 microsecond' + interval '30 seconds' END,
	now() - $6::bigint * interval '1 microsecond', now() - $6::bigint * interval '1 microsecond',
	CASE WHEN $5 IN ('completed', 'failed') THEN now() - $6::bigint * interval '1 microsecond' END)`

// actionBackdateAll moves every action's creation, and its finish when it
// has one, to $1 microseconds ago.
const actionBackdateAll = `UPDATE actions SET created_at = now() - $1::bigint * interval '1 microsecond',
	finished_at = CASE WHEN finished_at IS NOT NULL THEN now() - $1::bigint * interval '1 microsecond' END`

// actionInsertCompleted records an action completed with a response, with
// no intent behind it: what the tables hold of a charge made before the
// test looks for it.
const actionInsertCompleted = `INSERT INTO actions (tenant_id, idem_key, intent_ref, action, status, response, finished_at)
VALUES ($1, $2, $3, $4, 'completed', $5, now())`

// actionListFiltered lists the actions that match every filter set (an
// empty or NULL parameter matches any; an owner, its calls' "owner/..."),
// oldest first. Unbounded and unindexed beyond the tenant: for tests and
// the lab's reports, never the engine.
const actionListFiltered = `SELECT tenant_id, idem_key, intent_ref, action, status, attempt, coalesce(lease_owner, '') FROM actions
WHERE ($1 = '' OR tenant_id = $1) AND ($2 = '' OR action = $2) AND ($3 = '' OR status = $3)
	AND ($4::text[] IS NULL OR intent_ref = ANY($4::text[])) AND ($5 = '' OR lease_owner = $5 OR starts_with(lease_owner, $5 || '/'))
ORDER BY created_at, idem_key`

// actionCountFiltered counts what actionListFiltered lists.
const actionCountFiltered = `SELECT count(*) FROM actions
WHERE ($1 = '' OR tenant_id = $1) AND ($2 = '' OR action = $2) AND ($3 = '' OR status = $3)
	AND ($4::text[] IS NULL OR intent_ref = ANY($4::text[])) AND ($5 = '' OR lease_owner = $5 OR starts_with(lease_owner, $5 || '/'))`

// intentListWithStatus lists a tenant's intents of an action (of every
// action for an empty one), each with the status of the action under its
// key (empty for none), oldest first.
const intentListWithStatus = `SELECT i.intent_ref, i.action, i.idem_key, i.payload, i.rules_version, coalesce(a.status, '') FROM intents i
LEFT JOIN actions a ON a.tenant_id = i.tenant_id AND a.idem_key = i.idem_key
WHERE i.tenant_id = $1 AND ($2 = '' OR i.action = $2)
ORDER BY i.created_at, i.intent_ref`
