// Package whatsapp receives the WhatsApp Cloud API webhook and turns each
// inbound text message into a stored message and an inbox job, once.
//
//	GET  /webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=T&hub.challenge=C
//	     → 200 C when T is the configured verify token, else 403
//	POST /webhooks/whatsapp   X-Hub-Signature-256: sha256=<hex HMAC-SHA256(app secret, raw body)>
//	     {"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages",
//	      "value":{"metadata":{"phone_number_id":"..."},"messages":[{"id":"wamid...",
//	      "from":"5511...","timestamp":"...","type":"text","text":{"body":"..."}}]}}]}]}
//	     → 200 (stored, duplicate or ignored), 400 malformed, 401 bad signature,
//	       413 too large, 500 when the database failed (the provider retries)
//
// # Design
//
// The signature is checked over the raw bytes, in constant time, before the
// body is parsed: an unsigned or mis-signed request stores nothing. A body
// that is not the webhook's JSON shape, or a text message without id or
// sender, is refused whole with 400, storing nothing.
//
// The tenant comes from configuration: value.metadata.phone_number_id (the
// business number the customer wrote to) maps to one tenant; a number no
// tenant owns is ignored (200, logged), as are statuses and other events,
// since anything but 200 makes the provider redeliver for days.
//
// Every text message of one delivery is stored by agent.Receive in one
// transaction: the messages row (primary key tenant, message id; INSERT ...
// ON CONFLICT DO NOTHING) and, only when the row went in, the inbox job
// (River, unique by tenant and message id as a second guard). A duplicate
// delivery, sequential or concurrent, stores and queues nothing and still
// answers 200. The model never runs inside the request: the handler answers
// as soon as the transaction commits.
//
// Logs carry the tenant, message ids and counts, never a message's text or
// the sender's number.
//
// # Imports
//
// whatsapp imports agent (the messages table and the inbox job) and the
// standard library.
package whatsapp
