package ledger

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Aged is an action with how long it has waited since its last update
// (database clock).
type Aged struct {
	Row *Action
	Age time.Duration
}

// ActionListReview lists up to limit of the tenant's actions in review,
// oldest first.
func ActionListReview(ctx context.Context, db DBTX, tenant string, limit int) ([]Aged, error) {
	rows, err := db.Query(ctx, actionListReview, tenant, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Aged, error) {
		var secs float64
		a, err := scanAction(row, &secs)
		return Aged{Row: a, Age: seconds(secs)}, err
	})
}

// Listed is an action, or an intent's current key without one (Status
// ""), as a search lists it.
type Listed struct {
	Ref, Action, Key, Status string
	CreatedAt                time.Time
}

func collectListed(rows pgx.Rows, err error) ([]Listed, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Listed, error) {
		var l Listed
		err := row.Scan(&l.Ref, &l.Action, &l.Key, &l.Status, &l.CreatedAt)
		return l, err
	})
}

// IntentActionListByRef lists the tenant's intents under ref (one per
// action), each with the status of the action under its key, by action;
// CreatedAt is the intent's.
func IntentActionListByRef(ctx context.Context, db DBTX, tenant, ref string) ([]Listed, error) {
	return collectListed(db.Query(ctx, intentActionListByRef, tenant, ref))
}

// ActionListByReference lists the tenant's latest 20 actions whose stored
// response names reference as its id, txid or end_to_end_id, newest
// first. No index serves it.
func ActionListByReference(ctx context.Context, db DBTX, tenant, reference string) ([]Listed, error) {
	return collectListed(db.Query(ctx, actionListByReference, tenant, reference))
}

// Counts is what the actions table records of a tenant over the last hour
// and day.
type Counts struct {
	ClaimedHour, ClaimedDay     int64 // actions first claimed
	CompletedHour, CompletedDay int64
	FailedHour, FailedDay       int64
	RetriedHour, RetriedDay     int64 // more than one attempt, by last update
	ReviewHour, ReviewDay       int64 // put in review and still there, by last update
	InReview                    int64 // in review now
	ResolvedHour, ResolvedDay   int64 // settled by an operator
}

// ActionCountRecent counts the tenant's actions of the last hour and day.
// It reads the tenant's rows of the last day: for an operator's page.
func ActionCountRecent(ctx context.Context, db DBTX, tenant string) (Counts, error) {
	var c Counts
	err := db.QueryRow(ctx, actionCountRecent, tenant).Scan(&c.ClaimedHour, &c.ClaimedDay, &c.CompletedHour, &c.CompletedDay,
		&c.FailedHour, &c.FailedDay, &c.RetriedHour, &c.RetriedDay, &c.ReviewHour, &c.ReviewDay, &c.InReview,
		&c.ResolvedHour, &c.ResolvedDay)
	return c, err
}

// ActionRefByPayment returns the intent_ref of the tenant's action whose
// stored response names the Stripe PaymentIntent or the charge;
// ErrNotFound when none does.
func ActionRefByPayment(ctx context.Context, db DBTX, tenant, paymentIntent, charge string) (string, error) {
	var ref string
	err := db.QueryRow(ctx, actionRefByPayment, tenant, paymentIntent, charge).Scan(&ref)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	return ref, err
}

// ActionPurgeSize returns the size of actions in heap blocks and the
// planner's estimate of rows per block (0 before the first ANALYZE).
func ActionPurgeSize(ctx context.Context, db DBTX) (blocks, perBlock int64, err error) {
	err = db.QueryRow(ctx, actionPurgeSize).Scan(&blocks, &perBlock)
	return blocks, perBlock, err
}

// ActionPurge deletes, among the heap blocks [from, to) of actions, up to
// limit completed or failed actions finished more than retention ago
// (database clock), skipping rows a live transaction holds, and the
// intents frozen under their keys (their revisions cascade), in one
// statement; it returns how many of each it deleted.
func ActionPurge(ctx context.Context, db DBTX, from, to int64, retention time.Duration, limit int) (actions, intents int64, err error) {
	err = db.QueryRow(ctx, actionPurge, from, to, micros(retention), limit).Scan(&actions, &intents)
	return actions, intents, err
}
