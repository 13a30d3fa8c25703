package webhook

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
)

// payment_webhook_log (migration 005): every delivery attempt that reached
// a verdict, without its payload. Every statement is scoped by tenant but
// the purge, which walks every tenant's old rows.

// logInsert records one delivery attempt (never its payload).
const logInsert = `INSERT INTO payment_webhook_log
	(tenant_id, provider, event_id, event_type, effect_key, verdict, reason, http_status)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

// logInsertAt records one delivery attempt received at $9.
const logInsertAt = `INSERT INTO payment_webhook_log
	(tenant_id, provider, event_id, event_type, effect_key, verdict, reason, http_status, received_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`

// logList lists a tenant's delivery attempts of one event ("" for all),
// oldest first.
const logList = `SELECT tenant_id, id, provider, coalesce(event_id, ''), coalesce(event_type, ''), coalesce(effect_key, ''),
	verdict, coalesce(reason, ''), http_status, received_at
FROM payment_webhook_log WHERE tenant_id = $1 AND ($2 = '' OR event_id = $2)
ORDER BY id LIMIT $3`

// logCountDuplicates counts a tenant's duplicate deliveries of the last
// hour and the last day.
const logCountDuplicates = `SELECT
	count(*) FILTER (WHERE verdict = 'duplicate' AND received_at >= now() - interval '1 hour'),
	count(*) FILTER (WHERE verdict = 'duplicate')
FROM payment_webhook_log
WHERE tenant_id = $1 AND received_at >= now() - interval '1 day'`

// logCountVerdicts counts a tenant's deliveries by verdict.
const logCountVerdicts = `SELECT verdict, count(*) FROM payment_webhook_log WHERE tenant_id = $1 GROUP BY verdict`

// logPurge deletes a batch of delivery log rows received more than $1
// microseconds ago (database clock).
const logPurge = `DELETE FROM payment_webhook_log WHERE (tenant_id, id) IN (
	SELECT tenant_id, id FROM payment_webhook_log
	WHERE received_at < now() - $1::bigint * interval '1 microsecond'
	ORDER BY received_at LIMIT $2)`

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

// insertLog writes d's log row; its empty text fields are stored as NULL.
func insertLog(ctx context.Context, db DBTX, d Delivery) error {
	_, err := db.Exec(ctx, logInsert, d.Tenant, d.Provider, nullable(d.EventID), nullable(d.EventType), nullable(d.EffectKey),
		d.Verdict, nullable(d.Reason), d.HTTPStatus)
	return err
}

// RecordDelivery writes d as a delivery log row received at d.ReceivedAt
// (now when zero): for tests and tools that plant a log to purge or show.
// The handler logs its own deliveries as it answers them.
func RecordDelivery(ctx context.Context, db DBTX, d Delivery) error {
	if d.ReceivedAt.IsZero() {
		return insertLog(ctx, db, d)
	}
	_, err := db.Exec(ctx, logInsertAt, d.Tenant, d.Provider, nullable(d.EventID), nullable(d.EventType), nullable(d.EffectKey),
		d.Verdict, nullable(d.Reason), d.HTTPStatus, d.ReceivedAt)
	if err != nil {
		return fmt.Errorf("webhook: record delivery: %w", err)
	}
	return nil
}

// logResult writes the log row of a delivery answered 200.
func logResult(ctx context.Context, db DBTX, res *Result) error {
	return insertLog(ctx, db, Delivery{Tenant: res.Tenant, Provider: res.Provider, EventID: res.EventID, EventType: res.EventType,
		EffectKey: res.EffectKey, Verdict: res.Verdict, Reason: res.Reason, HTTPStatus: http.StatusOK})
}

// ListDeliveries lists the tenant's logged delivery attempts, oldest first.
func ListDeliveries(ctx context.Context, db DBTX, p ListParams) ([]*Delivery, error) {
	if p.Tenant == "" {
		return nil, fmt.Errorf("%w: tenant is required", ErrInvalid)
	}
	rows, err := db.Query(ctx, logList, p.Tenant, p.EventID, p.limit())
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

// CountDuplicates counts the tenant's duplicate deliveries (absorbed
// redeliveries) of the last hour and the last day.
func CountDuplicates(ctx context.Context, db DBTX, tenant string) (hour, day int64, err error) {
	if err := db.QueryRow(ctx, logCountDuplicates, tenant).Scan(&hour, &day); err != nil {
		return 0, 0, fmt.Errorf("webhook: count duplicates: %w", err)
	}
	return hour, day, nil
}

// CountVerdicts counts the tenant's logged deliveries by verdict.
func CountVerdicts(ctx context.Context, db DBTX, tenant string) (map[Verdict]int, error) {
	rows, err := db.Query(ctx, logCountVerdicts, tenant)
	if err != nil {
		return nil, fmt.Errorf("webhook: count verdicts: %w", err)
	}
	defer rows.Close()
	out := map[Verdict]int{}
	for rows.Next() {
		var v Verdict
		var n int
		if err := rows.Scan(&v, &n); err != nil {
			return nil, fmt.Errorf("webhook: count verdicts: %w", err)
		}
		out[v] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("webhook: count verdicts: %w", err)
	}
	return out, nil
}
