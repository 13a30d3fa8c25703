// Package cloudapi is the sandbox WhatsApp Cloud API: a local stand-in
// that accepts the messages retrysafe's whatsapp.send_template tool sends,
// deduplicates them by Idempotency-Key, and fails on request, so that the
// agent's replies and the outbox relay can be tested for "sent once".
//
//	POST /v1/messages                      the tool's shape (Idempotency-Key required)
//	     {"to":"+5511987654321","template":"pagamento_confirmado","language":"pt_BR"}
//	POST /v{N}/{phone_number_id}/messages  the Cloud API's shape (Idempotency-Key optional)
//	     {"messaging_product":"whatsapp","to":"5511987654321","type":"template",
//	      "template":{"name":"...","language":{"code":"pt_BR"},"components":[...]}}
//	     or "type":"text","text":{"body":"..."}
//	  → 200 {"messaging_product":"whatsapp","contacts":[{"input","wa_id"}],
//	         "messages":[{"id":"wamid....","message_status":"accepted"}]}
//	GET  /v1/messages?idempotency_key=K    the stored answer for K, or 404 (the tool's Lookup)
//	GET  /v1/messages                      {"data":[...]} the caller's messages
//	GET  /_sandbox/messages                {"data":[...]} every message, oldest first
//	                                       (?to=, ?template=, ?idempotency_key= filter)
//	POST /_sandbox/messages/{id}/status    {"status":"failed","code":131000} → the status
//	                                       webhook body Meta would send (Server.Status)
//	DELETE /_sandbox/messages              forget everything
//	GET  /healthz
//
// Both body shapes are accepted on both paths. Every POST and /v1 GET needs
// Authorization: Bearer <token>; the token names the account and scopes
// the keys (Config.Token, when set, is the only one accepted).
//
// # Idempotency
//
// The real Cloud API takes no idempotency key: a retried send is a second
// message. This stand-in behaves like the API the tool is written for (the
// one the tool's Idempotent() promises): the same key with the same request
// (fingerprinted as package idempotency does: method, path, query and
// canonical JSON body) returns the first answer byte for byte, with
// Idempotent-Replayed: true; the same key with another request is 422 and
// sends nothing. A Cloud API path request without a key is sent every
// time, as the real one is. Requests refused as invalid (400) are not
// stored: they are refused the same way again.
//
// Messages live in memory behind one mutex, and a send is checked, created
// and stored in one critical section, so concurrent duplicates of a key
// produce one message and never a 409. Restarting the process forgets
// everything, which is acceptable for a test double and keeps it free of
// a database.
//
// # Faults
//
// As in every sandbox service (sandbox/fault): X-Sandbox-Fault on a request
// (fail-before, drop-after, fail-after, delay=D, slow=D), or Config.Fault
// with Config.FaultRate for every POST. fail-after and drop-after send the
// message and lose the answer; a retry with the same key then gets the
// stored answer, and Lookup finds it.
//
// Recipients: "to" a phone number, "recipient" a business-scoped user id
// (BSUID; with both, "to" wins, as Meta documents), or recipient_type
// "group" with "to" the group id;
// biz_opaque_callback_data is kept. Server.Status (and its endpoint) moves a
// message to sent, delivered, read or failed and returns the status webhook
// in the shape of Meta's status messages webhook reference, for a test to
// deliver; a failed message releases its Idempotency-Key (it was never
// delivered, so the same key sends again, as a resend must).
//
// Not simulated: posting status webhooks by itself, inbound customer
// messages, media, rate limits (error 131056) and the 24-hour customer
// service window.
//
// # Imports
//
// sandbox/fault, idempotency (ParseKey, Fingerprint, problem
// answers), sandbox/internal/standin (the JSON answer the stand-ins share)
// and the standard library. Nothing from server/sidecar, agent or
// cmd; nothing but cmd/ and tests imports this package.
package cloudapi
