package ledger

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
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

// ActionSeedAged records id's intent (an empty payload) under key and its
// action in status, both created age ago, as a run that long ago left
// them: settled ones finished then, a started one under a lease that ran
// out.
func ActionSeedAged(ctx context.Context, db DBTX, id ID, key, status string, age time.Duration) error {
	if _, err := db.Exec(ctx, intentInsertAged, id.Tenant, id.Ref, id.Action, age.Microseconds(), key); err != nil {
		return err
	}
	_, err := db.Exec(ctx, actionInsertAged, id.Tenant, key, id.Ref, id.Action, status, age.Microseconds())
	return err
}

// ActionBackdateAll moves every action's creation, and its finish when it
// has one, to age ago.
func ActionBackdateAll(ctx context.Context, db DBTX, age time.Duration) error {
	_, err := db.Exec(ctx, actionBackdateAll, age.Microseconds())
	return err
}

// Filter selects actions: each field set must match; "" (nil for Refs)
// matches anything, and an empty, non-nil Refs nothing.
type Filter struct {
	Tenant, Action, Status string
	Refs                   []string
	Owner                  string // the worker's: its calls' lease owners start with it and "/"
}

func (f Filter) args() []any { return []any{f.Tenant, f.Action, f.Status, f.Refs, f.Owner} }

// Brief is an action row in brief.
type Brief struct {
	Tenant, Key, Ref, Action, Status string
	Attempt                          int
	LeaseOwner                       string
}

// ActionListFiltered lists the actions f selects, oldest first.
func ActionListFiltered(ctx context.Context, db DBTX, f Filter) ([]Brief, error) {
	rows, err := db.Query(ctx, actionListFiltered, f.args()...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Brief, error) {
		var b Brief
		err := row.Scan(&b.Tenant, &b.Key, &b.Ref, &b.Action, &b.Status, &b.Attempt, &b.LeaseOwner)
		return b, err
	})
}

// ActionCountFiltered counts the actions f selects.
func ActionCountFiltered(ctx context.Context, db DBTX, f Filter) (int64, error) {
	var n int64
	err := db.QueryRow(ctx, actionCountFiltered, f.args()...).Scan(&n)
	return n, err
}

// Standing is an intent with the status of the action under its key
// ("" for none).
type Standing struct {
	Intent
	Status string
}

// IntentListWithStatus lists the tenant's intents of action (every
// action's for ""), oldest first, each with its action's status.
func IntentListWithStatus(ctx context.Context, db DBTX, tenant, action string) ([]Standing, error) {
	rows, err := db.Query(ctx, intentListWithStatus, tenant, action)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Standing, error) {
		var (
			s   Standing
			raw []byte
		)
		if err := row.Scan(&s.Ref, &s.Action, &s.Key, &raw, &s.Version, &s.Status); err != nil {
			return s, err
		}
		p, err := decodePayload(raw)
		s.Tenant, s.Payload = tenant, p
		return s, err
	})
}
