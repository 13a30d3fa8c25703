package webhook

import (
	"context"
	"fmt"
	"time"
)

// effectInsertAt plants a processed effect decided at $9 and recorded at
// $11 (now when null).
const effectInsertAt = `INSERT INTO processed_effects (tenant_id, effect_key, provider, transition, order_ref, payment_ref,
	event_id, event_type, event_at, outcome, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, coalesce($11, now()))`

// notificationInsertAt plants a notification recorded at $9 (now when
// null); sent_at is that time when the status is sent.
const notificationInsertAt = `INSERT INTO payment_notifications (tenant_id, effect_key, order_ref, action, intent_ref, idem_key, status,
	attempt, error_code, created_at, updated_at, sent_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, coalesce($10, now()), coalesce($10, now()),
	CASE WHEN $7 = 'sent' THEN coalesce($10, now()) END)`

// effectListNotified lists every processed effect with its notification's
// status, by order reference.
const effectListNotified = `SELECT e.order_ref, coalesce(n.status, '')
FROM processed_effects e LEFT JOIN payment_notifications n USING (tenant_id, effect_key)
ORDER BY e.order_ref`

// PlantedEffect is a processed effect as a test fixture writes it.
type PlantedEffect struct {
	Tenant, EffectKey, Provider string
	Transition                  Transition
	OrderRef, PaymentRef        string
	EventID, EventType          string
	EventAt                     time.Time
	Outcome                     string
	CreatedAt                   time.Time // zero: now
}

// RecordEffect writes a processed effect directly, with the times the caller
// chooses, so that tests of the purge and the console can plant old or
// finished effects without running a delivery. Production code never calls
// it: effects are written by the handler in the delivery's transaction.
func RecordEffect(ctx context.Context, db DBTX, e PlantedEffect) error {
	if _, err := db.Exec(ctx, effectInsertAt, e.Tenant, e.EffectKey, e.Provider, string(e.Transition), e.OrderRef, e.PaymentRef,
		e.EventID, e.EventType, e.EventAt, e.Outcome, nullTime(e.CreatedAt)); err != nil {
		return fmt.Errorf("webhook: record effect: %w", err)
	}
	return nil
}

// PlantedNotification is a payment notification as a test fixture writes it.
type PlantedNotification struct {
	Tenant, EffectKey, OrderRef, Action, IntentRef, IdemKey string
	Status                                                  string
	Attempt                                                 int
	ErrorCode                                               string    // "" for none
	At                                                      time.Time // created, updated and (when sent) sent; zero: now
}

// RecordNotification writes a notification directly, for the same fixtures
// as RecordEffect; the relay is what writes them in production.
func RecordNotification(ctx context.Context, db DBTX, n PlantedNotification) error {
	if _, err := db.Exec(ctx, notificationInsertAt, n.Tenant, n.EffectKey, n.OrderRef, n.Action, n.IntentRef, n.IdemKey, n.Status,
		n.Attempt, nullable(n.ErrorCode), nullTime(n.At)); err != nil {
		return fmt.Errorf("webhook: record notification: %w", err)
	}
	return nil
}

// EffectNotification is one processed effect's order and the status of its
// notification ("" when none is owed).
type EffectNotification struct {
	OrderRef, Status string
}

// ListEffectNotifications lists every tenant's processed effects with their
// notification's status, by order reference: what a purge test checks is
// left. It reads the whole table and is meant for tests and small labs.
func ListEffectNotifications(ctx context.Context, db DBTX) ([]EffectNotification, error) {
	rows, err := db.Query(ctx, effectListNotified)
	if err != nil {
		return nil, fmt.Errorf("webhook: list effect notifications: %w", err)
	}
	defer rows.Close()
	var out []EffectNotification
	for rows.Next() {
		var e EffectNotification
		if err := rows.Scan(&e.OrderRef, &e.Status); err != nil {
			return nil, fmt.Errorf("webhook: list effect notifications: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("webhook: list effect notifications: %w", err)
	}
	return out, nil
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
