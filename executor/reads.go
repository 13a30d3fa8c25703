package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retrysafe/retrysafe/internal/ledger"
)

// Reads of the actions table for the edges: operators' pages, /metrics and
// the payment webhooks. None of them is on the hot path.

// ReviewCount is how many of a tenant's actions of one name wait for an
// operator.
type ReviewCount struct {
	Tenant, Action string
	N              int64
}

// CountReview counts the actions in review of every tenant, per tenant
// and action (the partial index actions_review_idx holds them): what an
// operator alerts on.
func CountReview(ctx context.Context, db DBTX) ([]ReviewCount, error) {
	cs, err := ledger.ActionReviewCounts(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("executor: count review: %w", err)
	}
	out := make([]ReviewCount, len(cs))
	for i, c := range cs {
		out[i] = ReviewCount(c)
	}
	return out, nil
}

// Waiting is an action in review and how long it has waited since its
// last update (database clock).
type Waiting struct {
	Row *Action
	Age time.Duration
}

// ListReview returns up to limit of the tenant's actions in review, oldest
// first: an operator's queue.
func ListReview(ctx context.Context, db DBTX, tenant string, limit int) ([]Waiting, error) {
	as, err := ledger.ActionListReview(ctx, db, tenant, limit)
	if err != nil {
		return nil, fmt.Errorf("executor: list review: %w", err)
	}
	out := make([]Waiting, len(as))
	for i, a := range as {
		out[i] = Waiting{Row: actionOf(a.Row), Age: a.Age}
	}
	return out, nil
}

// Summary is an action, or an intent's current key without one (Status
// ""), as a search finds it.
type Summary struct {
	Ref, Action, Key, Status string
	CreatedAt                time.Time
}

func summaries(ls []ledger.Listed, err error) ([]Summary, error) {
	if err != nil {
		return nil, fmt.Errorf("executor: search: %w", err)
	}
	out := make([]Summary, len(ls))
	for i, l := range ls {
		out[i] = Summary(l)
	}
	return out, nil
}

// ListByKey returns the tenant's action under key, current or amended away
// (an amendment's tombstone keeps the intent_ref), or nothing.
func ListByKey(ctx context.Context, db DBTX, tenant, key string) ([]Summary, error) {
	a, err := ledger.ActionGet(ctx, db, tenant, key)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("executor: search: %w", err)
	}
	return []Summary{{Ref: a.Ref, Action: a.Action, Key: a.Key, Status: a.Status, CreatedAt: a.CreatedAt}}, nil
}

// ListByRef returns the tenant's intents under ref, one per action, each
// with the status of the action under its current key, by action;
// CreatedAt is the intent's.
func ListByRef(ctx context.Context, db DBTX, tenant, ref string) ([]Summary, error) {
	return summaries(ledger.IntentActionListByRef(ctx, db, tenant, ref))
}

// ListByReference returns the tenant's latest 20 actions whose stored
// response names reference (a provider's charge id, a txid, an
// end-to-end id), newest first. No index serves it: it reads the tenant's
// actions, for an operator's search.
func ListByReference(ctx context.Context, db DBTX, tenant, reference string) ([]Summary, error) {
	return summaries(ledger.ActionListByReference(ctx, db, tenant, reference))
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

// CountRecent counts the tenant's actions of the last hour and day. It
// reads the tenant's rows of the last day: for an operator's page, not a
// dashboard refreshing every second.
func CountRecent(ctx context.Context, db DBTX, tenant string) (Counts, error) {
	c, err := ledger.ActionCountRecent(ctx, db, tenant)
	if err != nil {
		return Counts{}, fmt.Errorf("executor: count recent: %w", err)
	}
	return Counts(c), nil
}

// RefByPayment returns the intent_ref of the tenant's action whose stored
// response names the Stripe PaymentIntent or the charge, as tools/stripe's
// payment tool records them (migration 010's partial indexes serve it);
// ErrNotFound when none does.
func RefByPayment(ctx context.Context, db DBTX, tenant, paymentIntent, charge string) (string, error) {
	ref, err := ledger.ActionRefByPayment(ctx, db, tenant, paymentIntent, charge)
	if errors.Is(err, ledger.ErrNotFound) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("executor: ref by payment: %w", err)
	}
	return ref, nil
}
