// Package restarttest is `retrysafe restart-test`: it kills real worker
// processes with SIGKILL at every crash point of a Pix charge, lets the
// queue redeliver, and checks that every intent was charged exactly once,
// with one key on every attempt.
//
// # A run
//
// One run is one conversation: its own customer, open invoice (the
// intent_ref), amount, and a Pix key (CPF, CNPJ, e-mail or phone) written
// in one of several spellings into a billing message (planRuns, from
// DefaultTemplates or a corpus such as testdata/restart/messages.jsonl).
// Some runs send their first message's webhook two or three times at once;
// some send two or three messages for one intent with the key spelled
// differently (CPF punctuated and bare; a phone as +55 11 98765-4321,
// (11) 98765-4321 and 11987654321): one intent, one key, one charge.
//
// # Batches
//
// Runs are dealt evenly to scenarios: the crash points (CrashPoints) and
// the extra faults (Faults). A scenario's runs go, Config.Batch at a time,
// to one worker process armed for it, which works them concurrently
// (Config.Concurrency jobs at once) and dies with all of them in flight:
//
//   - failpoint crash points: RETRYSAFE_FAILPOINTS=<point>@k (k drawn in
//     1..3) makes the worker SIGKILL itself on the k-th hit of the point;
//   - provider-call: each armed worker reaches the PSP through its own
//     proxy (pspProxy), which lets the PSP charge and answer, keeps the
//     answer and SIGKILLs the worker waiting for it;
//   - random: SIGKILL a random 0..400 ms after the worker started working
//     the batch;
//   - psp-500 / psp-drop / psp-fail-after / psp-slow: the proxy asks the
//     PSP for the fault with its own X-Sandbox-Fault header (the first
//     charge request always, later ones at 50%), and the worker is killed
//     a random 0..700 ms after the first fault;
//   - pg-restart: `pg_ctl restart` of the test's own cluster once the
//     batch is in flight, then a random kill;
//   - pg-crash: once the worker works the batch and a charge has reached
//     the PSP, SIGKILL of the postmaster and every backend at once
//     (harness.Stack.CrashDatabase), a start through crash recovery, and
//     the worker killed a second or so after it is back;
//   - pg-failover (opt-in): the same crash of the primary, its streaming
//     standby (synchronous unless Config.Standby is "async") promoted,
//     every process reconnecting through a URL naming both hosts with
//     target_session_attrs=read-write, then a new standby on the dead
//     primary's port (harness.Stack.Failover);
//   - race: the first worker's charges are slowed (delay) and, once it
//     holds the batch, a second worker starts and the queue hands it every
//     running job (the job row set back to available, as an at-least-once
//     queue does when a visibility timeout runs out on a slow worker); both
//     are killed at the end.
//
// A batch's jobs the worker never fetched go to the next armed worker of
// the scenario (at most two extra rounds), else to a later scenario's
// worker or to the redelivery. Kills that found a job in flight are
// counted per run (hits).
//
// # Redelivery
//
// After the last scenario, the test waits --rescue-after and starts
// Config.Workers plain workers. Nothing is handed back by the test: a
// killed job stays 'running' in River until the elected leader's rescuer
// finds it older than --rescue-after and makes it retryable, as in
// production. River runs the rescuer every 30 s (fixed: River 0.51 has no
// setting for it, and its Config.Test offers only a fake clock, which
// would fake the very thing under test) and once when a client becomes
// leader. So the test keeps every kill in one phase, makes --rescue-after
// short (7 s, with --job-timeout 6 s), and starts the redelivery workers
// when the last killed job is old enough: the first pass of the new leader
// (elected once the dead leader's 15 s lease runs out) takes them all, and
// 300 runs need one rescue wait, not 300.
//
// # The database
//
// The test's own cluster is durable (fsync, synchronous_commit,
// full_page_writes on); Config.DBSynchronousCommit makes another
// synchronous_commit the database's default. The PSP's tables live on a
// second cluster no fault touches: were they in the crashed one, a lost
// claim would take the charge it led to with it, and the duplicate would
// never show. River's leader table is unlogged, so after database faults
// the report names the leader found once the redelivery is done, which
// must have been elected after the last fault.
//
// # Soak
//
// Soak (`retrysafe soak`) reuses the runs, deliveries and verdict with
// long-lived workers, each behind a proxy that draws a PSP fault for a
// share of the charges, under a steady stream of new runs, same-key storms
// and redeliveries, and a database crash every SoakConfig.CrashEvery; it
// samples serve's and the workers' RSS (/proc) and goroutines (written by
// each process to StatsDirEnv) and requires them flat.
//
// # Verdict
//
// When every run has settled (a turn and a sent reply per message, no job
// queued or running, no action started), the test runs `retrysafe
// reconcile` once and reads: the frozen intents and action rows, each
// turn's recorded tool keys, River's job attempts, the model ledger, the
// PSP's charges (matched to intents by their "retrysafe <intent_ref>"
// description) and request log (matched by key: the frozen key, or the key
// of a charge of the intent), and the WhatsApp stand-in's messages. Pass
// means: each intent charged exactly once, none lost, none stuck, one key
// per intent across frozen row, turns and PSP requests, no PSP request with
// a key of no intent, no reply sent twice, and every scenario reached.
//
// # API Pix
//
// With Config.PSP = PSPAPIPix the charge is pix.cob against the sandbox
// PSP speaking API Pix: the proxy kills and faults on PUT /api/cob/{txid},
// the crash points name pix.cob, payers are CPFs and CNPJs, and the PSP's
// request log is read by txid (a txid is the first 35 hex digits of the
// key that made it; the naive control's random txids are attributed by
// the charge's solicitacaoPagador, the intent_ref). After the verdict's
// reconcile pass the test pays every ATIVA charge, waits for the Pix
// callback to apply each payment and the receipts to go out, and fails
// unless every run charged once got exactly one receipt and no charge was
// overwritten at the PSP.
//
// # Refunds
//
// With API Pix and Config.RefundRate, a share of the runs (drawn from a
// generator of their own, so the rest of the plan does not move) refund
// part of their paid charge: a pix.refund intent of its own
// (intent_ref "<invoice>:refund:1", the paid Pix's e2eid, 1 centavo to half
// the charge), asked for through serve's sidecar. Serve reaches the PSP
// through a proxy of the test's (harness.StackConfig.ServeAPIPixURL) that
// fails each refund's first PUT before the PSP acts (fail-before), so the
// sidecar answers in_flight and leaves the action started: the refund is
// then a worker's, whose reconciler takes it over. Refund runs are dealt to
// RefundPoints (the executor's points: claimed, inside the PSP call, the
// answer in hand, random; the turn's do not exist for a sidecar call) and
// go, a batch at a time, to a worker armed for the point (its reconciler
// polling fifty times as often as serve's, so that it usually wins the
// takeover), which is killed there. When serve's reconciler took every
// batch of a point first, a refund at a time (up to three) moves there
// from a later point that keeps one, and the report counts them (moved).
// A plain worker then settles the rest,
// the sidecar is asked the same call again (it must answer completed,
// replayed), and the PSP settles and notifies each refund. The verdict adds:
// one refund per refund intent at the PSP, every refund request under the
// frozen key's devolução id, refunds created = refund intents, none lost
// or left started, every refund point with runs reached.
//
// # Imports
//
// internal/lab/harness (processes), agent (failpoint names, job kinds, and the
// turns, messages and model calls it counts, through agent's functions),
// webhook (the payment effects and receipts it waits for),
// executor/executortest (what the ledger's tables hold, for the verdict),
// tools, tools/apipix (the txid), pgx. Not sandbox/ (its tests do, to check the
// corpus reads right).
package restarttest
