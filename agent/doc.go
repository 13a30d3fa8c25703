// Package agent is the conversation loop of the WhatsApp billing agent: an
// inbox job (one inbound message) becomes model calls, tool calls executed
// once through the executor, and one reply sent through an outbox.
//
// # Flow
//
//	webhook ── Receive: message row (PK tenant, message id) + inbox job, one tx
//	inbox job ── HandleInbox:
//	    claim the message (a lease on the database clock)
//	    load the conversation: customer, open invoice, amount due (the system
//	        context: intent_ref and tenant come from here, never from the model)
//	    step 0..n: model call, journaled per (tenant, message id, step)
//	        tool call → parse → Freeze (intent_ref = the open invoice)
//	                  → executor.Execute (claim, provider, completion)
//	        tool result → next step; no tool call → the reply text
//	    record the turn, one tx: agent_turns row (ON CONFLICT DO NOTHING),
//	        reply intent frozen, outbound message row, reply job (outbox)
//	reply job ── HandleReply: executor.ExecuteKey(reply key) → whatsapp.send_text
//
// # Why each piece
//
// Redelivery of the webhook: the messages primary key decides; the inbox job
// is inserted only when the message row was, in the same transaction, and is
// also unique in River by (tenant, message id) as a second guard.
//
// Redelivery of the inbox job (River retries, a rescued job whose worker
// died): the claim makes a concurrent duplicate wait (JobSnooze) instead of
// paying the model again; a recorded turn makes any later one acknowledge at
// once. A worker that died mid-turn leaves its claim to expire; the next one
// replays the model journal (no new tokens, the same tool call) and reaches
// the frozen intent and its key, so the provider sees the same
// Idempotency-Key and the executor the same action row.
//
// The model journal: before a call for (tenant, message, step) the journal
// is read; a hit replays the recorded answer and writes a ledger row with
// replayed = true and the original's tokens. After a real call the ledger row
// is inserted, then the journal entry with ON CONFLICT DO NOTHING, then the
// entry is read back in a new statement (in READ COMMITTED one statement does
// not see a row another transaction committed while it waited): if another
// worker journaled first, its answer is used, so concurrent workers converge
// on one tool call. With the journal off every call is made and recorded
// (replayed = false) and the journal is never read.
//
// A malformed tool call (bad JSON, unknown tool, missing or invalid fields)
// freezes nothing: the customer gets a fixed, clear reply and the turn
// records the error code. Model failures that may pass (429, 5xx, timeouts,
// connection errors) return an error and River retries with backoff; a
// request the model API refuses as such (400, 413, 422) ends the turn with a
// fixed apology.
//
// The reply goes out through an outbox: the reply job is inserted in the
// same transaction as the turn, and its intent (whatsapp.send_text,
// intent_ref "<message id>:reply") is frozen in that transaction too, so its
// key is fixed by (tenant, message id, "reply") and the first recorded text.
// The reply worker executes that key through the executor: a relay killed
// after the provider sent the message finds the action row (or asks the
// provider by key) and does not send twice.
//
// # Failpoints
//
// For crash tests, Config.Failpoint (default failpoint.Hit, armed by
// RETRYSAFE_FAILPOINTS) is called at: FailModelAnswered, FailIntentFrozen,
// FailActionClaimed and FailProviderAnswered (from the tool wrapper that
// WithFailpoints installs into the executor's ToolSource, each also with
// ".<action>" appended), FailActionCompleted, FailTurnRecorded,
// FailInboxBeforeAck and FailReplyBeforeAck. FailNaiveRandomKey is no crash
// point: armed, it makes that tool wrapper send a random key on every
// provider call, the broken control of `retrysafe restart-test --naive`
// (naive.go).
//
// # Logs
//
// Logs carry tenant, message id, step, action, status and counts; never the
// message text, a CPF, a Pix key or a tool payload.
//
// # Imports
//
// agent imports tools, intent, executor, derive (field errors), River and
// its pgx driver, go-openai, pgx and internal/failpoint.
package agent
