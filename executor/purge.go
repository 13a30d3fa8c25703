package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
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

// ActionPurgeSize reads the size of actions in blocks and the planner's
// estimate of rows per block (0 before the first ANALYZE).
const ActionPurgeSize = `SELECT pg_relation_size('actions'::regclass) / current_setting('block_size')::bigint,
	coalesce((SELECT (reltuples / nullif(relpages, 0))::bigint FROM pg_class
		WHERE oid = 'actions'::regclass AND reltuples > 0), 0)`

// ActionPurge deletes up to $4 settled actions finished more than $3
// microseconds ago (database clock) among the heap blocks [$1, $2), and the
// intents frozen under their keys, in one statement. The TID range bounds
// the scan; FOR UPDATE SKIP LOCKED leaves rows a live transaction holds;
// ctid = ANY(ARRAY(...)) keeps the delete a TID scan (ctid IN (SELECT ...)
// may be planned as a join over the whole table).
const ActionPurge = `WITH victims AS (
	SELECT ctid FROM actions
	WHERE ctid >= format('(%s,0)', $1::bigint)::tid AND ctid < format('(%s,0)', $2::bigint)::tid
		AND status IN ('completed', 'failed')
		AND finished_at < now() - $3::bigint * interval '1 microsecond'
	LIMIT $4
	FOR UPDATE SKIP LOCKED
), gone AS (
	DELETE FROM actions WHERE ctid = ANY (ARRAY(SELECT ctid FROM victims))
	RETURNING tenant_id, idem_key
), gone_intents AS (
	DELETE FROM intents i USING gone g
	WHERE i.tenant_id = g.tenant_id AND i.idem_key = g.idem_key
	RETURNING 1
)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM gone_intents)`

// PurgeParams tunes Purge. Zero fields take the defaults.
type PurgeParams struct {
	// Retention: completed and failed actions whose finished_at is older
	// than now() - Retention (database clock) are deleted, with the intent
	// frozen under the same key (and its revisions). Default
	// DefaultRetention; less than MinRetention is refused.
	Retention time.Duration
	// Batch is the most actions one transaction deletes. Default 1000.
	Batch int
	// Pause is slept between batches, to leave I/O to live traffic.
	// Default 0.
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
	var blocks, perBlock int64
	if err := db.QueryRow(ctx, ActionPurgeSize).Scan(&blocks, &perBlock); err != nil {
		return res, fmt.Errorf("executor: purge: table size: %w", err)
	}
	// A range holds about one batch of rows, at least 8 blocks.
	step := max(8, int64(p.Batch)/max(perBlock, 1))
	retention := p.Retention.Microseconds()
	conflicts := 0
	for from := int64(0); from < blocks; {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		var actions, intents int64
		err := db.QueryRow(ctx, ActionPurge, from, from+step, retention, p.Batch).Scan(&actions, &intents)
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
		if p.Pause > 0 && from < blocks {
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
