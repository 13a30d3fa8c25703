package ledger

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrysafe/retrysafe/derive"
)

// The freeze and the claim, queued on a caller's batch so that they share
// its round trip and its implicit transaction (one commit) with whatever
// else it queues. Each Queue function returns where its results land:
// they are there once the batch's results are closed, and a batch sent
// again after a failure must be queued again (fresh results).

// QueuePlans queues groupPlans: every executor batch opens with it (a
// lookups group with QueueLookupPlans, which includes it), but a batch of
// fresh claims (QueueFreshClaims), whose statement needs none of it but
// the synchronous commit, which it makes itself, and a lone asynchronous
// completion's (QueueCompletePlans).
func QueuePlans(b *pgx.Batch) { b.Queue(groupPlans) }

// QueueCompleteGroupPlans queues completeGroupPlans: a completions group
// (QueueCompleteMany) opens with it instead of QueuePlans.
func QueueCompleteGroupPlans(b *pgx.Batch) { b.Queue(completeGroupPlans) }

// QueueCompletePlans queues completePlans: a lone asynchronous
// completion (QueueComplete with async) opens its batch with it.
func QueueCompletePlans(b *pgx.Batch) { b.Queue(completePlans) }

// QueueLookupPlans queues lookupPlans: a group of read-first lookups
// (QueueLookups) opens with it instead.
func QueueLookupPlans(b *pgx.Batch) { b.Queue(lookupPlans) }

// QueueDurable queues intentDurable: the batch commits synchronously
// whatever the session says.
func QueueDurable(b *pgx.Batch) { b.Queue(intentDurable) }

// Freeze is what a queued freeze found.
type Freeze struct {
	Inserted bool    // this freeze's insert wrote the row
	Intent   *Intent // the row read back after it; nil when none
}

// QueueFreeze queues the insert of row (skipped when row is nil: an
// extraction that cannot be normalized still finds a frozen intent) and
// the read-back of id's intent, as two statements: the read-back takes a
// fresh snapshot, so it sees a row a concurrent inserter committed while
// the insert waited.
func QueueFreeze(b *pgx.Batch, id ID, row *NewIntent) *Freeze {
	f := &Freeze{}
	if row != nil {
		b.Queue(intentFreeze, row.scalars()...).
			Exec(func(ct pgconn.CommandTag) error {
				f.Inserted = ct.RowsAffected() == 1
				return nil
			})
	}
	b.Queue(intentGet, id.Tenant, id.Ref, id.Action).QueryRow(func(row pgx.Row) error {
		in, err := scanIntent(row)
		if err != nil {
			return noRow(err)
		}
		f.Intent = in
		return nil
	})
	return f
}

// QueueFreezeMany is QueueFreeze for a group, in two statements (one
// insert, one read-back) instead of two each; rows[i] (nil: nothing to
// insert) goes with ids[i]. Of rows for the same intent, only the first
// can be Inserted.
func QueueFreezeMany(b *pgx.Batch, ids []ID, rows []*NewIntent) []Freeze {
	n := len(ids)
	fs := make([]Freeze, n)
	if args, ok := freezeArgs(rows); ok {
		b.Queue(intentFreezeMany, args...).Query(func(rs pgx.Rows) error {
			var t, r, a string
			_, err := pgx.ForEachRow(rs, []any{&t, &r, &a}, func() error {
				for i, row := range rows {
					if row != nil && row.Tenant == t && row.Ref == r && row.Action == a {
						fs[i].Inserted = true
						break
					}
				}
				return nil
			})
			return err
		})
	}
	ts, rs, as := idArrays(ids)
	b.Queue(intentGetMany, ts, rs, as).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var pos int64
			in, err := scanIntent(rows, &pos)
			if err != nil {
				return err
			}
			if pos < 1 || pos > int64(n) {
				return fmt.Errorf("ledger: intent read-back position %d out of range", pos)
			}
			fs[pos-1].Intent = in
		}
		return rows.Err()
	})
	return fs
}

// Claim is what a queued claim found.
type Claim struct {
	Claimed bool   // this claim inserted the started row
	Key     string // the key it claimed, read from intents in the statement
	Attempt int    // the attempt it claimed
	// Action is the action read back under the intent's current key after
	// the claim: nil when none.
	Action *Action
	row    Action // where Action points
}

// QueueClaim queues the claim of id's action under its intent's frozen key
// (read from intents in the statement, never the caller's derivation),
// leased to owner for lease, and the read-back of the action under the
// intent's current key.
func QueueClaim(b *pgx.Batch, id ID, owner string, lease time.Duration) *Claim {
	c := &Claim{}
	b.Queue(actionClaim, id.Tenant, id.Ref, id.Action, owner, micros(lease)).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&c.Key, &c.Attempt)
		c.Claimed = err == nil
		return noRow(err)
	})
	b.Queue(actionGetForIntent, id.Tenant, id.Ref, id.Action).QueryRow(func(row pgx.Row) error {
		if err := scanActionInto(row, &c.row); err != nil {
			return noRow(err)
		}
		c.Action = &c.row
		return nil
	})
	return c
}

// QueueClaimMany is QueueClaim for a group, in two statements, id i's
// claim leased to owners[i] (owners are unique to their calls). Of ids for
// the same intent, one claims; the others find its row in flight, as they
// would alone.
func QueueClaimMany(b *pgx.Batch, ids []ID, owners []string, lease time.Duration) []Claim {
	n := len(ids)
	cs := make([]Claim, n)
	ts, rs, as := idArrays(ids)
	b.Queue(actionClaimMany, ts, rs, as, owners, micros(lease)).Query(func(rows pgx.Rows) error {
		var (
			owner, key string
			attempt    int
		)
		_, err := pgx.ForEachRow(rows, []any{&owner, &key, &attempt}, func() error {
			if i := slices.Index(owners, owner); i >= 0 {
				cs[i].Claimed, cs[i].Key, cs[i].Attempt = true, key, attempt
			}
			return nil
		})
		return err
	})
	b.Queue(actionGetForIntentMany, ts, rs, as).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var pos int64
			a, err := scanAction(rows, &pos)
			if err != nil {
				return err
			}
			if pos < 1 || pos > int64(n) {
				return fmt.Errorf("ledger: action read position %d out of range", pos)
			}
			cs[pos-1].Action = a
		}
		return rows.Err()
	})
	return cs
}

// FreshClaim is what the fresh claim did for one row.
type FreshClaim struct {
	// Inserted: the statement inserted this row's intent.
	Inserted bool
	// Attempt is the attempt it claimed the intent's action at; 0 when a
	// row already held the key (an amendment's tombstone).
	Attempt int
	// Intent is the inserted row when the action was claimed, as a read
	// would return it (built from what was sent and the created_at the
	// statement returned).
	Intent *Intent
}

// QueueFreshClaims queues the fresh claim of rows: one statement that
// inserts their intents and claims the actions of the intents it inserted,
// reading nothing else back, and commits synchronously with no QueuePlans
// before it (see actionClaimNewTail). A row whose intent was already frozen (a
// redelivery, a concurrent duplicate) gets nothing: its insert conflicted.
// Row i (never nil: an extraction without field errors) is claimed for
// owners[i] (owners are unique to their calls). Of rows for the same intent, the one whose values went in gets
// the result (matched by key too); of those with the same values, the
// first (its owner is the one the action was claimed for).
func QueueFreshClaims(b *pgx.Batch, rows []*NewIntent, owners []string, lease time.Duration) []FreshClaim {
	fs := make([]FreshClaim, len(rows))
	var q *pgx.QueuedQuery
	if len(rows) == 1 && rows[0] != nil {
		q = b.Queue(intentActionClaimNew, append(rows[0].scalars(), owners[0], micros(lease))...)
	} else {
		args, _ := freezeArgs(rows)
		q = b.Queue(intentActionClaimNewMany, append(args, owners, micros(lease))...)
	}
	q.Query(func(rs pgx.Rows) error {
		var (
			attempt             int
			tenant, ref, action string
			key, owner          string
			createdAt           time.Time
		)
		// nil: syncCommitOn's column is not decoded.
		_, err := pgx.ForEachRow(rs, []any{&attempt, &tenant, &ref, &action, &key, &createdAt, &owner, nil}, func() error {
			for i, row := range rows {
				if fs[i].Inserted || row.Tenant != tenant || row.Ref != ref || row.Action != action || row.Key != key ||
					(owner != "" && owners[i] != owner) {
					continue
				}
				fs[i].Inserted, fs[i].Attempt = true, attempt
				if attempt > 0 {
					fs[i].Intent = inserted(row, createdAt)
				}
				break
			}
			return nil
		})
		return err
	})
	return fs
}

// inserted is the row intentFreezeInsert wrote for row at createdAt, as
// scanIntent would read it back: the payload in name order, as
// decodePayload gives it (derive's is already).
func inserted(row *NewIntent, createdAt time.Time) *Intent {
	byName := func(a, b derive.Value) int { return strings.Compare(a.Name, b.Name) }
	p := slices.Clone(row.Payload)
	if !slices.IsSortedFunc(p, byName) {
		slices.SortFunc(p, byName)
	}
	return &Intent{
		Tenant: row.Tenant, Ref: row.Ref, Action: row.Action, Version: row.Version, Payload: p, Key: row.Key,
		SourceRef: row.SourceRef, CreatedAt: createdAt, UpdatedAt: createdAt,
	}
}

// Found is what the read-first lookup found for one intent: both rows, or
// neither (Intent nil).
type Found struct {
	Intent *Intent
	Action *Action // the action under the intent's current key
}

// QueueLookups queues the read-first lookup of ids: one statement that
// reads, for each, its intent and the action under the intent's current
// key, and finds only those that have both (intentActionGet for one,
// intentActionGetMany for more). Reading both rows in one statement is
// what the freeze and claim do in four snapshots, so whatever it finds,
// the freeze and claim run at that instant would have found too.
func QueueLookups(b *pgx.Batch, ids []ID) []Found {
	n := len(ids)
	fs := make([]Found, n)
	var q *pgx.QueuedQuery
	if n == 1 {
		q = b.Queue(intentActionGet, ids[0].Tenant, ids[0].Ref, ids[0].Action)
	} else {
		ts, rs, as := idArrays(ids)
		q = b.Queue(intentActionGetMany, ts, rs, as)
	}
	q.Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var pos int64
			a := &Action{}
			in, err := scanIntent(intentThenAction{rows, a}, &pos)
			if err != nil {
				return err
			}
			if pos < 1 || pos > int64(n) {
				return fmt.Errorf("ledger: lookup position %d out of range", pos)
			}
			fs[pos-1] = Found{Intent: in, Action: a}
		}
		return rows.Err()
	})
	return fs
}

// QueueIntentByKey queues the read of the tenant's intent under key; the
// result is nil when there is none.
func QueueIntentByKey(b *pgx.Batch, tenant, key string) **Intent {
	var in *Intent
	b.Queue(intentGetByKey, tenant, key).QueryRow(func(row pgx.Row) error {
		var err error
		in, err = scanIntent(row)
		return noRow(err)
	})
	return &in
}

// QueueIntentsByKey queues the read of the intents under (tenants[i],
// keys[i]) in one statement; an entry stays nil when there is none.
func QueueIntentsByKey(b *pgx.Batch, tenants, keys []string) []*Intent {
	ins := make([]*Intent, len(keys))
	b.Queue(intentGetByKeyMany, tenants, keys).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var pos int64
			in, err := scanIntent(rows, &pos)
			if err != nil {
				return err
			}
			if pos < 1 || pos > int64(len(ins)) {
				return fmt.Errorf("ledger: intent position %d out of range", pos)
			}
			ins[pos-1] = in
		}
		return rows.Err()
	})
	return ins
}

// scalars is intentFreeze's $1 to $7 for row, which
// intentActionClaimNew shares.
func (row *NewIntent) scalars() []any {
	return []any{row.Tenant, row.Ref, row.Action, row.Version, encodePayload(row.Payload), row.Key, row.SourceRef}
}

// freezeArgs is intentFreezeInsert's seven parameters for the rows that
// are not nil; ok is false when there is none.
func freezeArgs(rows []*NewIntent) (args []any, ok bool) {
	var (
		ts, rs, as, ps, ks, ss []string
		vs                     []int32
	)
	for _, r := range rows {
		if r == nil {
			continue
		}
		ts, rs, as = append(ts, r.Tenant), append(rs, r.Ref), append(as, r.Action)
		vs, ps = append(vs, int32(r.Version)), append(ps, encodePayload(r.Payload))
		ks, ss = append(ks, r.Key), append(ss, r.SourceRef)
	}
	return []any{ts, rs, as, vs, ps, ks, ss}, len(ts) > 0
}

func idArrays(ids []ID) (ts, rs, as []string) {
	n := len(ids)
	ts, rs, as = make([]string, n), make([]string, n), make([]string, n)
	for i, id := range ids {
		ts[i], rs[i], as[i] = id.Tenant, id.Ref, id.Action
	}
	return ts, rs, as
}
