// Package sandbox groups local stand-ins for the services retrysafe talks
// to, built to behave like the real ones where it matters for retries: they
// honour Idempotency-Key, send signed webhooks, and fail on request.
//
//   - sandbox/apipix: a PSP speaking the Central Bank's API Pix (cob by
//     txid, OAuth2, refunds, the Pix callback): `retrysafe sandbox psp`,
//     its default flavour.
//   - sandbox/psp: a Pix payment provider on an invented POST
//     /v1/pix/charges API with Idempotency-Key (`retrysafe sandbox psp
//     --flavour v1`).
//   - sandbox/model: an OpenAI-compatible chat model playing a billing
//     assistant, non-deterministic on purpose (`retrysafe sandbox model`).
//   - sandbox/cloudapi: a WhatsApp Cloud API that deduplicates sends by
//     Idempotency-Key (`retrysafe sandbox whatsapp`).
//   - sandbox/fault: fault injection shared by every sandbox service.
//   - sandbox/internal/standin: the HTTP plumbing the stand-ins share (the
//     request logs' status recorder, the JSON answer, the health check).
//
// Sandbox packages may import the Idempotency-Key middleware (package
// idempotency), the migrations and pgx; nothing but cmd/ and tests imports them.
package sandbox
