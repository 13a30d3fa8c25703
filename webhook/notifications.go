package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// payment_notifications (migration 005): the outbox rows of the customer
// notifications applied effects owe. Every statement is scoped by tenant.

// notificationInsert writes the outbox row of an applied effect: pending
// with its frozen key, or failed at once when nothing could be frozen.
const notificationInsert = `INSERT INTO payment_notifications
	(tenant_id, effect_key, order_ref, action, intent_ref, idem_key, status, error_code)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

// notificationSettle records how the relay's execution ended. A sent row
// never changes again: a late, replayed or duplicate job cannot demote it.
// "Not sent" is sent_at IS NULL (the same rows, by the table's CHECK):
// status <> 'sent' would match the predicate of
// payment_notifications_open_idx, and a plan cached while the table was
// new read the tenant's open notifications through it instead of the key.
const notificationSettle = `UPDATE payment_notifications
SET status = $3, attempt = greatest(attempt, $4), error_code = $5,
	sent_at = CASE WHEN $3 = 'sent' THEN now() END, updated_at = now()
WHERE tenant_id = $1 AND effect_key = $2 AND sent_at IS NULL`

// notificationColumns is what every notification read returns, in
// scanNotification's order.
const notificationColumns = `tenant_id, effect_key, order_ref, action, coalesce(intent_ref, ''), coalesce(idem_key, ''),
	status, attempt, coalesce(error_code, ''), created_at, updated_at, sent_at`

// notificationGet reads one notification.
const notificationGet = `SELECT ` + notificationColumns + ` FROM payment_notifications
WHERE tenant_id = $1 AND effect_key = $2`

// notificationList lists a tenant's notifications, oldest change first:
// with status failed or review it is the review queue; pending rows older
// than a few minutes are stuck.
const notificationList = `SELECT ` + notificationColumns + ` FROM payment_notifications
WHERE tenant_id = $1 AND ($2 = '' OR status = $2)
ORDER BY updated_at, effect_key LIMIT $3`

// Notification statuses (the outbox row's).
const (
	NotifyPending = "pending"
	NotifySent    = "sent"
	NotifyFailed  = "failed" // definitive refusal, or nothing could be frozen
	NotifyReview  = "review" // the executor gave up deciding; an operator resolves the action
)

// Notification is a stored outbox row.
type Notification struct {
	Tenant    string
	EffectKey string
	OrderRef  string
	Action    string
	IntentRef string // "" when nothing could be frozen
	Key       string // the frozen intent's idempotency key
	Status    string
	Attempt   int
	ErrorCode string
	CreatedAt time.Time
	UpdatedAt time.Time
	SentAt    *time.Time
}

// insertNotification writes n's outbox row. An empty IntentRef and Key
// (nothing frozen) and ErrorCode are stored as NULL.
func insertNotification(ctx context.Context, tx DBTX, n Notification) error {
	_, err := tx.Exec(ctx, notificationInsert, n.Tenant, n.EffectKey, n.OrderRef, n.Action,
		nullable(n.IntentRef), nullable(n.Key), n.Status, nullable(n.ErrorCode))
	return err
}

// settleNotification records how the relay's execution of the effect's
// notification ended, unless the row is sent already.
func settleNotification(ctx context.Context, db DBTX, args NotifyArgs, status string, attempt int, code string) error {
	_, err := db.Exec(ctx, notificationSettle, args.Tenant, args.EffectKey, status, attempt, nullable(code))
	return err
}

func scanNotification(row pgx.Row) (*Notification, error) {
	var n Notification
	if err := row.Scan(&n.Tenant, &n.EffectKey, &n.OrderRef, &n.Action, &n.IntentRef, &n.Key, &n.Status, &n.Attempt,
		&n.ErrorCode, &n.CreatedAt, &n.UpdatedAt, &n.SentAt); err != nil {
		return nil, err
	}
	return &n, nil
}

// GetNotification reads the notification of the tenant's effect.
func GetNotification(ctx context.Context, db DBTX, tenant, effectKey string) (*Notification, error) {
	n, err := scanNotification(db.QueryRow(ctx, notificationGet, tenant, effectKey))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: notification", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("webhook: notification: %w", err)
	}
	return n, nil
}

// ListNotifications lists the tenant's notifications, least recently
// changed first.
func ListNotifications(ctx context.Context, db DBTX, p ListParams) ([]*Notification, error) {
	if p.Tenant == "" {
		return nil, fmt.Errorf("%w: tenant is required", ErrInvalid)
	}
	rows, err := db.Query(ctx, notificationList, p.Tenant, p.Status, p.limit())
	if err != nil {
		return nil, fmt.Errorf("webhook: list notifications: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Notification, error) { return scanNotification(r) })
	if err != nil {
		return nil, fmt.Errorf("webhook: list notifications: %w", err)
	}
	return out, nil
}
