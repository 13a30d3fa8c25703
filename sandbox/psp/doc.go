// Package psp is the sandbox Pix payment provider: a local stand-in for a
// PSP's charge API that behaves like a real one where retries are
// concerned, so that retrysafe's executor, reconciler and webhook handling
// can be tested and demonstrated against it.
//
//	POST /v1/pix/charges                     create a paid charge (Idempotency-Key required)
//	GET  /v1/pix/charges?idempotency_key=K   the charge created with K, or 404 (reconciliation)
//	GET  /v1/pix/charges                     {"data":[...]} every charge, newest first
//	GET  /v1/pix/charges/{id}                one charge
//	GET  /healthz                            liveness
//
// Every /v1 request carries Authorization: Bearer <token>; the token names
// the merchant (any token is accepted) and scopes everything, including
// idempotency keys.
//
// Charges are created behind the idempotency middleware in transactional
// mode: the key, the charge, its webhook event and the stored answer commit
// in one transaction, so duplicates never create a second charge and a crash
// never leaves half of one. After each charge a signed
// payment_intent.succeeded-like event is POSTed to the configured webhook
// URL (header Retrysafe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of
// "<t>.<body>">), redelivered with exponential backoff until a 2xx answer.
//
// Faults (sandbox/fault) can be injected per request with the
// X-Sandbox-Fault header, or per process for POST requests.
//
// The PSP keeps its tables in its own schema (default retrysafe_psp),
// migrated with retrysafe's migrations plus its own embedded SQL (Migrate).
//
// It imports idempotency, sandbox/fault, sandbox/internal/standin (the
// request log's status recorder), internal/backoff (the pause before a
// redelivery), migrations and pgx.
package psp
