package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrysafe/retrysafe/internal/ledger"
)

// Retention bounds.
const (
	// DefaultRetention is how long a settled action and its intent are
	// kept when PurgeParams.Retention is zero.
	DefaultRetention = 7 * 24 * time.Hour
	// MinRetention is the shortest retention Purge accepts: a key must
	// outlive the longest redelivery horizon of any upstream, or a late
	// redelivery would freeze and claim the intent anew.
	MinRetention = 24 * time.Hour
	// DefaultPurgeBatch is PurgeParams.Batch when zero.
	DefaultPurgeBatch = 1000
)

// PurgeParams tunes Purge. Zero fields take the defaults.
type PurgeParams struct {
	// Retention: completed and failed actions whose finished_at is older
	// than now() - Retention (database clock) are deleted, with the intent
	// frozen under the same key (and its revisions). Default
	// DefaultRetention; less than MinRetention is refused.
	Retention time.Duration
	// Batch is the most actions one transaction deletes. Default 1000.
	Batch int
	// Pause is slept after each batch that deleted rows, to leave I/O to
	// live traffic. A range with nothing to delete wrote nothing and is
	// followed at once: on a week of retention most ranges hold nothing
	// expired, and pausing after them made the purge of a day's rows
	// spend most of its time asleep. Default 0.
	Pause time.Duration
}

// PurgeResult counts what Purge deleted.
type PurgeResult struct {
	Actions int64 // action rows deleted (tombstones of amended intents included)
	Intents int64 // intents deleted (their revisions cascade)
	Batches int   // transactions that ran
}

// Purge deletes settled actions older than the retention and their intents,
// in batches of short transactions, without an index of its own: it walks
// the actions heap once in block ranges (a TID range scan), so each batch
// reads only its range, however many rows the table holds. It never
// touches an action that is started or in review, nor an intent whose
// current key has no settled, expired action; rows locked by a live
// transaction are skipped (SKIP LOCKED) and left for the next run.
//
// A redelivery that arrives after its intent was purged freezes and claims
// it anew; since the key is derived from the same fields it is the same key,
// so a provider that still remembers it answers with its first result. Set
// the retention beyond the longest redelivery horizon of every upstream.
func Purge(ctx context.Context, db DBTX, p PurgeParams) (PurgeResult, error) {
	var res PurgeResult
	if p.Retention == 0 {
		p.Retention = DefaultRetention
	}
	if p.Batch == 0 {
		p.Batch = DefaultPurgeBatch
	}
	switch {
	case p.Retention < MinRetention:
		return res, fmt.Errorf("%w: retention %s is shorter than the minimum %s", ErrConfig, p.Retention, MinRetention)
	case p.Batch < 1 || p.Pause < 0:
		return res, fmt.Errorf("%w: Batch must be positive and Pause not negative", ErrConfig)
	}
	blocks, perBlock, err := ledger.ActionPurgeSize(ctx, db)
	if err != nil {
		return res, fmt.Errorf("executor: purge: table size: %w", err)
	}
	// A range holds about one batch of rows, at least 8 blocks.
	step := max(8, int64(p.Batch)/max(perBlock, 1))
	conflicts := 0
	for from := int64(0); from < blocks; {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		actions, intents, err := ledger.ActionPurge(ctx, db, from, from+step, p.Retention, p.Batch)
		if err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001") && conflicts < 3 {
				// Lost a deadlock to a concurrent amendment of an old
				// intent: nothing was deleted; try the range again.
				conflicts++
				continue
			}
			return res, fmt.Errorf("executor: purge: %w", err)
		}
		conflicts = 0
		res.Batches++
		res.Actions += actions
		res.Intents += intents
		if actions < int64(p.Batch) {
			// The range is done (a full batch may have left more in it).
			from += step
		}
		if p.Pause > 0 && actions > 0 && from < blocks {
			t := time.NewTimer(p.Pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return res, ctx.Err()
			case <-t.C:
			}
		}
	}
	return res, nil
}
