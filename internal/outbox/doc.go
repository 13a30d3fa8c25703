// Package outbox is the relay half of retrysafe's transactional outboxes:
// the agent's replies and the webhook's payment receipts. Each owner writes
// its outbox row, freezes the message's intent and inserts a River job in
// one transaction; this package is what the job then does, written once.
//
// Relay executes the frozen key through the executor and says what the
// outbox row settles as (Sent, Failed, Review), or that the action is busy
// elsewhere (*BusyError). A job that runs again after the message went out
// (redelivered, rescued, or its worker died before marking the row) finds
// the executor's action row and replays it, or takes an expired lease over
// and asks the provider by key: never a second message.
//
// AddWorker registers a job's work with River and maps its errors to
// River's answers, the same way for every retrysafe queue (the agent's
// inbox too): a *BusyError snoozes the job without spending an attempt, an
// error retrying cannot fix cancels it, anything else is retried with
// backoff; an optional hook runs before River discards a job whose last
// attempt failed.
//
// The owners keep their tables: this package writes nothing itself, so the
// row's status is recorded by the caller, in its own SQL.
//
// # Imports
//
// outbox imports executor and River. It sits in the executor's layer
// (internal/importrule), below the agent and the webhook that use it.
package outbox
