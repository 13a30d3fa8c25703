// Package webhook receives payment providers' webhooks and turns each
// payment event into at most one effect on an order, and at most one
// customer notification sent through an outbox.
//
//	POST /webhooks/payments/{provider}
//	     Retrysafe-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>
//	     {"id":"evt_...","type":"payment_intent.succeeded","created":1700000000,
//	      "data":{"object":{"id":"pi_...","object":"payment_intent","metadata":{"order_ref":"..."}}}}
//	  → 200 {"status":"processed" | "duplicate" | "stale" | "ignored"}
//	    400 malformed event, 401 bad or expired signature, 404 unknown provider,
//	    405, 413 too large, 500 storage failed (the provider redelivers)
//
// # Signature
//
// The signature scheme is the sandbox PSP's (sandbox/psp), which is
// Stripe's: HMAC-SHA256 over "<t>.<raw body>", hex, in a header of
// "t=<unix>" and one or more "v1=<hex>" entries (two while a secret is
// rotated). It is checked over the raw bytes, in constant time, before the
// body is parsed; then t must be within the provider's tolerance (default 5
// minutes, either way) of Config.Clock, which refuses replays of captured
// deliveries. A provider re-signs every redelivery, so a late retry passes.
// A refused signature answers 401 and stores nothing, not even a log row:
// an unauthenticated request must not cost a write.
//
// # Events and effects
//
// Provider.Events maps event types to transitions (DefaultEvents:
// payment_intent.succeeded and invoice.payment_succeeded → order.paid,
// charge.refunded → order.refunded, charge.dispute.created →
// order.disputed). Other types are answered 200, logged as ignored, and
// change nothing, whatever their object looks like. A mapped event that
// does not name its tenant, order and payment is refused with 400 (logged
// as rejected, without its body, when its tenant is known) and changes
// nothing.
//
// The tenant is the provider's (Provider.Tenant: one account per tenant),
// or, for platforms with connected accounts, Provider.Accounts[the event's
// "account"]. It is never read from metadata: one tenant's metadata must
// not file an event under another.
//
// The effect key is hex SHA-256 of (provider, transition, order, payment
// reference), never of the event id:
//
//   - order: the object's metadata[Provider.OrderRefKey], else the invoice
//     it belongs to (an invoice's own id), else the intent_ref of the
//     tenant's intent frozen under the object's idempotency_key (a charge
//     retrysafe itself made through pix.charge: the sandbox PSP echoes the
//     key);
//   - payment reference: the payment intent (a payment_intent's id, or the
//     payment_intent field of a charge, invoice or dispute), else the
//     charge, else the object's id.
//
// So payment_intent.succeeded and invoice.payment_succeeded for one payment,
// or one event redelivered under a new id, are one effect; a second real
// payment of the order after a refund names another payment and is a new
// effect.
//
// # One transaction
//
// Each mapped delivery is one transaction on one connection (no second
// connection is taken while it is held):
//
//  1. INSERT INTO processed_effects ... ON CONFLICT DO NOTHING RETURNING:
//     no row means the effect was already decided: 200 duplicate. A
//     concurrent delivery of the same effect waits on the primary key and
//     then finds it; nothing is read first.
//  2. The order: INSERT ... ON CONFLICT DO UPDATE ... WHERE <guard>. The
//     order row is created by its first event (the webhook must not lose
//     an event because the order was not known yet; the reference comes
//     from a signed event). On conflict the guard is evaluated against the
//     row as last committed, locked: the status may be left for the target
//     (allowed transitions are explicit: paid ← refunded; refunded ← paid,
//     disputed; disputed ← paid, refunded; never a status to itself) and
//     the event must be newer than the order's last: by the provider's
//     sequence number when both have one, else by the event's creation
//     time, where at an equal second only an earlier stage may be left
//     (paid < refunded < disputed). No row back: stale. The effect is kept
//     (outcome stale, so a redelivery is a duplicate), stale_events records
//     why (older, not_allowed) and the order as it stood; 200 stale.
//  3. Applied: the Notifier (DefaultNotifier: a template per transition to
//     the metadata's phone or e-mail, else to the WhatsApp conversation
//     whose invoice is the order; NotifyNone for none) decides the
//     message, reading through the transaction if it must; its intent is
//     frozen with intent_ref "<effect key>:notify" (so its idempotency key
//     is derived from (tenant, effect, "notify") and the message as first
//     frozen), the payment_notifications outbox row is inserted pending
//     with that key, and the River job (NotifyArgs) is inserted with
//     InsertTx. A message that cannot be frozen (unknown tool, a recipient
//     breaking its rule) is stored failed, for review, and the effect
//     still commits.
//  4. A payment_webhook_log row (event id, effect key, verdict), then
//     COMMIT. Any database failure rolls everything back and answers 500:
//     the provider redelivers, and the retry starts from nothing.
//
// # Outbox relay
//
// The relay (River worker, queue QueueNotify) runs the frozen key through
// the executor: claim, send with Idempotency-Key = the key, record. A relay
// killed after the provider answered but before the executor recorded it
// leaves a started action whose lease expires; the next run takes it over
// and asks the provider by key (Lookup) or sends again with the same key,
// which the provider deduplicates. A relay killed after the executor
// recorded it, before marking the outbox row, replays the stored outcome.
// Transient provider failures are retried by the executor with backoff
// (the job snoozes meanwhile); after the executor's MaxAttempts the action
// goes to review. The outbox row ends sent, failed (definitive refusal, or
// River's attempts exhausted: relay_exhausted) or review; ListNotifications
// with status failed or review is the review queue.
//
// # The Pix callback (API Pix)
//
// PixHandler (pix.go) receives the Central Bank's API Pix callback, POST
// /webhooks/pix/{provider} (and .../pix, which PSPs append), with a
// shared secret on top of the mTLS the TLS terminator does. Each Pix of a
// call is decided on its own through the same transaction as a payment
// event: a Pix received is the effect (order.paid, the intent behind the
// txid, endToEndId), a refund that reached DEVOLVIDO is (order.refunded,
// that order, endToEndId/id), partial (order.partially_refunded, the order
// stays paid) until the refunds reach the Pix's value; the ordering guard
// compares horario. A Pix for a txid retrysafe did not create is logged
// and answered 200.
//
// # Logs
//
// Logs carry provider, tenant, event id and type, transition, order
// reference, verdict and codes; never the body, metadata, a phone or an
// e-mail address.
//
// # Imports
//
// webhook imports pgx, River and its pgx driver, intent (freezing the
// notification), executor and tools (the relay and the default notifier's
// tool names), derive (classifying freeze errors), internal/failpoint, and
// tools/apipix (the cob action's name) for the Pix callback.
package webhook
