// Package webhook receives payment providers' webhooks and turns each
// payment event into at most one effect on an order, and at most one
// customer notification sent through an outbox.
//
//	POST /webhooks/payments/{provider}
//	     Stripe-Signature | Retrysafe-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>[,v1=...]
//	     {"id":"evt_...","type":"payment_intent.succeeded","created":1700000000,
//	      "request":{"id":"req_...","idempotency_key":"..."},
//	      "data":{"object":{"id":"pi_...","object":"payment_intent","metadata":{"order_ref":"..."}}}}
//	  → 200 {"status":"processed" | "duplicate" | "stale" | "ignored" | "rejected", "reason":"..."}
//	    401 bad or expired signature, 404 unknown provider, 405, 413 too large,
//	    500 storage failed (the provider redelivers)
//
// A provider retries every answer but a 2xx, for days (Stripe: three days).
// So an authentic delivery this package does not understand (not JSON, no
// id, an order it names nowhere, an unknown connected account) is recorded
// in the delivery log with its reason and answered 200 rejected; only a bad
// signature (401) and a storage failure (500) are left to the provider's
// retries.
//
// # Presets
//
// Provider.Preset fills a provider's zero fields:
//
//   - PresetStripe: Stripe itself. Header Stripe-Signature; StripeEvents
//     (payment_intent.succeeded, charge.succeeded, invoice.payment_succeeded,
//     invoice.paid → order.paid; charge.refunded →
//     order.refunded or order.partially_refunded; charge.dispute.created →
//     order.disputed); the order in metadata order_ref, else order_id.
//   - PresetGeneric (the default): the sandbox PSP's, or any sender of the
//     same scheme. Header Retrysafe-Signature; DefaultEvents (the four
//     names above without charge.succeeded and invoice.paid); the order in
//     metadata order_ref.
//
// Provider.SignatureHeader, Events and OrderRefKeys override the preset
// (serve: RETRYSAFE_PAYMENT_WEBHOOK_PRESETS, _HEADERS, _ORDER_KEYS).
//
// # Signature
//
// The scheme is Stripe's, which the sandbox PSP (sandbox/psp) follows:
// HMAC-SHA256 over "<t>.<raw body>", hex, in a header of "t=<unix>" and one
// or more "v1=<hex>" entries (one per secret while Stripe rolls a secret;
// any one matching passes). It is checked over the raw bytes, in constant
// time, before the body is parsed; then t must be within the provider's
// tolerance (default 5 minutes, either way, as Stripe's libraries) of
// Config.Clock, which refuses replays of captured deliveries. A provider
// re-signs every redelivery, so a late retry passes. A refused signature
// answers 401 and stores nothing, not even a log row: an unauthenticated
// request must not cost a write.
//
// # Events and effects
//
// Provider.Events maps event types to transitions. Other types are answered
// 200, logged as ignored, and change nothing, whatever their object looks
// like. A refund event (order.refunded) whose object keeps part of its
// amount (amount_refunded above 0 and below amount: 5,000 of 18,000)
// becomes order.partially_refunded.
//
// The tenant is the provider's (Provider.Tenant: one account per tenant),
// or, for platforms with connected accounts, Provider.Accounts[the event's
// "account"]. It is never read from metadata: one tenant's metadata must
// not file an event under another.
//
// The effect key is hex SHA-256 of (provider, transition, order, payment
// reference), never of the event id.
//
// The order, first found of:
//
//  1. the object's metadata, under each of Provider.OrderRefKeys in turn;
//  2. the invoice it belongs to (the invoice field of API versions before
//     2025-03-31.basil; an invoice_payment's invoice), or an invoice's own
//     id;
//  3. the intent_ref of the tenant's intent frozen under the event's
//     request.idempotency_key or the object's idempotency_key: a charge
//     retrysafe made, whose Idempotency-Key was the frozen key;
//  4. an earlier effect of the same payment: its payment reference, or the
//     charge it was made with (a PaymentIntent's latest_charge); a dispute
//     (metadata {}, payment_intent often null) or the refund of a charge
//     finds its order so;
//  5. the action whose stored response names the PaymentIntent or the
//     charge (the stripe.payment tool's, tools/stripe): a charge retrysafe
//     made whose own success event never came.
//
// Nothing found: 200 rejected, reason no_order_ref (Stripe lets an
// operator resend the event once the order is known).
//
// The payment reference: the payment intent (a payment_intent's id; the
// payment_intent field of a charge, invoice or dispute; the first of an
// invoice's payments.data[].payment), else the charge, else the object's
// id. A partial refund's adds the total refunded ("pi_.../refunded:5000"):
// each partial refund is its own effect, a redelivery of one the same.
//
// An invoice under the current API versions names no payment (no
// payment_intent, no charge; payments is not included in events). An
// invoice is paid once, so a paid event of an invoice that names none,
// for an order that is paid, announces the payment the order was paid
// with: it takes that payment's reference, and invoice.payment_succeeded
// after payment_intent.succeeded is a duplicate, not stale. (Two deliveries
// of the pair at the same instant may still meet the guard first: the
// second is then stale, one receipt still. The other way round, a
// PaymentIntent of an invoice names no order of its own and is answered
// rejected.)
//
// So payment_intent.succeeded, charge.succeeded and the invoice events for
// one payment, or one event redelivered under a new id, are one effect; a
// second real payment of the order after a refund names another payment
// and is a new effect.
//
// # One transaction
//
// Each mapped delivery is one transaction on one connection (no second
// connection is taken while it is held):
//
//  0. The order and payment references are resolved as above, reading
//     through the transaction when the event does not name them.
//  1. INSERT INTO processed_effects ... ON CONFLICT DO NOTHING RETURNING:
//     no row means the effect was already decided: 200 duplicate. A
//     concurrent delivery of the same effect waits on the primary key and
//     then finds it; the effect is never read before it is inserted.
//  2. The order: INSERT ... ON CONFLICT DO UPDATE ... WHERE <guard>. The
//     order row is created by its first event (the webhook must not lose
//     an event because the order was not known yet; the reference comes
//     from a signed event). On conflict the guard is evaluated against the
//     row as last committed, locked: the status may be left for the target
//     (allowed transitions are explicit: paid ← refunded;
//     partially_refunded ← paid, partially_refunded, disputed; refunded ←
//     paid, partially_refunded, disputed; disputed ← paid,
//     partially_refunded, refunded; never another status to itself) and
//     the event must be newer than the order's last: by the provider's
//     sequence number when both have one, else by the event's creation
//     time, where at an equal second only an earlier stage may be left
//     (paid < partially_refunded < refunded < disputed). No row back: stale. The effect is kept
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
// the executor (outbox.Relay, the relay the agent's replies go through
// too): claim, send with Idempotency-Key = the key, record. A relay
// killed after the provider answered but before the executor recorded it
// leaves a started action whose lease expires; the next run takes it over
// and asks the provider by key (Lookup) or sends again with the same key,
// which the provider deduplicates. A relay killed after the executor
// recorded it, before marking the outbox row, replays the stored outcome.
// Transient provider failures are retried by the executor with backoff
// (the job snoozes meanwhile: a *BusyError, the agent's type); after the
// executor's MaxAttempts the action goes to review. The outbox row ends
// sent, failed (definitive refusal, or River's attempts exhausted:
// relay_exhausted) or review; ListNotifications with status failed or
// review is the review queue.
//
// # The Pix callback (API Pix)
//
// PixHandler (pix.go) receives the Central Bank's API Pix callback, POST
// /webhooks/pix/{provider} (and .../pix, which PSPs append), with a
// shared secret on top of the mTLS the TLS terminator does. Each Pix of a
// call is decided on its own through the same transaction as a payment
// event: a Pix received is the effect (order.paid, the intent behind the
// txid, endToEndId), a refund that reached DEVOLVIDO is (order.refunded,
// that order, endToEndId/id), partial (order.partially_refunded, the
// order partially_refunded, as after a card's partial refund) until the
// refunds reach the Pix's value; the ordering guard compares horario. A Pix for a txid retrysafe did not create is logged
// and answered 200.
//
// # Logs
//
// Logs and the delivery log (payment_webhook_log: one row per delivery
// that reached a verdict, rejected ones under tenant "" when no tenant owns
// the event's account) carry provider, tenant, event id and type,
// transition, order reference, verdict and codes; never the body,
// metadata, a phone or an e-mail address.
//
// # Tables
//
// webhook owns orders (orders.go), processed_effects and stale_events
// (effects.go), payment_notifications (notifications.go) and
// payment_webhook_log (deliverylog.go): migrations 005 and 010. Their SQL
// is in those files alone, unexported and named noun then verb
// (effectInsert), each statement behind a function that takes the
// caller's DBTX: a delivery's statements all run in its one transaction.
// Other packages read them through exported functions (GetOrder,
// GetNotification, the List functions, Purge; EffectsOfOrder and
// CountDuplicates for the console, CountVerdicts for the lab); tests that
// plant an old delivery log write it with RecordDelivery, and effects and
// notifications with RecordEffect and RecordNotification
// (ListEffectNotifications reads back what a purge left). The order
// lookups in the ledger's tables go through its owners (intent.GetByKey,
// intent.RefsByKeyPrefix, executor.RefByPayment); the conversation lookup
// is the agent's (agent.ConversationByInvoice). Every statement's generic
// plan is checked (plans_test.go) but the listings and purges named
// there.
//
// # Imports
//
// webhook imports pgx, River, intent (freezing the notification; the
// intent behind a charge's key or txid), executor and tools (the relay and
// the default notifier's tool names; the action whose response names a
// payment), agent (the conversation of an order's invoice),
// internal/outbox (the relay and its worker), internal/riverretry
// (RetryPolicy), internal/confcheck (Config's required fields),
// internal/pairs (the provider=value lists), derive (classifying freeze
// errors), internal/failpoint, and tools/apipix (the cob action's name)
// for the Pix callback.
package webhook
