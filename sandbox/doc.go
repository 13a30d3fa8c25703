// Package sandbox groups local stand-ins for the services retrysafe talks
// to, built to behave like the real ones where it matters for retries: they
// honour Idempotency-Key, send signed webhooks, and fail on request.
//
//   - sandbox/psp: a Pix payment provider (`retrysafe sandbox psp`).
//   - sandbox/fault: fault injection shared by every sandbox service.
//
// Later: a WhatsApp Cloud API and an OpenAI-compatible model server.
//
// Sandbox packages may import the server's middleware (server/idempotency),
// the migrations and pgx; nothing but cmd/ and tests imports them.
package sandbox
