package webhook

import (
	"context"
	"fmt"
	"time"
)

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
	}{{logPurge, p.LogRetention, &res.Log}, {effectPurge, p.EffectRetention, &res.Effects}} {
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
