package ledger

import (
	"context"
	"encoding/json"
)

// What executor/executortest, the executor's test API, does to the tables
// in a test's place. Nothing of the engine calls these.

// ActionLeaseExpireAll ends every live lease now, as a crashed worker's
// leases end once they run out, and returns how many it ended.
func ActionLeaseExpireAll(ctx context.Context, db DBTX) (int64, error) {
	ct, err := db.Exec(ctx, actionLeaseExpireAll)
	return ct.RowsAffected(), err
}

// ActionInsertCompleted records the tenant's action under key, for ref and
// action, as completed with response, without an intent.
func ActionInsertCompleted(ctx context.Context, db DBTX, id ID, key string, response json.RawMessage) error {
	_, err := db.Exec(ctx, actionInsertCompleted, id.Tenant, key, id.Ref, id.Action, string(response))
	return err
}
