// Package executortest is the executor's test API: what tests of other
// packages do to the ledger's tables (intents, intent_revisions, actions)
// in the place of time or of an earlier run, through the ledger's own
// statements, so that no test writes SQL against tables it does not own.
//
// # Imports
//
// executortest imports internal/ledger and pgx only. It is lab machinery
// (internal/importrule places it with the test packages): no engine
// package imports it outside its tests.
package executortest

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/internal/ledger"
)

// DBTX is satisfied by *pgxpool.Pool, *pgx.Conn and pgx.Tx.
type DBTX = ledger.DBTX

// ExpireLeases ends every live lease of every tenant now: it stands for
// the time a crashed worker's leases take to run out, so that the next
// caller or the reconciler takes them over. It returns how many it ended.
func ExpireLeases(ctx context.Context, db DBTX) (int64, error) {
	return ledger.ActionLeaseExpireAll(ctx, db)
}

// Claim claims the action of the frozen intent (tenant, ref, action) for
// owner, leased for lease, as a worker's claim would, and reports whether
// it did (false: an action is already there). The intent must be frozen.
func Claim(ctx context.Context, db DBTX, tenant, ref, action, owner string, lease time.Duration) (bool, error) {
	b := &pgx.Batch{}
	c := ledger.QueueClaim(b, ledger.ID{Tenant: tenant, Ref: ref, Action: action}, owner, lease)
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return false, err
	}
	return c.Claimed, nil
}

// Completed is an action an earlier run recorded as completed.
type Completed struct {
	Tenant, Key, Ref, Action string
	Response                 json.RawMessage
}

// InsertCompleted records a as completed, with no intent behind it: what
// the tables hold of a charge made before the test looks for it.
func InsertCompleted(ctx context.Context, db DBTX, a Completed) error {
	return ledger.ActionInsertCompleted(ctx, db, ledger.ID{Tenant: a.Tenant, Ref: a.Ref, Action: a.Action}, a.Key, a.Response)
}
