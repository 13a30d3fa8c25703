// Package intent is the frozen intent store: the first normalized payload of
// a (tenant, intent_ref, action) wins, and its key is what every retry,
// redelivery and restart sends to the provider.
//
// # Design
//
// Freeze normalizes the model's fields through derive, then inserts the row
// with INSERT ... ON CONFLICT DO NOTHING and reads it back in a NEW statement.
// In READ COMMITTED a single statement such as
//
//	WITH ins AS (INSERT ... ON CONFLICT DO NOTHING RETURNING ...) SELECT ...
//
// runs on one snapshot taken before it waited on a concurrent inserter, so it
// cannot see the row that inserter committed and returns nothing. A second
// statement takes a new snapshot and sees it. Both statements go to the
// server in one pipelined batch: one round trip, and one implicit
// transaction, so one commit.
//
// No SELECT comes before the INSERT: check-then-act duplicates under
// concurrency. PostgreSQL's primary key decides every race.
//
// The caller's extraction is compared with the frozen payload; the names of
// the fields that differ are reported (never their values) and the divergent
// extraction is dropped. An extraction that cannot be normalized at all still
// finds an already-frozen intent: a redelivery whose model output is garbage
// acts on the first, good extraction.
//
// The intent_ref is the unit of intent and comes from the system. When the
// action's schema names a reference field (Config.RefFields, by default
// "intent_ref" and the reference schemas' "referencia_intencao"), Freeze
// writes the intent_ref into it, overriding whatever the model sent.
//
// Amend changes a frozen intent deliberately (an operator fixing a wrong Pix
// key after a definitive failure): in one transaction it locks the intent,
// refuses when an action under the current key is started or in review,
// records the old payload and key in intent_revisions and writes the new
// payload and key. To close the race with a claim that read the old key just
// before the amendment, it writes a "superseded" tombstone action under the
// old key (status failed, error class "superseded") unless an action row
// already exists there: a concurrent claim then conflicts with it, or the
// amendment sees the committed claim and refuses.
//
// Amend refuses an intent whose action completed when the tool moves money
// (a money field in its schema): the amended intent would be charged again
// under its new key. The refusal is a *CompletedError (ErrCompleted); a
// charged wrong amount is corrected by a refund, or by charging the
// difference under a new intent_ref. AmendParams.OverrideCompleted, with
// By, amends anyway and records the override in the revision (overrode).
//
// Every write commits synchronously whatever the server, database, role or
// session says (one more statement in the same round trip or transaction;
// the executor's batches carry the same setting in the statement they open
// with). A frozen intent whose key a provider has seen must survive a
// crash.
//
// Values PostgreSQL refuses (a NUL, invalid UTF-8: Storable) are refused
// before anything is sent: in the ids as ErrInvalid, in the normalized
// payload as a field error, so that no commit group fails for them.
//
// Every read is scoped by tenant: a key alone never finds a row.
//
// # The ledger
//
// The store's SQL is not here: the statements on intents, intent_revisions
// and actions (the amendment's tombstone) live in internal/ledger, with
// the executor's, and the store calls its functions. The executor freezes
// with its own batches (the freeze and the claim in one round trip): it
// asks the store for the Extraction (Extract) and, once the ledger has
// found the frozen row, for the FreezeResult (Outcome), the same
// comparison Freeze makes. Nothing else of the store is plumbing.
//
// # Imports
//
// intent imports derive, internal/ledger and pgx only.
package intent
