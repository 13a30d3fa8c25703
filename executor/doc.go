// Package executor runs a tool for a frozen intent so that retries,
// redeliveries, crashes and concurrent callers act at most once per key, and
// never report an unfinished action as done.
//
// # States
//
// One row in actions per (tenant, key), driven by this table:
//
//	row found   lease               what happens
//	none        -                   claim: insert started + lease, COMMIT, call the tool
//	completed   -                   return the stored response, replayed
//	failed      -                   return the stored definitive failure
//	started     live, other owner   in flight: the caller retries later
//	started     expired             take over (attempt+1 by compare-and-set),
//	                                then Lookup by key if the tool can, else
//	                                call again with the same key
//	review      -                   nothing automatic; an operator resolves it
//
// # One commit to freeze and claim
//
// The full freeze and claim pipelines four statements in one batch: the
// intent insert (ON CONFLICT DO NOTHING), the intent read-back, the claim
// (INSERT INTO actions ... SELECT the frozen key FROM intents ... ON
// CONFLICT DO NOTHING RETURNING) and the action read-back. Each is its own
// statement, so each takes a fresh READ COMMITTED snapshot and sees what a
// concurrent transaction committed while an earlier one waited; together
// they run in the batch's implicit transaction: one round trip, one
// commit. A first execution therefore costs two commits (freeze+claim,
// then completion); a replay writes nothing.
//
// Most calls do not need all four. While the latest claims wrote, a call
// first sends the fresh claim (ledger.QueueFreshClaims): one statement
// that inserts the intent and, when it did, claims its action, reading
// nothing back. A new intent (the usual case) is then frozen and claimed
// by that one statement; a call whose intent was already frozen (a
// redelivery, a concurrent duplicate) got nothing from it, since its
// inserts conflicted, and goes on to the four statements, one more round
// trip that writes nothing. While the latest 32 claims wrote nothing, a
// call reads first instead (see Read-first replays below), and a replay
// is one round trip.
//
// Only the first of those commits waits for its WAL flush. The claim must:
// once the provider has seen the key, the intent and the claim have to
// survive a database crash, or a redelivery could freeze a new extraction
// under a new key. The completion need not, when the provider can tell the
// outcome again by the key (the tool takes the key or can be looked up): a
// completion lost in a crash leaves the row started with its lease, and the
// next attempt learns the outcome from the provider by the same key (the
// charge exists; the provider's stored answer or Lookup returns it). So a
// success is recorded by a statement that sets synchronous_commit off for
// its own implicit transaction (the ledger's actionCompleteAsync), and a first execution
// waits for one flush, not two. Failures and review outcomes commit
// synchronously (a provider need not keep a refusal: asked again, it might
// act), as does everything for a tool that can neither take the key nor be
// looked up, and every completion under Config.SyncCompletion.
//
// # Durable whatever the server says
//
// That the claim waits for its flush is not left to the server's
// settings: ALTER DATABASE/ROLE ... SET synchronous_commit = off (a common
// throughput tuning), or a session that set it, would otherwise make a
// claim whose key the provider has seen disappear in a crash, and a
// redelivery would freeze the model's new extraction under a new key and
// act again. Every batch of the executor opens with the plan settings
// (internal/ledger's groupPlans, queued by ledger.QueuePlans), whose
// select list includes (the fresh claim, a batch of one statement, has the
// same expression in its own select list instead):
//
//	set_config('synchronous_commit', CASE current_setting('synchronous_commit')
//		WHEN 'remote_apply' THEN 'remote_apply' ELSE 'on' END, true)
//
// which holds for that batch's implicit transaction only (nothing leaks
// into the pooled session; remote_apply, stronger, is kept). So the fresh
// claim, a claims group, the read-first lookup's follow-up, ExecuteKey's
// claim, a takeover, a retake, a release, the reconciler's take and every
// failure and review outcome commit synchronously, at no extra statement
// and no extra round trip: the plan settings were sent anyway. A claim
// batch is still one round trip: the fresh claim alone, or the plan
// settings (now also forcing the flush) and the four statements. The
// fresh claim needs none of the plan settings but this one: its plans read
// no table, and nothing it inserts runs a query of its own (no foreign key
// or trigger on intents or actions; internal/ledger's
// TestFreshClaimsFireNoTrigger), so a lone first execution sends three
// statements, not four (about 29k fewer PostgreSQL instructions per
// execution, 611k against 640k, ./scripts/bench --instructions --quick).
// The asynchronous completion turns it off again in its own batch (its
// set_config runs after the plan settings' in a group's batch; a lone one
// opens with the sequential-scan setting alone), which is its documented
// exception. The intent store does the same for Freeze and
// Amend (one more statement in the same round trip or transaction), and
// Resolve for an operator's decision. TestClaimsCommitSynchronouslyWhateverTheSession
// checks, on a session whose synchronous_commit is off, that the setting
// in force inside each writing batch is on and that the WAL is flushed
// past the batch's writes as soon as it returns. fsync=off defeats all of
// this; serve refuses it unless told the database is a throwaway.
//
// # Group commit
//
// Concurrent Executes share those round trips and commits. A claim that
// finds no group in flight sends at once, with every claim queued while the
// previous group was at the database (up to Config.GroupCommit, default
// 32): one batch, one implicit transaction, one commit and one WAL flush
// for all of them. Nothing waits to fill a group, so a lone call goes as
// fast as it would alone; under load the queue that would have formed at
// the database forms in the process instead, and each commit carries many
// calls. A second group goes out beside the first (up to
// Config.GroupCommitConns, default 2) once half a group is waiting, or as
// soon as anything waits while the latest claims wrote nothing (a storm of
// redeliveries has no commit to share, and would only queue). Completions are grouped the
// same way (asynchronous and synchronous ones apart, since the setting the
// former turn off holds for their whole transaction), a group of them one
// fenced UPDATE over arrays (actionCompleteMany) that names the calls
// whose fence matched.
//
// A claims group of more than one call is four statements, not four per
// call (a fresh claims group and a lookups group are one): the same insert, read-back, claim and read-back over arrays, each a
// primary-key lookup per element (lateral subqueries kept from being
// flattened into joins). Every batch of claims, lookups and completions,
// of one call or many, but the fresh claims' (whose plans read no table)
// and a lone asynchronous completion's (a primary-key lookup, behind
// ledger.QueueCompletePlans, which turns sequential scans off and nothing
// else: 21k fewer PostgreSQL instructions per lone first execution),
// opens with the plan settings (as do the failure paths'
// one-offs and the reconciler's statements), which turns sequential scans
// and hash and merge joins off for its transaction, so that no cached plan
// ever scans, whatever the statistics said when it was made (a generic
// plan made on a table vacuumed while empty otherwise scans it for the
// connection's life). A lookups group's plan settings also force its
// statement's generic plan (ledger's lookupPlans): planned afresh for
// every group, it cost a third of the server's CPU per replay at 8
// callers. A completions group's plan settings (ledger's
// completeGroupPlans) also turn plain index scans off: its UPDATE joins
// actions to the arrays, and a generic plan made while the table held a
// few rows took actions as the outer side, a read of the whole primary
// key per group, which the connection kept as the table grew (one
// backend's worth of it made the benchmark's empty side 1.2 to 1.4 times
// as costly as its 1M-row side); with only bitmap probes left, it is a
// primary-key probe per element in every plan, and its generic plan is
// forced too (no planning per group). Each statement still takes its
// own snapshot, so every call sees what it would have seen alone; of two
// calls for one intent in a group, the first claims and the second finds it
// in flight, as it would alone. Calls are ordered by intent within a group,
// so that groups lock rows in one order.
//
// # Fresh claims and read-first replays
//
// Which statement a call sends first depends on what has been arriving.
// While claims write (first executions), the fresh claim: grouped like the
// claims, one statement for the group, which freezes and claims every new
// intent in it and returns, for each, its key and created_at (the rest of
// the row is what the call sent: intent.Store.InsertedAt); the rest go on
// to the claims group. When
// the fresh claim inserted an intent but a row already held its key (an
// amendment's tombstone), the call goes on too, and is reported as having
// created the intent.
//
// While the latest claims wrote nothing (32 in a row: a storm of
// redeliveries), a call reads before it writes: one statement reads its
// intent and the action under the intent's key (ledger.QueueLookups: one
// statement for one call or a group, a group going out as soon as anything
// waits). When both rows are there, that is the whole call: the freeze's
// insert and the claim could only have conflicted, and the read returns
// what their read-backs would have. Anything else (no intent yet, an
// intent without an action, one amended to a key with no action yet)
// goes on to the freeze and claim, a second round trip; the first claim
// that writes ends the mode. So a replay among replays costs one
// statement instead of four, a first execution among first executions one
// instead of four, and only a call that goes against the current (a lone
// redelivery among first executions, the first new call after a storm)
// pays a second round trip.
//
// A group is all-or-nothing: when the server refuses it (a deadlock with
// another group, one call's bad statement), nothing of it committed, and
// each call runs again alone, where its own error is its own. A group
// whose connection is lost once it was sent is not refused but unknown
// (PostgreSQL commits what it had received whole unless pgx's cancel
// request for the lost backend stops it first, and a backend terminated in
// its synchronous-standby wait has committed locally and says nothing):
// each call gets the connection's error, as it would alone. A freeze and
// claim lost so sends itself again, alone, on another connection (hitting
// FailClaimLost first): what it finds tells whether the lost claim
// committed, since a claim's lease owner is the call's own (see Fencing
// and takeover), and the call acts under it or under the claim it makes
// now; a lost takeover likewise (its compare-and-set sent again wins, or
// the row under the call's owner says the lost one did), and a lost
// read-first lookup, which changed nothing, goes on to the freeze and
// claim; a completion, whose outcome is in hand, and a release (a lease
// cut to its backoff) are written again alone on another connection. A
// try sent again that cannot reach the server (no connection can be made,
// the server answers that it is starting up, shutting down or full, or
// the new connection breaks as well: a restart, a failover) is sent again
// after a pause, 50 ms doubling to 1 s, for up to Config.LostWriteRetry
// (10 s by default; a failover may need longer) from the loss
// (internal/lostconn): each of these writes is safe to repeat. Only then
// does the call end in the connection's error, its intent settled later
// under its lease, by the same key. A lease's renewal is not sent again: the next beat is.
// crash_test.go crashes a private PostgreSQL (SIGKILL) under a completion
// and before a claim and starts it again. grouplost_test.go cuts
// the connection for real. A caller that gives up before its group leaves
// is dropped from it. GroupCommit 1 turns grouping off.
//
// # Fencing and takeover
//
// attempt is the fencing token. Completion updates WHERE lease_owner = me AND
// attempt = my_attempt AND lease_until IS NOT NULL (the schema's CHECK makes
// that "still started"; said as status = 'started', it matched the partial
// lease index, and a plan cached while the table was new read every started
// lease through it); when it matches no row, the
// lease was taken over and the result is dropped with ErrLeaseLost. The
// fence also makes a completion safe to send twice: when its connection is
// lost after it was sent (it may have committed), it is sent again on
// another connection, and if that matches no row while the row holds the
// same status at the same attempt, the first one committed (only this call
// writes at its attempt), and the call returns its outcome, not ErrLeaseLost. A
// takeover is one UPDATE with attempt = seen_attempt AND lease_until <= now()
// in its WHERE, so of two takers exactly one wins. Lease times are computed
// by the database (clock_timestamp() to set a lease, now() to test expiry),
// never from a worker's clock; the worker's Clock only times backoff sleeps.
//
// The lease owner a claim or takeover writes is the call's own:
// Config.Owner, "/" and 64 random bits (a reconciler pass's, one for the
// leases it takes), and the call's fenced writes name it. Attempt alone
// fences one call from another; the owner tells a call its own claim: one
// sent again after its connection was lost (above) that finds the action
// started under the call's owner knows the lost claim committed and that
// nobody has acted under it, and holds it once a renewal fenced by owner
// and attempt matches (a lease that ran out meanwhile may have been taken
// over: the taker bumped the attempt). Under a worker-wide owner that row
// could as well be another call's of the same worker, which may have
// acted: the call could only wait for the lease to run out.
//
// The tool's call runs under a timeout shorter than the lease (Config
// validates Lease > Timeout + LeaseMargin), so a taker never races a call
// that is still running at its worker. An optional heartbeat extends the
// lease during long calls and cancels the call when the lease is lost.
//
// No database transaction is ever open across a provider call: the claim is
// committed before the call and the completion is a new statement after it.
// Pass a pool, not a pgx.Tx, to New.
//
// # Failures
//
// The tool's error class decides (see package tools): definitive → failed;
// transient or uncertain → the row stays started with its lease cut to a
// backoff with jitter, and the call is repeated with the same key (in the
// same Execute unless Opts.NoWait, else by a later caller or the
// reconciler), after a Lookup by key where the tool can and an earlier
// attempt may have acted: found, the action completes; not found, the
// same-key call goes again.
//
// Retries end by time, not by how fast callers came back:
// Config.RetryHorizon (default 6h) after the action's first claim,
// measured by the database's clock (actions.created_at; the takeover,
// retake and reconciler statements return the age). Callers that find
// the action in flight spend nothing; an attempt is spent only by a
// retry or by a takeover of an expired lease, at most one per backoff.
// When the horizon is spent (or Config.MaxAttempts, when set), what ends
// the action is what can be known: if no attempt can have acted (each
// failed before the provider acted, or a last Lookup finds nothing under
// the key), it fails with code retries_exhausted, and a new try needs a
// new intent_ref; if one may have acted and the provider cannot tell, it
// goes to review for an operator. A tool that neither takes
// an idempotency key nor can be asked about one goes to review after an
// uncertain outcome instead of being called twice.
//
// The Reconciler finds started rows whose lease expired (FOR UPDATE SKIP
// LOCKED, in batches), takes them over in the same statement, reads their
// intents in one more (ledger.QueueIntentsByKey), and settles each concurrently:
// Lookup first where the tool can, else the same-key call, the completions
// grouped as Execute's are. A pass is two round trips plus the settling,
// whatever the batch size.
//
// # Observer and failpoints
//
// What happens inside is reported down the same path the configuration
// came in, never by wrapping the tools from above or through the context:
// Config.Observer hears, synchronously, each provider Execute and Lookup
// (tenant, action, key, attempt, elapsed, error class) and each Execute or
// ExecuteKey as returned, with whether that call took over an expired lease
// (the executor knows it; nobody has to infer it), and each write lost
// with its connection once sending it again has ended (WriteLost: which
// write, its attempt, the sends, whether it got through). Config.Failpoints is hit
// at FailActionClaimed and FailProviderAnswered around each provider call,
// the points the crash tests kill the process at, and at FailClaimLost
// before a lost claim is sent again. Both default to no-ops
// that cost nothing: no allocation, not even a clock read.
//
// # The ledger
//
// The executor's SQL is not here: every statement on intents and actions
// lives in internal/ledger, unexported, with the intent store's; the
// executor queues them on its batches through the ledger's Queue
// functions and decides what goes in a batch and when it is sent (the
// grouper). The intent store contributes the Extraction and, once a batch
// has run, the FreezeResult (intent.Store.Outcome); the ledger's rows come
// back as the ledger's types, converted here. For the edges, the executor
// exports reads of the actions table (CountReview, ListReview, ListByKey,
// ListByRef, ListByReference, CountRecent, RefByPayment) so that nothing above it
// holds SQL on these tables; executor/executortest is the test API that
// stands in for time and earlier runs in other packages' tests.
//
// # Imports
//
// executor imports intent, internal/ledger, tools (the Tool interface and
// error classes only), internal/backoff (the pause before a retry),
// internal/lostconn (what a lost connection leaves, and the write sent
// again) and pgx.
package executor
