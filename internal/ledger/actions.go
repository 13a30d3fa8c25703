package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Fenced is what a fenced write found once its batch ran: whether the
// lease's owner and attempt still held the row (a worker whose lease was
// taken over writes nothing).
type Fenced struct{ Matched bool }

func (f *Fenced) exec(ct pgconn.CommandTag) error {
	f.Matched = ct.RowsAffected() == 1
	return nil
}

// Completion is one fenced completion: the outcome the lease owner's
// attempt recorded for the tenant's key. Response and Error are JSON, nil
// for NULL. The queue functions write Fenced, the result, once the batch
// ran (the caller's own struct: a completion allocates nothing more).
type Completion struct {
	Tenant, Key     string
	Owner           string // the lease owner the fence matches
	Attempt         int32
	Status          string // completed, failed or review
	Response, Error *string
	Fenced
}

// QueueComplete queues c's completion. async commits it without waiting
// for its WAL flush (actionCompleteAsync): only for an outcome the
// provider can tell again by the key.
func QueueComplete(b *pgx.Batch, c *Completion, async bool) {
	query := actionComplete
	if async {
		query = actionCompleteAsync
	}
	c.Matched = false
	b.Queue(query, c.Tenant, c.Key, c.Owner, c.Attempt, c.Status, c.Response, c.Error).Exec(c.exec)
}

// QueueCompleteMany is QueueComplete for a group, as one statement over
// arrays (actionCompleteMany, or its async variant).
func QueueCompleteMany(b *pgx.Batch, cs []*Completion, async bool) {
	many := actionCompleteMany
	if async {
		many = actionCompleteManyAsync
	}
	n := len(cs)
	ts, ks, ss, ws := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	ats := make([]int32, n)
	resps, fails := make([]*string, n), make([]*string, n)
	for i, c := range cs {
		c.Matched = false
		ts[i], ks[i], ats[i], ss[i], resps[i], fails[i], ws[i] = c.Tenant, c.Key, c.Attempt, c.Status, c.Response, c.Error, c.Owner
	}
	b.Queue(many, ts, ks, ats, ss, resps, fails, ws).Query(func(rows pgx.Rows) error {
		var (
			pos int64
			set string // the async variant's set_config
		)
		dest := []any{&pos}
		if async {
			dest = append(dest, &set)
		}
		_, err := pgx.ForEachRow(rows, dest, func() error {
			if pos < 1 || pos > int64(n) {
				return fmt.Errorf("ledger: completion position %d out of range", pos)
			}
			cs[pos-1].Matched = true
			return nil
		})
		return err
	})
}

// QueueRelease queues the release of owner's lease at attempt after a
// transient failure: the row stays started, its lease cut to delay (at
// least a microsecond), its failure recorded. Fenced.
func QueueRelease(b *pgx.Batch, tenant, key, owner string, attempt int, delay time.Duration, failure string) *Fenced {
	f := &Fenced{}
	b.Queue(actionRelease, tenant, key, owner, attempt, max(micros(delay), 1), failure).Exec(f.exec)
	return f
}

// QueueHeartbeat queues the extension of owner's live lease at attempt to
// lease from now. Fenced.
func QueueHeartbeat(b *pgx.Batch, tenant, key, owner string, attempt int, lease time.Duration) *Fenced {
	f := &Fenced{}
	b.Queue(actionHeartbeat, tenant, key, owner, attempt, micros(lease)).Exec(f.exec)
	return f
}

// Taken is what a takeover or a retake found.
type Taken struct {
	Won     bool
	Attempt int             // the attempt taken
	Error   json.RawMessage // the failure the previous attempt recorded
	Age     time.Duration   // since the action was first claimed (database clock)
}

func (t *Taken) queryRow(row pgx.Row) error {
	var (
		raw  []byte // not json.RawMessage, which pgx would parse
		secs float64
	)
	err := row.Scan(&t.Attempt, &raw, &secs)
	t.Won, t.Error, t.Age = err == nil, raw, seconds(secs)
	return noRow(err)
}

// QueueTakeover queues the compare-and-set takeover by owner of the
// expired lease at attempt seen: of two takers, one wins.
func QueueTakeover(b *pgx.Batch, tenant, key string, seen int, owner string, lease time.Duration) *Taken {
	t := &Taken{}
	b.Queue(actionTakeover, tenant, key, seen, owner, micros(lease)).QueryRow(t.queryRow)
	return t
}

// QueueRetake queues owner's retake of its own released lease at attempt,
// at the end of its backoff: won while nobody took over.
func QueueRetake(b *pgx.Batch, tenant, key string, attempt int, owner string, lease time.Duration) *Taken {
	t := &Taken{}
	b.Queue(actionRetake, tenant, key, attempt, owner, micros(lease)).QueryRow(t.queryRow)
	return t
}

// TakenLease is one expired lease the reconciler took.
type TakenLease struct {
	Tenant, Key string
	Taken
}

// QueueReconcileTake queues the takeover by owner of up to limit expired
// leases of any tenant, oldest first, skipping rows another transaction
// holds; actions, when not nil, limits it to those actions (the ones the
// process has tools for).
func QueueReconcileTake(b *pgx.Batch, limit int, owner string, lease time.Duration, actions []string) *[]TakenLease {
	var out []TakenLease
	b.Queue(actionReconcileTake, limit, owner, micros(lease), actions).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				t    TakenLease
				raw  []byte
				secs float64
			)
			if err := rows.Scan(&t.Tenant, &t.Key, &t.Attempt, &raw, &secs); err != nil {
				return err
			}
			t.Won, t.Error, t.Age = true, raw, seconds(secs)
			out = append(out, t)
		}
		return rows.Err()
	})
	return &out
}

// ActionGet reads the tenant's action under key; ErrNotFound when there is
// none.
func ActionGet(ctx context.Context, db DBTX, tenant, key string) (*Action, error) {
	a, err := scanAction(db.QueryRow(ctx, actionGet, tenant, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	return a, err
}

// ActionList lists up to limit of the tenant's actions (of status, unless
// it is ""), most recently updated first.
func ActionList(ctx context.Context, db DBTX, tenant, status string, limit int) ([]*Action, error) {
	rows, err := db.Query(ctx, actionList, tenant, status, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Action, error) { return scanAction(row) })
}

// Resolution is an operator's decision on an action.
type Resolution struct {
	Tenant, Key string
	Status      string  // completed or failed
	Response    *string // JSON, stored when completed
	Reason, By  string
	Force       bool // also a started action whose lease expired
}

// ActionResolve applies r to an action in review (or, with Force, a
// started one whose lease expired), committing synchronously whatever the
// session says (intentDurable, in the same round trip), and returns the
// row as resolved; ErrNotFound when no such action is there.
func ActionResolve(ctx context.Context, db DBTX, r Resolution) (*Action, error) {
	var a *Action
	b := &pgx.Batch{}
	b.Queue(intentDurable)
	b.Queue(actionResolve, r.Tenant, r.Key, r.Status, r.Response, r.Reason, r.By, r.Force).QueryRow(func(row pgx.Row) error {
		var err error
		a, err = scanAction(row)
		return err
	})
	err := db.SendBatch(ctx, b).Close()
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	return a, err
}

// ReviewCount is how many of a tenant's actions of one name wait for an
// operator.
type ReviewCount struct {
	Tenant, Action string
	N              int64
}

// ActionReviewCounts counts the actions in review of every tenant, per
// tenant and action.
func ActionReviewCounts(ctx context.Context, db DBTX) ([]ReviewCount, error) {
	rows, err := db.Query(ctx, actionReviewCount)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ReviewCount, error) {
		var c ReviewCount
		err := row.Scan(&c.Tenant, &c.Action, &c.N)
		return c, err
	})
}
