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
//	status webhook ── ReceiveBatch: merged into the reply's delivery state;
//	    failed → one resend job (HandleResend) or review, by error code
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
// The reply worker executes that key through the executor (outbox.Relay,
// the relay the payment webhook's receipts go through too): a relay killed
// after the provider sent the message finds the action row (or asks the
// provider by key) and does not send twice. The three workers (inbox,
// reply, resend) are internal/outbox workers: a *BusyError snoozes the job
// without spending an attempt, ErrNotFound and ErrInvalid cancel it, and a
// model 429 that said when snoozes it for that long.
//
// # The WhatsApp of 2026
//
// Senders: a conversation is the customer's phone number (wa_id), else
// their business-scoped user id (BSUID); a group message is its group's
// conversation ("group:<id>"), answered there (GroupsConversation) or with
// a fixed refusal and no model call (GroupsRefuse). The reply is addressed
// accordingly: "to" a phone number, "recipient" a BSUID, or
// recipient_type "group".
//
// The customer-service window: when the turn is recorded, the reply's form
// is decided by Config.Clock against the customer's last message in the
// conversation (the provider's timestamp): within Config.ServiceWindow
// (24h) free text, outside it the tenant's approved template
// (Config.Templates, the text as its body parameter when BodyParam); with
// no template the reply is frozen and held for review, since free text
// would be refused (131047). The form is part of the frozen intent, so a
// replayed turn sends the same thing.
//
// Delivery: the reply tool sends the reply's key as biz_opaque_callback_data
// too, so each status webhook (ReceiveBatch) finds its reply by key, else by
// the message id recorded from the send's answer. States only move forward
// (sent < delivered < read; read sets delivered too) and a failure after a
// delivery is ignored, so out-of-order and redelivered statuses merge to
// the same state. A failed status whose code Config.Delivery retries
// (131000, 131016, 131049, 130429, 131056 after PairRateBackoff) queues one
// resend job; any other code, or a second failure, puts the reply to
// review. The resend is an intent of its own ("<message id>:reply:resend":
// the executor sends it at most once) carrying the reply's key in its
// reply_key field, which the tool sends as Idempotency-Key and callback
// data: the provider and the statuses see the reply's key. A send refused
// with 131056 (or 130429, 131000, 131016) is transient: the reply job backs
// off (at least PairRateBackoff for 131056) and sends again.
//
// # The model's answers
//
// message.refusal ends the turn as TurnRefused: the refusal stays in the
// journal (the answer as received) and the customer gets what
// Config.Refusal says (a fixed text, the refusal, or nothing: review).
// finish_reason "length" or "content_filter" ends it as TurnModelError with
// that code and Texts.Cut: a truncated tool call is never executed.
// "tool_calls" and "stop" are the normal ends; several tool calls in one
// message (parallel calls) are each prepared before any runs, and the same
// call twice reaches the same intent and key, so it charges once.
//
// A 429 says when to try again, but go-openai drops the headers:
// RetryAfterTransport (set it as the client's transport) reads
// retry-after-ms and Retry-After, sleeps up to its MaxWait and sends the
// request again; a longer wait is handed back in ModelError.RetryAfter and
// the River job is snoozed for it.
//
// # Failpoints
//
// For crash tests, Config.Failpoint (default failpoint.Hit, armed by
// RETRYSAFE_FAILPOINTS) is called at: FailModelAnswered, FailIntentFrozen,
// FailActionCompleted, FailTurnRecorded, FailInboxBeforeAck and
// FailReplyBeforeAck. FailActionClaimed and FailProviderAnswered are the
// executor's own points (executor.FailActionClaimed and
// executor.FailProviderAnswered, each also with ".<action>" appended), hit
// on the executor's Config.Failpoints around each provider call: the
// worker passes failpoint.Hit there too. FailNaiveRandomKey is no crash
// point: armed, the worker hands the executor its tools through NaiveKeys,
// which send a random key on every provider call, the broken control of
// `retrysafe restart-test --naive` (naive.go).
//
// # Tables
//
// agent owns messages and inbound_ignored (messages.go), conversations
// (conversations.go), agent_turns (turns.go), and the model ledger and
// journal, model_calls and model_journal (ledger.go): migrations 003, 004
// and 011. Their SQL is in those files alone, unexported and named noun
// then verb (turnInsert), each statement behind a function that takes the
// caller's DBTX, so that it runs in the caller's transaction. Other
// packages read these tables through exported functions: the payment
// webhook's default notifier (ConversationByInvoice, inside the effect's
// transaction), the console (TurnsOfKey, ModelCallsOf, CountTools,
// LedgerModels), `retrysafe tokens` and the console's spend chart (Ledger,
// which internal/tokens prices), the tests and the restart test
// (CountModelCalls, CountModelCallsBySource, ListTurns, InboundIDs,
// Answered), and the inbound webhook's tests (ListInbound, ListIgnored);
// tests that plant a ledger to measure or show write it with
// RecordModelCall, and the console's tests plant a conversation with
// RecordMessage and RecordTurn. Every statement's generic plan is checked (plans_test.go);
// the scans named there are operators' pages and the lab's census.
//
// # Logs
//
// Logs carry tenant, message id, step, action, status and counts; never the
// message text, a CPF, a Pix key or a tool payload.
//
// # Imports
//
// agent imports tools, intent, executor, derive (field errors),
// internal/outbox (the relay and the job workers), internal/riverretry
// (the jobs' retry policy), internal/confcheck (Config's required fields),
// internal/tokens (the ledger's rows), internal/backoff (waiting out a
// Retry-After), internal/failpoint, River and its
// pgx driver, go-openai and pgx.
package agent
