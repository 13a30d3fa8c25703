package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

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
	o, err := scanOrder(db.QueryRow(ctx, OrderGet, tenant, ref))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: order %q", ErrNotFound, ref)
	}
	if err != nil {
		return nil, fmt.Errorf("webhook: order: %w", err)
	}
	return o, nil
}

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
	n, err := scanNotification(db.QueryRow(ctx, NotificationGet, tenant, effectKey))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: notification", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("webhook: notification: %w", err)
	}
	return n, nil
}

// ListParams filters the List functions.
type ListParams struct {
	Tenant string // required
	// Status filters ListNotifications ("" for all; failed and review are
	// the review queue).
	Status string
	// OrderRef filters ListStaleEvents, EventID ListDeliveries.
	OrderRef string
	EventID  string
	Limit    int // default 100
}

func (p ListParams) limit() int {
	if p.Limit <= 0 {
		return 100
	}
	return p.Limit
}

// ListNotifications lists the tenant's notifications, least recently
// changed first.
func ListNotifications(ctx context.Context, db DBTX, p ListParams) ([]*Notification, error) {
	if p.Tenant == "" {
		return nil, fmt.Errorf("%w: tenant is required", ErrInvalid)
	}
	rows, err := db.Query(ctx, NotificationList, p.Tenant, p.Status, p.limit())
	if err != nil {
		return nil, fmt.Errorf("webhook: list notifications: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Notification, error) { return scanNotification(r) })
	if err != nil {
		return nil, fmt.Errorf("webhook: list notifications: %w", err)
	}
	return out, nil
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
	rows, err := db.Query(ctx, StaleEventList, p.Tenant, p.OrderRef, p.limit())
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

// Delivery is one logged delivery attempt.
type Delivery struct {
	Tenant     string
	ID         int64
	Provider   string
	EventID    string
	EventType  string
	EffectKey  string
	Verdict    Verdict
	Reason     string
	HTTPStatus int
	ReceivedAt time.Time
}

// ListDeliveries lists the tenant's logged delivery attempts, oldest first.
func ListDeliveries(ctx context.Context, db DBTX, p ListParams) ([]*Delivery, error) {
	if p.Tenant == "" {
		return nil, fmt.Errorf("%w: tenant is required", ErrInvalid)
	}
	rows, err := db.Query(ctx, LogList, p.Tenant, p.EventID, p.limit())
	if err != nil {
		return nil, fmt.Errorf("webhook: list deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Delivery, error) {
		var d Delivery
		var status int16
		err := r.Scan(&d.Tenant, &d.ID, &d.Provider, &d.EventID, &d.EventType, &d.EffectKey, &d.Verdict, &d.Reason, &status, &d.ReceivedAt)
		d.HTTPStatus = int(status)
		return &d, err
	})
	if err != nil {
		return nil, fmt.Errorf("webhook: list deliveries: %w", err)
	}
	return out, nil
}

// PurgeParams bounds what Purge keeps.
type PurgeParams struct {
	// LogRetention keeps delivery log rows this long. Default 30 days.
	LogRetention time.Duration
	// EffectRetention keeps effects this long; it must exceed the longest
	// redelivery horizon of any provider (Stripe retries for 3 days).
	// Default 30 days. Effects whose notification is not sent are kept.
	EffectRetention time.Duration
	// Batch is how many rows one statement deletes. Default 1000.
	Batch int
}

// PurgeResult counts what Purge deleted.
type PurgeResult struct {
	Log     int64
	Effects int64
}

// Purge deletes delivery log rows and effects past their retention, in
// batches (short statements, no long lock), on the database clock.
func Purge(ctx context.Context, db DBTX, p PurgeParams) (PurgeResult, error) {
	if p.LogRetention == 0 {
		p.LogRetention = DefaultPurgeRetention
	}
	if p.EffectRetention == 0 {
		p.EffectRetention = DefaultPurgeRetention
	}
	if p.Batch <= 0 {
		p.Batch = DefaultPurgeBatch
	}
	if p.LogRetention < 0 || p.EffectRetention < 0 {
		return PurgeResult{}, fmt.Errorf("%w: retention must be positive", ErrInvalid)
	}
	var res PurgeResult
	for _, step := range []struct {
		sql       string
		retention time.Duration
		n         *int64
	}{{LogPurge, p.LogRetention, &res.Log}, {EffectPurge, p.EffectRetention, &res.Effects}} {
		for {
			ct, err := db.Exec(ctx, step.sql, step.retention.Microseconds(), p.Batch)
			if err != nil {
				return res, fmt.Errorf("webhook: purge: %w", err)
			}
			*step.n += ct.RowsAffected()
			if ct.RowsAffected() < int64(p.Batch) {
				break
			}
		}
	}
	return res, nil
}
