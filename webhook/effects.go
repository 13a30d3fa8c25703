package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// processed_effects and stale_events (migrations 005 and 010): every effect
// decided, once, and those that changed nothing. Every statement is scoped
// by tenant but the purge, which walks every tenant's old rows.

// effectInsert claims an effect. It returns a row only for the transaction
// that inserted it: a concurrent delivery of the same effect waits on the
// primary key until the first one commits (then finds the row and gets
// nothing) or rolls back (then inserts). No SELECT first: that would let
// both through.
const effectInsert = `INSERT INTO processed_effects
	(tenant_id, effect_key, provider, transition, order_ref, payment_ref, event_id, event_type, event_at, sequence, charge_ref, outcome)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'applied')
ON CONFLICT DO NOTHING
RETURNING true`

// effectMarkStale records that the claimed effect changed nothing.
const effectMarkStale = `UPDATE processed_effects SET outcome = 'stale'
WHERE tenant_id = $1 AND effect_key = $2`

// effectOrderByPayment finds the order of an earlier effect of the same
// payment: by its payment reference ($2), else by the charge it was made
// with ($3). A dispute (metadata {}) or a refund of a charge finds its
// order this way.
const effectOrderByPayment = `(SELECT order_ref FROM processed_effects WHERE tenant_id = $1 AND payment_ref = $2 LIMIT 1)
UNION ALL
(SELECT order_ref FROM processed_effects WHERE tenant_id = $1 AND charge_ref = $3 LIMIT 1)
LIMIT 1`

// effectPaidPayment is the payment reference of the effect that made an
// order paid, while it is paid: an invoice that names no payment of its
// own (Stripe's current API versions) announces that one.
// A subquery, not a join: a join's generic plan read the tenant's effects
// through the primary key's first column.
const effectPaidPayment = `SELECT payment_ref FROM processed_effects
WHERE tenant_id = $1 AND transition = 'order.paid' AND effect_key =
	(SELECT last_effect_key FROM orders WHERE tenant_id = $1 AND order_ref = $2 AND status = 'paid')`

// effectListByOrder: the effects on the order $2, or on the orders of an
// effect naming the payment $3, with the notification (outbox row) each
// owed. The payment's lookup reads the tenant's effects: an operator's
// page, not a hot path.
const effectListByOrder = `SELECT e.effect_key, e.provider, e.transition, e.order_ref, e.payment_ref, e.event_id, e.event_type,
	e.event_at, e.outcome, e.created_at,
	n.action, n.status, n.attempt, coalesce(n.error_code, ''), n.idem_key, n.sent_at
FROM processed_effects e
LEFT JOIN payment_notifications n ON n.tenant_id = e.tenant_id AND n.effect_key = e.effect_key
WHERE e.tenant_id = $1 AND (e.order_ref = $2 OR ($3 <> '' AND e.order_ref IN (
	SELECT order_ref FROM processed_effects WHERE tenant_id = $1 AND payment_ref = $3)))
ORDER BY e.created_at`

// effectPurge deletes a batch of effects decided more than $1 microseconds
// ago (database clock) whose notification, if any, is settled as sent
// (failed and review rows wait for an operator; pending ones for the
// relay). Their stale_events and notification rows go with them (ON DELETE
// CASCADE). An event redelivered after its effect was purged meets the
// order's ordering guard instead.
const effectPurge = `DELETE FROM processed_effects WHERE (tenant_id, effect_key) IN (
	SELECT e.tenant_id, e.effect_key FROM processed_effects e
	LEFT JOIN payment_notifications n ON n.tenant_id = e.tenant_id AND n.effect_key = e.effect_key
	WHERE e.created_at < now() - $1::bigint * interval '1 microsecond' AND (n.status IS NULL OR n.status = 'sent')
	ORDER BY e.created_at LIMIT $2)`

// effectCount counts a tenant's effects of the transitions $2 and its
// notifications still pending, in one snapshot: the lab's progress.
const effectCount = `SELECT
	(SELECT count(*) FROM processed_effects WHERE tenant_id = $1 AND transition = ANY($2::text[])),
	(SELECT count(*) FROM payment_notifications WHERE tenant_id = $1 AND status = 'pending')`

// staleEventInsert records an effect that changed nothing, with the order
// as it stood.
const staleEventInsert = `INSERT INTO stale_events
	(tenant_id, effect_key, event_id, order_ref, transition, reason, event_at, sequence, order_status, order_event_at, order_sequence)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`

// staleEventList lists a tenant's stale events, newest first.
const staleEventList = `SELECT tenant_id, effect_key, event_id, order_ref, transition, reason, event_at, sequence,
	order_status, order_event_at, order_sequence, created_at
FROM stale_events WHERE tenant_id = $1 AND ($2 = '' OR order_ref = $2)
ORDER BY created_at DESC, effect_key LIMIT $3`

// claimEffect inserts the effect res names (res.EffectKey, res.OrderRef);
// false when it was decided before.
func claimEffect(ctx context.Context, tx DBTX, res *Result, ev *Event, paymentRef string) (bool, error) {
	var claimed bool
	err := tx.QueryRow(ctx, effectInsert, res.Tenant, res.EffectKey, res.Provider, res.Transition, res.OrderRef, paymentRef,
		ev.ID, ev.Type, ev.Created, ev.Sequence, nullable(chargeRef(ev.Object))).Scan(&claimed)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// paidPayment is the payment the tenant's order was paid with, while it is
// paid; "" otherwise.
func paidPayment(ctx context.Context, tx DBTX, tenant, orderRef string) (string, error) {
	return lookupRef(ctx, tx, effectPaidPayment, tenant, orderRef)
}

// orderOfPayment is the order of an earlier effect of the payment pay or
// of the charge; "" when none.
func orderOfPayment(ctx context.Context, tx DBTX, tenant, pay, charge string) (string, error) {
	return lookupRef(ctx, tx, effectOrderByPayment, tenant, pay, charge)
}

// lookupRef runs a query of one text column; "" when it finds no row.
func lookupRef(ctx context.Context, db DBTX, q string, args ...any) (string, error) {
	var ref string
	err := db.QueryRow(ctx, q, args...).Scan(&ref)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return ref, err
}

// recordStale marks the claimed effect stale and records why, with the
// order o as it stood.
func recordStale(ctx context.Context, tx DBTX, res *Result, ev *Event, o *Order) error {
	if _, err := tx.Exec(ctx, effectMarkStale, res.Tenant, res.EffectKey); err != nil {
		return fmt.Errorf("mark: %w", err)
	}
	if _, err := tx.Exec(ctx, staleEventInsert, res.Tenant, res.EffectKey, ev.ID, res.OrderRef, res.Transition, res.Reason,
		ev.Created, ev.Sequence, o.Status, o.LastEventAt, o.LastSequence); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	return nil
}

// OrderEffect is an effect on an order, with the notification it owed
// (the Notify fields are nil when it owed none).
type OrderEffect struct {
	EffectKey, Provider, Transition, OrderRef, PaymentRef, EventID, EventType, Outcome string
	EventAt, CreatedAt                                                                 time.Time
	NotifyAction, NotifyStatus, NotifyKey                                              *string
	NotifyAttempt                                                                      *int
	NotifyError                                                                        string
	SentAt                                                                             *time.Time
}

// EffectsOfOrder lists the tenant's effects on the order orderRef, and,
// when paymentRef is not "", on the orders of the effects of that payment,
// oldest first. It reads the tenant's effects for the payment: for an
// operator's page.
func EffectsOfOrder(ctx context.Context, db DBTX, tenant, orderRef, paymentRef string) ([]OrderEffect, error) {
	rows, err := db.Query(ctx, effectListByOrder, tenant, orderRef, paymentRef)
	if err != nil {
		return nil, fmt.Errorf("webhook: effects of order: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OrderEffect, error) {
		var e OrderEffect
		err := row.Scan(&e.EffectKey, &e.Provider, &e.Transition, &e.OrderRef, &e.PaymentRef, &e.EventID, &e.EventType,
			&e.EventAt, &e.Outcome, &e.CreatedAt, &e.NotifyAction, &e.NotifyStatus, &e.NotifyAttempt, &e.NotifyError, &e.NotifyKey, &e.SentAt)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("webhook: effects of order: %w", err)
	}
	return out, nil
}

// EffectCounts is how far a tenant's payment events got.
type EffectCounts struct {
	Effects int // effects of the transitions asked about, applied or stale
	Pending int // notifications not sent yet, of any effect
}

// CountEffects counts the tenant's effects of the transitions ts and its
// pending notifications, in one snapshot. It reads the tenant's effects:
// for tests and the lab.
func CountEffects(ctx context.Context, db DBTX, tenant string, ts ...Transition) (EffectCounts, error) {
	var c EffectCounts
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = string(t)
	}
	if err := db.QueryRow(ctx, effectCount, tenant, names).Scan(&c.Effects, &c.Pending); err != nil {
		return c, fmt.Errorf("webhook: count effects: %w", err)
	}
	return c, nil
}

// StaleEvent is an effect that changed nothing.
type StaleEvent struct {
	Tenant        string
	EffectKey     string
	EventID       string
	OrderRef      string
	Transition    Transition
	Reason        string // older or not_allowed
	EventAt       time.Time
	Sequence      *int64
	OrderStatus   Status // the order when the event was refused
	OrderEventAt  time.Time
	OrderSequence *int64
	CreatedAt     time.Time
}

// ListStaleEvents lists the tenant's stale events, newest first.
func ListStaleEvents(ctx context.Context, db DBTX, p ListParams) ([]*StaleEvent, error) {
	if p.Tenant == "" {
		return nil, fmt.Errorf("%w: tenant is required", ErrInvalid)
	}
	rows, err := db.Query(ctx, staleEventList, p.Tenant, p.OrderRef, p.limit())
	if err != nil {
		return nil, fmt.Errorf("webhook: list stale events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*StaleEvent, error) {
		var s StaleEvent
		err := r.Scan(&s.Tenant, &s.EffectKey, &s.EventID, &s.OrderRef, &s.Transition, &s.Reason, &s.EventAt, &s.Sequence,
			&s.OrderStatus, &s.OrderEventAt, &s.OrderSequence, &s.CreatedAt)
		return &s, err
	})
	if err != nil {
		return nil, fmt.Errorf("webhook: list stale events: %w", err)
	}
	return out, nil
}
