package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// orders (migrations 005 and 010): the webhook's view of each order's
// payment state. Every statement is scoped by tenant.

// orderTransition applies a transition, creating the order on its first
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
const orderTransition = `INSERT INTO orders AS o
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

// orderGet reads an order.
const orderGet = `SELECT ` + orderColumns + ` FROM orders WHERE tenant_id = $1 AND order_ref = $2`

// Order is a stored order.
type Order struct {
	Tenant        string
	Ref           string
	Status        Status
	LastEventAt   time.Time // the provider's creation time of the event that set Status
	LastSequence  *int64
	LastEffectKey string
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

func scanOrder(row pgx.Row) (*Order, error) {
	var o Order
	if err := row.Scan(&o.Tenant, &o.Ref, &o.Status, &o.LastEventAt, &o.LastSequence, &o.LastEffectKey, &o.CreatedAt, &o.UpdatedAt); err != nil {
		return nil, err
	}
	return &o, nil
}

// GetOrder reads the tenant's order.
func GetOrder(ctx context.Context, db DBTX, tenant, ref string) (*Order, error) {
	o, err := scanOrder(db.QueryRow(ctx, orderGet, tenant, ref))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: order %q", ErrNotFound, ref)
	}
	if err != nil {
		return nil, fmt.Errorf("webhook: order: %w", err)
	}
	return o, nil
}

// transitionOrder moves the order of the claimed effect res to the
// transition's target, guarded as orderTransition says. applied is false
// when the guard refused (the event is stale); created, when the event
// created the order.
func transitionOrder(ctx context.Context, tx DBTX, res *Result, ev *Event) (applied, created bool, err error) {
	to := res.Transition.Target()
	err = tx.QueryRow(ctx, orderTransition, res.Tenant, res.OrderRef, to, ev.Created, ev.Sequence, res.EffectKey,
		allowedFrom[to], tieFrom[to]).Scan(&created)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	return err == nil, created, err
}
