// Package sandbox groups local stand-ins for the services retrysafe talks
// to, built to behave like the real ones where it matters for retries: they
// honour Idempotency-Key, send signed webhooks, and fail on request.
//
//   - sandbox/psp: a Pix payment provider (`retrysafe sandbox psp`).
//   - sandbox/model: an OpenAI-compatible chat model playing a billing
//     assistant, non-deterministic on purpose (`retrysafe sandbox model`).
//   - sandbox/whatsapp: a WhatsApp Cloud API that deduplicates sends by
//     Idempotency-Key (`retrysafe sandbox whatsapp`).
//   - sandbox/fault: fault injection shared by every sandbox service.
//
// Sandbox packages may import the Idempotency-Key middleware (package
// idempotency), the migrations and pgx; nothing but cmd/ and tests imports them.
package sandbox
