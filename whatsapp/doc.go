// Package whatsapp receives the WhatsApp Cloud API webhook and turns each
// inbound message the agent can read into a stored message and an inbox
// job, once; every other message into a record of why it was not answered;
// and each status into the delivery state of the reply it is about.
//
//	GET  /webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=T&hub.challenge=C
//	     → 200 C when T is the configured verify token, else 403
//	POST /webhooks/whatsapp   X-Hub-Signature-256: sha256=<hex HMAC-SHA256(app secret, raw body)>
//	     {"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages",
//	      "value":{"metadata":{"phone_number_id":"..."},"contacts":[...],"messages":[...],
//	      "statuses":[...]}}]}]}
//	     → 200 (stored, duplicate or ignored), 400 not the webhook's JSON at all,
//	       401 bad signature, 413 too large, 500 when the database failed (the
//	       provider retries)
//
// # Design
//
// The signature is checked over the raw bytes, in constant time, before the
// body is parsed: an unsigned or mis-signed request stores nothing. Only a
// body that is not the webhook's JSON shape is refused (400). Anything else
// is answered 200, since any other answer makes Meta redeliver the whole
// batch for days: a message that cannot be read (no id, a sender that is
// no WhatsApp id, a text that is not an object) is recorded in
// inbound_ignored with its type and the reason, and the good messages
// beside it are stored.
//
// Message shapes (testdata/ holds them as Meta documents them, with where):
// text (text.body), a template's quick-reply button (button.text),
// interactive button_reply and list_reply (their titles; a list reply's
// description on a second line), image, video and document with a caption
// (the caption) reach the agent, with their type as the message's kind.
// Media without a caption, audio, stickers, locations, contacts,
// reactions, orders, system and unsupported messages, and interactive
// replies the agent does not read (flows) are recorded as ignored with
// their type.
//
// Senders: a message carries from (the phone number, wa_id) and, since
// 2026, from_user_id (the business-scoped user id, BSUID, "US.1349...");
// a user with a username may have no from at all. Both are stored; the
// conversation is the phone number when there is one, else the BSUID
// (taken from the message, or from the one contacts[].user_id). A message
// with group_id is the group's own conversation, "group:<group id>",
// never the participant's one-to-one thread; whether the agent answers
// groups is the agent's configuration (agent.Config.Groups).
//
// Statuses (sent, delivered, read, failed, in any order) are handed to
// agent.ReceiveBatch, which finds the reply by biz_opaque_callback_data
// (the reply's key) or by message id, merges the states, and on failed
// queues the reply's one resend or puts it to review by the error code
// (Config.Delivery). Statuses of messages the agent did not send are
// counted and dropped.
//
// The tenant comes from configuration: value.metadata.phone_number_id (the
// business number the customer wrote to) maps to one tenant; an event for a
// number no tenant owns is ignored (200, logged), as are other fields.
//
// Everything of one delivery is stored by agent.ReceiveBatch in one
// transaction: the messages rows (primary key tenant, message id; INSERT
// ... ON CONFLICT DO NOTHING) and, only when a row went in, its inbox job
// (River, unique by tenant and message id as a second guard); the ignored
// records (primary key tenant, message id); the merged statuses. A
// duplicate delivery, sequential or concurrent, stores and queues nothing
// and still answers 200. The model never runs inside the request: the
// handler answers as soon as the transaction commits.
//
// Logs carry the tenant, message ids, types and counts, never a message's
// text or the sender's number.
//
// # Imports
//
// whatsapp imports agent (the messages table and the inbox job),
// internal/pairs (the tenants list) and the standard library.
package whatsapp
