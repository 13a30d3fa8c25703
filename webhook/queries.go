package webhook

// SQL of the webhook, in one place. Every statement is scoped by tenant_id.
// Times the database records come from now(); the only other times stored
// are the provider's (event creation), never the worker's clock.

// EffectInsert claims an effect. It returns a row only for the transaction
// that inserted it: a concurrent delivery of the same effect waits on the
// primary key until the first one commits (then finds the row and gets
// nothing) or rolls back (then inserts). No SELECT first: that would let
// both through.
const EffectInsert = `INSERT INTO processed_effects
	(tenant_id, effect_key, provider, transition, order_ref, payment_ref, event_id, event_type, event_at, sequence, charge_ref, outcome)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'applied')
ON CONFLICT DO NOTHING
RETURNING true`

// EffectMarkStale records that the claimed effect changed nothing.
const EffectMarkStale = `UPDATE processed_effects SET outcome = 'stale'
WHERE tenant_id = $1 AND effect_key = $2`

// OrderTransition applies a transition, creating the order on its first
// event. On conflict the update happens only when the guard in its WHERE
// holds against the row as last committed (ON CONFLICT DO UPDATE locks and
// re-reads it, so two events of one order serialize here):
//
//   - the order's status is one the transition may leave ($7), and
//   - the event is newer: by sequence when both the event and the order
//     have one, else by creation time, where at an equal time only the
//     statuses in $8 may be left (a refund or dispute created in the same
//     second as the payment it reverses comes after it).
//
// No row comes back when the guard fails: the event is stale. created is
// true when this statement inserted the row (xmax is 0 only for a fresh
// insert).
const OrderTransition = `INSERT INTO orders AS o
	(tenant_id, order_ref, status, last_event_at, last_sequence, last_effect_key)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (tenant_id, order_ref) DO UPDATE
SET status = EXCLUDED.status,
	last_event_at = EXCLUDED.last_event_at,
	last_sequence = coalesce(EXCLUDED.last_sequence, o.last_sequence),
	last_effect_key = EXCLUDED.last_effect_key,
	updated_at = now()
WHERE o.status = ANY($7::text[])
	AND CASE WHEN EXCLUDED.last_sequence IS NOT NULL AND o.last_sequence IS NOT NULL
		THEN EXCLUDED.last_sequence > o.last_sequence
		ELSE EXCLUDED.last_event_at > o.last_event_at
			OR (EXCLUDED.last_event_at = o.last_event_at AND o.status = ANY($8::text[]))
	END
RETURNING (xmax = 0) AS created`

// orderColumns is what every order read returns, in scanOrder's order.
const orderColumns = `tenant_id, order_ref, status, last_event_at, last_sequence, last_effect_key, created_at, updated_at`

// OrderGet reads an order.
const OrderGet = `SELECT ` + orderColumns + ` FROM orders WHERE tenant_id = $1 AND order_ref = $2`

// StaleEventInsert records an effect that changed nothing, with the order
// as it stood.
const StaleEventInsert = `INSERT INTO stale_events
	(tenant_id, effect_key, event_id, order_ref, transition, reason, event_at, sequence, order_status, order_event_at, order_sequence)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`

// StaleEventList lists a tenant's stale events, newest first.
const StaleEventList = `SELECT tenant_id, effect_key, event_id, order_ref, transition, reason, event_at, sequence,
	order_status, order_event_at, order_sequence, created_at
FROM stale_events WHERE tenant_id = $1 AND ($2 = '' OR order_ref = $2)
ORDER BY created_at DESC, effect_key LIMIT $3`

// OrderByPayment finds the order of an earlier effect of the same
// payment: by its payment reference ($2), else by the charge it was made
// with ($3). A dispute (metadata {}) or a refund of a charge finds its
// order this way.
const OrderByPayment = `(SELECT order_ref FROM processed_effects WHERE tenant_id = $1 AND payment_ref = $2 LIMIT 1)
UNION ALL
(SELECT order_ref FROM processed_effects WHERE tenant_id = $1 AND charge_ref = $3 LIMIT 1)
LIMIT 1`

// PaidPaymentOfOrder is the payment reference of the effect that made an
// order paid, while it is paid: an invoice that names no payment of its
// own (Stripe's current API versions) announces that one.
// A subquery, not a join: a join's generic plan read the tenant's effects
// through the primary key's first column.
const PaidPaymentOfOrder = `SELECT payment_ref FROM processed_effects
WHERE tenant_id = $1 AND transition = 'order.paid' AND effect_key =
	(SELECT last_effect_key FROM orders WHERE tenant_id = $1 AND order_ref = $2 AND status = 'paid')`

// ConversationByInvoice finds the customer's WhatsApp id for an order: the
// conversation (kept by the agent) whose open invoice it is, most recently
// updated first.
const ConversationByInvoice = `SELECT conversation_id FROM conversations
WHERE tenant_id = $1 AND invoice_ref = $2
ORDER BY updated_at DESC LIMIT 1`

// NotificationInsert writes the outbox row of an applied effect: pending
// with its frozen key, or failed at once when nothing could be frozen.
const NotificationInsert = `INSERT INTO payment_notifications
	(tenant_id, effect_key, order_ref, action, intent_ref, idem_key, status, error_code)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

// NotificationSettle records how the relay's execution ended. A sent row
// never changes again: a late, replayed or duplicate job cannot demote it.
// "Not sent" is sent_at IS NULL (the same rows, by the table's CHECK):
// status <> 'sent' would match the predicate of
// payment_notifications_open_idx, and a plan cached while the table was
// new read the tenant's open notifications through it instead of the key.
const NotificationSettle = `UPDATE payment_notifications
SET status = $3, attempt = greatest(attempt, $4), error_code = $5,
	sent_at = CASE WHEN $3 = 'sent' THEN now() END, updated_at = now()
WHERE tenant_id = $1 AND effect_key = $2 AND sent_at IS NULL`

// notificationColumns is what every notification read returns, in
// scanNotification's order.
const notificationColumns = `tenant_id, effect_key, order_ref, action, coalesce(intent_ref, ''), coalesce(idem_key, ''),
	status, attempt, coalesce(error_code, ''), created_at, updated_at, sent_at`

// NotificationGet reads one notification.
const NotificationGet = `SELECT ` + notificationColumns + ` FROM payment_notifications
WHERE tenant_id = $1 AND effect_key = $2`

// NotificationList lists a tenant's notifications, oldest change first:
// with status failed or review it is the review queue; pending rows older
// than a few minutes are stuck.
const NotificationList = `SELECT ` + notificationColumns + ` FROM payment_notifications
WHERE tenant_id = $1 AND ($2 = '' OR status = $2)
ORDER BY updated_at, effect_key LIMIT $3`

// LogInsert records one delivery attempt (never its payload).
const LogInsert = `INSERT INTO payment_webhook_log
	(tenant_id, provider, event_id, event_type, effect_key, verdict, reason, http_status)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

// LogList lists a tenant's delivery attempts of one event ("" for all),
// oldest first.
const LogList = `SELECT tenant_id, id, provider, coalesce(event_id, ''), coalesce(event_type, ''), coalesce(effect_key, ''),
	verdict, coalesce(reason, ''), http_status, received_at
FROM payment_webhook_log WHERE tenant_id = $1 AND ($2 = '' OR event_id = $2)
ORDER BY id LIMIT $3`

// LogPurge deletes a batch of delivery log rows received more than $1
// microseconds ago (database clock).
const LogPurge = `DELETE FROM payment_webhook_log WHERE (tenant_id, id) IN (
	SELECT tenant_id, id FROM payment_webhook_log
	WHERE received_at < now() - $1::bigint * interval '1 microsecond'
	ORDER BY received_at LIMIT $2)`

// EffectPurge deletes a batch of effects decided more than $1 microseconds
// ago (database clock) whose
// notification, if any, is settled as sent (failed and review rows wait for
// an operator; pending ones for the relay). Their stale_events and
// notification rows go with them (ON DELETE CASCADE). An event redelivered
// after its effect was purged meets the order's ordering guard instead.
const EffectPurge = `DELETE FROM processed_effects WHERE (tenant_id, effect_key) IN (
	SELECT e.tenant_id, e.effect_key FROM processed_effects e
	LEFT JOIN payment_notifications n ON n.tenant_id = e.tenant_id AND n.effect_key = e.effect_key
	WHERE e.created_at < now() - $1::bigint * interval '1 microsecond' AND (n.status IS NULL OR n.status = 'sent')
	ORDER BY e.created_at LIMIT $2)`
