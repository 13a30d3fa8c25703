// Package executortest is the executor's test API: what tests of other
// packages do to the ledger's tables (intents, intent_revisions, actions)
// in the place of time or of an earlier run, and what tests and the lab's
// reports (internal/lab/harness, internal/lab/restarttest) read of them, through
// the ledger's own statements, so that no test writes SQL against tables
// it does not own.
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

// Filter selects actions: each field set must match; "" (nil for Refs)
// matches anything, and an empty, non-nil Refs nothing. Tenant "" reads
// every tenant's.
type Filter struct {
	Tenant string
	Action string
	Status string   // started, completed, failed, review
	Refs   []string // intent_refs
	Owner  string   // a worker's Config.Owner: the leases its calls hold
}

func (f Filter) ledger() ledger.Filter {
	return ledger.Filter{Tenant: f.Tenant, Action: f.Action, Status: f.Status, Refs: f.Refs, Owner: f.Owner}
}

// Action is an action row in brief.
type Action struct {
	Tenant, Key, Ref, Action, Status string
	Attempt                          int
	LeaseOwner                       string
}

// Actions lists the actions f selects, oldest first. It reads every row
// f selects, without an index beyond the tenant: for tests and the lab's
// reports.
func Actions(ctx context.Context, db DBTX, f Filter) ([]Action, error) {
	bs, err := ledger.ActionListFiltered(ctx, db, f.ledger())
	if err != nil {
		return nil, err
	}
	out := make([]Action, len(bs))
	for i, b := range bs {
		out[i] = Action(b)
	}
	return out, nil
}

// Count counts the actions f selects.
func Count(ctx context.Context, db DBTX, f Filter) (int64, error) {
	return ledger.ActionCountFiltered(ctx, db, f.ledger())
}

// Intent is a frozen intent with the status of the action under its key
// ("" when there is none).
type Intent struct {
	Ref, Action, Key string
	Payload          map[string]string
	Version          int
	Status           string
}

// Intents lists the tenant's intents of action (every action's for ""),
// oldest first, each with its action's status.
func Intents(ctx context.Context, db DBTX, tenant, action string) ([]Intent, error) {
	ss, err := ledger.IntentListWithStatus(ctx, db, tenant, action)
	if err != nil {
		return nil, err
	}
	out := make([]Intent, len(ss))
	for i, s := range ss {
		out[i] = Intent{Ref: s.Ref, Action: s.Action, Key: s.Key, Payload: s.Payload.Map(), Version: s.Version, Status: s.Status}
	}
	return out, nil
}

// Aged is an intent and its action as a run age ago left them.
type Aged struct {
	Tenant, Ref, Action, Key string
	Status                   string // started, completed, failed, review
	Age                      time.Duration
}

// SeedAged records a's intent (with an empty payload) and its action, both
// created a.Age ago: settled ones finished then, a started one under a dead
// worker's lease that ran out. It stands for time passed, for tests of
// retention.
func SeedAged(ctx context.Context, db DBTX, a Aged) error {
	return ledger.ActionSeedAged(ctx, db, ledger.ID{Tenant: a.Tenant, Ref: a.Ref, Action: a.Action}, a.Key, a.Status, a.Age)
}

// Backdate moves every action's creation, and its finish when it has one,
// to age ago: the actions a test just ran, aged past a retention.
func Backdate(ctx context.Context, db DBTX, age time.Duration) error {
	return ledger.ActionBackdateAll(ctx, db, age)
}
