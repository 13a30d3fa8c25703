package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrysafe/retrysafe/derive"
)

// DBTX is what every function needs: *pgxpool.Pool, *pgx.Conn and pgx.Tx
// all satisfy it (and so do intent.DBTX and executor.DBTX, the same
// methods). Given a pool, a statement commits on its own; given a
// transaction, it joins it.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// ErrNotFound: the row asked for is not there. Callers say which row in
// their own sentinel (intent.ErrNotFound, executor.ErrNotFound).
var ErrNotFound = errors.New("ledger: no such row")

// SupersededClass is the error class of the tombstone action an amendment
// writes under a replaced key (see ActionSupersede).
const SupersededClass = "superseded"

// ID names an intent: (tenant, intent_ref, action), its primary key.
type ID struct{ Tenant, Ref, Action string }

// Intent is a row of intents.
type Intent struct {
	Tenant    string
	Ref       string
	Action    string
	Version   int            // derive rule version it was frozen with
	Payload   derive.Payload // normalized fields, in name order
	Key       string         // the idempotency key
	SourceRef string         // transport id that froze it (audit only)
	Revision  int            // 0 until amended
	CreatedAt time.Time
	UpdatedAt time.Time
}

// NewIntent is an intent to freeze: a normalized, keyed extraction.
type NewIntent struct {
	ID
	Version   int
	Payload   derive.Payload
	Key       string
	SourceRef string
}

// Revision is a row of intent_revisions: one amendment of an intent.
type Revision struct {
	Revision   int // the revision this amendment replaced
	OldVersion int
	OldPayload derive.Payload
	OldKey     string
	NewKey     string
	Reason     string
	AmendedBy  string
	Overrode   string // the old key's action status gone past by override, "" when none
	CreatedAt  time.Time
}

// Action is a row of actions, with its lease read against the database's
// clock.
type Action struct {
	Tenant     string
	Key        string
	Ref        string
	Action     string
	Status     string // started, completed, failed, review
	Attempt    int
	LeaseOwner string
	LeaseUntil *time.Time
	Expired    bool          // started and lease_until <= now()
	LeaseLeft  time.Duration // started: lease_until - now(), <= 0 when expired
	Response   json.RawMessage
	Error      json.RawMessage // the stored failure, as the executor wrote it
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time
}

// scanIntent scans an intent row; lead are destinations for columns the
// query puts before intentColumns (a position).
func scanIntent(row pgx.Row, lead ...any) (*Intent, error) {
	var (
		in  Intent
		raw []byte
	)
	if err := row.Scan(append(lead, &in.Tenant, &in.Ref, &in.Action, &in.Version, &raw, &in.Key,
		&in.SourceRef, &in.Revision, &in.CreatedAt, &in.UpdatedAt)...); err != nil {
		return nil, err
	}
	p, err := decodePayload(raw)
	if err != nil {
		return nil, err
	}
	in.Payload = p
	return &in, nil
}

// scanAction scans an action row; lead are destinations for columns the
// query puts before actionColumns (a position, an intent's columns).
func scanAction(row pgx.Row, lead ...any) (*Action, error) {
	var a Action
	if err := scanActionInto(row, &a, lead...); err != nil {
		return nil, err
	}
	return &a, nil
}

// scanActionInto is scanAction into a, for a result that holds its row
// (an Action pointer into its own struct, not one more allocation).
func scanActionInto(row pgx.Row, a *Action, lead ...any) error {
	var (
		left       float64
		resp, fail []byte
	)
	if err := row.Scan(append(lead, &a.Tenant, &a.Key, &a.Ref, &a.Action, &a.Status, &a.Attempt, &a.LeaseOwner, &a.LeaseUntil,
		&a.Expired, &left, &resp, &fail, &a.CreatedAt, &a.UpdatedAt, &a.FinishedAt)...); err != nil {
		return err
	}
	a.LeaseLeft = seconds(left)
	if len(resp) > 0 {
		a.Response = json.RawMessage(resp)
	}
	if len(fail) > 0 {
		a.Error = json.RawMessage(fail)
	}
	return nil
}

// intentThenAction lets scanIntent and scanAction read one row whose
// intent columns are followed by an action's: scanIntent hands its
// destinations to Scan, which appends the action's.
type intentThenAction struct {
	row pgx.Row
	a   *Action
}

func (r intentThenAction) Scan(dest ...any) error { return scanActionInto(r.row, r.a, dest...) }

func decodePayload(raw []byte) (derive.Payload, error) {
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("ledger: stored payload: %w", err)
	}
	return derive.PayloadFromMap(m), nil
}

func encodePayload(p derive.Payload) string {
	b, _ := p.MarshalJSON() // strings only: cannot fail
	return string(b)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// micros is d as the statements' microsecond parameters.
func micros(d time.Duration) int64 { return d.Microseconds() }

// noRow is nil for pgx.ErrNoRows, so that a read finding nothing does not
// fail its batch.
func noRow(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}
