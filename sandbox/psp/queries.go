package psp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Executor runs statements; *pgxpool.Pool and pgx.Tx both satisfy it, so
// a charge can be written inside the idempotency middleware's transaction.
type Executor interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ErrNotFound: no such charge.
var ErrNotFound = errors.New("psp: not found")

const chargeColumns = `id, amount_cents, pix_key, pix_key_type, description, status, idempotency_key,
	extract(epoch FROM created_at)::bigint`

func scanCharge(row pgx.Row) (Charge, error) {
	c := Charge{Object: "pix_charge"}
	err := row.Scan(&c.ID, &c.AmountCents, &c.PixKey, &c.PixKeyType, &c.Description, &c.Status, &c.IdempotencyKey, &c.Created)
	return c, err
}

// ChargeInsert writes a paid charge.
func ChargeInsert(ctx context.Context, e Executor, merchant, id, key string, in ChargeRequest) (Charge, error) {
	c, err := scanCharge(e.QueryRow(ctx, `
		INSERT INTO charges (merchant_id, id, amount_cents, pix_key, pix_key_type, description, status, idempotency_key)
		VALUES ($1, $2, $3, $4, $5, $6, 'paid', $7)
		RETURNING `+chargeColumns,
		merchant, id, in.AmountCents, in.PixKey, in.PixKeyType, in.Description, key))
	if err != nil {
		return Charge{}, fmt.Errorf("psp: insert charge: %w", err)
	}
	return c, nil
}

// ChargeGetByKey returns the newest charge the merchant created with key.
func ChargeGetByKey(ctx context.Context, e Executor, merchant, key string) (Charge, error) {
	c, err := scanCharge(e.QueryRow(ctx, `
		SELECT `+chargeColumns+` FROM charges
		WHERE merchant_id = $1 AND idempotency_key = $2
		ORDER BY seq DESC LIMIT 1`, merchant, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return Charge{}, ErrNotFound
	}
	if err != nil {
		return Charge{}, fmt.Errorf("psp: charge by key: %w", err)
	}
	return c, nil
}

// ChargeGet returns one charge by id.
func ChargeGet(ctx context.Context, e Executor, merchant, id string) (Charge, error) {
	c, err := scanCharge(e.QueryRow(ctx, `SELECT `+chargeColumns+` FROM charges WHERE merchant_id = $1 AND id = $2`, merchant, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Charge{}, ErrNotFound
	}
	if err != nil {
		return Charge{}, fmt.Errorf("psp: charge: %w", err)
	}
	return c, nil
}

// ChargeList returns every charge of the merchant, newest first.
func ChargeList(ctx context.Context, e Executor, merchant string) ([]Charge, error) {
	rows, err := e.Query(ctx, `SELECT `+chargeColumns+` FROM charges WHERE merchant_id = $1 ORDER BY seq DESC`, merchant)
	if err != nil {
		return nil, fmt.Errorf("psp: list charges: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Charge, error) { return scanCharge(r) })
	if err != nil {
		return nil, fmt.Errorf("psp: list charges: %w", err)
	}
	if out == nil {
		out = []Charge{}
	}
	return out, nil
}

// DeliveryInsert queues an event for the webhook loop.
func DeliveryInsert(ctx context.Context, e Executor, merchant, eventID, eventType, url string, payload []byte) error {
	_, err := e.Exec(ctx, `
		INSERT INTO webhook_deliveries (merchant_id, event_id, event_type, url, payload)
		VALUES ($1, $2, $3, $4, $5)`, merchant, eventID, eventType, url, string(payload))
	if err != nil {
		return fmt.Errorf("psp: queue webhook: %w", err)
	}
	return nil
}

// Delivery is a claimed webhook delivery.
type Delivery struct {
	Merchant string
	EventID  string
	URL      string
	Payload  []byte
	Attempt  int32 // this attempt's number, also its fencing token
}

// DeliveryClaim takes up to limit due deliveries and pushes their next
// attempt claimFor into the future, in one statement that commits at once:
// no transaction stays open across the HTTP call, a concurrent loop skips
// these rows, and a process that dies mid-send leaves them due again after
// claimFor.
func DeliveryClaim(ctx context.Context, e Executor, limit int, claimFor time.Duration) ([]Delivery, error) {
	rows, err := e.Query(ctx, `
		WITH due AS (
			SELECT merchant_id, event_id FROM webhook_deliveries
			WHERE status = 'pending' AND next_attempt_at <= now()
			ORDER BY next_attempt_at
			LIMIT $1
			FOR UPDATE SKIP LOCKED)
		UPDATE webhook_deliveries d
		SET attempts = d.attempts + 1, next_attempt_at = now() + $2::interval
		FROM due
		WHERE d.merchant_id = due.merchant_id AND d.event_id = due.event_id
		RETURNING d.merchant_id, d.event_id, d.url, d.payload, d.attempts`, limit, claimFor)
	if err != nil {
		return nil, fmt.Errorf("psp: claim deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Delivery, error) {
		var d Delivery
		var payload string
		err := r.Scan(&d.Merchant, &d.EventID, &d.URL, &payload, &d.Attempt)
		d.Payload = []byte(payload)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("psp: claim deliveries: %w", err)
	}
	return out, nil
}

// DeliveryDone records a 2xx answer to attempt.
func DeliveryDone(ctx context.Context, e Executor, d Delivery, status int) error {
	_, err := e.Exec(ctx, `
		UPDATE webhook_deliveries
		SET status = 'delivered', delivered_at = now(), last_status = $4, last_error = NULL
		WHERE merchant_id = $1 AND event_id = $2 AND attempts = $3 AND status = 'pending'`,
		d.Merchant, d.EventID, d.Attempt, status)
	if err != nil {
		return fmt.Errorf("psp: delivery done: %w", err)
	}
	return nil
}

// DeliveryRetry records a failed attempt: due again after backoff, or
// failed for good once maxAttempts attempts were made.
func DeliveryRetry(ctx context.Context, e Executor, d Delivery, status int, errText string, backoff time.Duration, maxAttempts int) error {
	_, err := e.Exec(ctx, `
		UPDATE webhook_deliveries
		SET status = CASE WHEN attempts >= $6 THEN 'failed' ELSE 'pending' END,
		    next_attempt_at = now() + $5::interval,
		    last_status = nullif($4, 0), last_error = $7
		WHERE merchant_id = $1 AND event_id = $2 AND attempts = $3 AND status = 'pending'`,
		d.Merchant, d.EventID, d.Attempt, status, backoff, maxAttempts, errText)
	if err != nil {
		return fmt.Errorf("psp: delivery retry: %w", err)
	}
	return nil
}
