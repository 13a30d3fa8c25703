package intent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrysafe/retrysafe/derive"
)

// DBTX is what every data function needs: *pgxpool.Pool, *pgx.Conn and
// pgx.Tx all satisfy it. Given a pool, a Freeze commits on its own; given a
// transaction, it joins it.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Beginner is a DBTX that can open a transaction (a nested Begin on a pgx.Tx
// is a savepoint).
type Beginner interface {
	DBTX
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Sentinel errors.
var (
	// ErrNotFound: no intent for (tenant, ref, action) or (tenant, key).
	ErrNotFound = errors.New("intent: not found")
	// ErrKeyInUse: another intent_ref of the tenant already froze a
	// payload with the same key (the action's schema has no reference
	// field and two refs extracted identical fields).
	ErrKeyInUse = errors.New("intent: key already frozen under another intent_ref")
	// ErrActionActive: Amend refused: an action under the current key is
	// started or in review.
	ErrActionActive = errors.New("intent: an action under the current key is started or in review")
	// ErrCompleted: Amend refused: the action under the current key
	// completed and the tool moves money, so the amended intent would be
	// charged again. Returned as a *CompletedError.
	ErrCompleted = errors.New("intent: the action under the current key completed and moves money")
	// ErrNoChange: Amend's fields normalize to the frozen payload.
	ErrNoChange = errors.New("intent: amendment does not change the payload")
	// ErrInvalid: a required argument is empty.
	ErrInvalid = errors.New("intent: invalid argument")
)

// CompletedError is Amend's refusal to amend an intent whose money-moving
// action completed (it matches ErrCompleted). What was charged stays
// charged: a wrong amount is corrected by a refund, or by charging the
// difference under a new intent_ref; AmendParams.OverrideCompleted exists
// for an operator who means a second charge under this intent.
type CompletedError struct {
	Tenant, Ref, Action string
	Key                 string // the completed action's key
}

func (e *CompletedError) Error() string {
	return fmt.Sprintf("intent: %s / %s / %s: the action under key %s completed and %s moves money: an amendment would charge again; refund, or charge the difference under a new intent_ref (an operator may override, recorded)",
		e.Tenant, e.Ref, e.Action, e.Key, e.Action)
}

// Is makes a *CompletedError match ErrCompleted.
func (e *CompletedError) Is(target error) bool { return target == ErrCompleted }

// SupersededClass is the error class of the tombstone action Amend writes
// under a replaced key.
const SupersededClass = "superseded"

// Config configures a Store.
type Config struct {
	// Deriver normalizes fields and computes keys. Required.
	Deriver *derive.Deriver
	// RefFields are schema field names that receive the intent_ref.
	// Nil means {"intent_ref", "referencia_intencao"}.
	RefFields []string
	// Logger defaults to slog.Default(). Only tenant, action and outcome
	// are logged, never field values.
	Logger *slog.Logger
}

// Store freezes, reads and amends intents. It holds no connection: every
// method takes the DBTX to run on. Safe for concurrent use.
type Store struct {
	d         *derive.Deriver
	refFields []string
	log       *slog.Logger
}

// New validates cfg.
func New(cfg Config) (*Store, error) {
	if cfg.Deriver == nil {
		return nil, fmt.Errorf("%w: Config.Deriver is required", ErrInvalid)
	}
	s := &Store{d: cfg.Deriver, refFields: cfg.RefFields, log: cfg.Logger}
	if s.refFields == nil {
		s.refFields = []string{"intent_ref", "referencia_intencao"}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s, nil
}

// Deriver returns the store's deriver.
func (s *Store) Deriver() *derive.Deriver { return s.d }

// Intent is a frozen intent.
type Intent struct {
	Tenant    string
	Ref       string
	Action    string
	Version   int            // derive rule version it was frozen with
	Payload   derive.Payload // normalized fields
	Key       string         // the idempotency key
	SourceRef string         // transport id that froze it (audit only)
	Revision  int            // 0 until amended
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Revision is one amendment of an intent.
type Revision struct {
	Revision   int // the revision this amendment replaced
	OldVersion int
	OldPayload derive.Payload
	OldKey     string
	NewKey     string
	Reason     string
	AmendedBy  string
	// Overrode is the status of the old key's action this amendment
	// went past by operator override ("completed"), "" when none.
	Overrode  string
	CreatedAt time.Time
}

// FreezeParams is one extraction to freeze.
type FreezeParams struct {
	Tenant    string
	Ref       string // intent_ref, from the system
	Action    string
	Fields    map[string]any // the model's raw fields
	SourceRef string         // transport id (message id): audit only, never in the key
	// Version selects the derive rule version for a first freeze; 0 means
	// the action's default. An existing intent keeps its version.
	Version int
}

// FreezeResult is what Freeze found or made.
type FreezeResult struct {
	Intent  *Intent
	Created bool // this call froze it
	// Divergent names the fields of this call's extraction that differ
	// from the frozen payload (sorted). The divergent values are dropped.
	Divergent []string
	// Ignored names input fields the schema does not know (not in the key).
	Ignored []string
	// ExtractionErr is set when this call's fields could not be
	// normalized but an intent was already frozen: the frozen one is
	// returned and this extraction is dropped.
	ExtractionErr error
}

// Extraction is a call's fields normalized and keyed, before touching the
// database. Build one with Extract.
type Extraction struct {
	FreezeParams
	Result *derive.Result // nil when Err is set
	Err    error          // why the fields could not be normalized
}

// Extract normalizes p's fields (with the intent_ref written into the
// schema's reference field). A field error is kept in Extraction.Err rather
// than returned, so that an already-frozen intent can still be found; other
// errors (unknown action, empty tenant or ref) are returned.
func (s *Store) Extract(p FreezeParams) (*Extraction, error) { return s.extract(p) }

// Freeze freezes p's extraction, or finds the intent frozen first. It costs
// one round trip and at most one commit. A field error is returned only when
// no intent is frozen yet.
func (s *Store) Freeze(ctx context.Context, db DBTX, p FreezeParams) (*FreezeResult, error) {
	return s.freeze(ctx, db, p)
}

// PendingFreeze is a freeze queued on a caller's batch (see QueueFreeze).
type PendingFreeze struct{ p *pending }

// QueueFreeze queues x's insert and its read-back (two statements) on b, so
// that a caller can pipeline more statements behind them in the same round
// trip and implicit transaction (the executor queues its claim). Read the
// outcome with Result after the batch results are closed.
func (s *Store) QueueFreeze(b *pgx.Batch, x *Extraction) *PendingFreeze {
	return s.queueFreeze(b, x)
}

// QueueFreezeMany is QueueFreeze for a group of extractions in two
// statements (one insert, one read-back) instead of two each. Each
// extraction's outcome is what QueueFreeze would have given it, with one
// exception: of extractions for the same intent, only the first can be
// Created.
func (s *Store) QueueFreezeMany(b *pgx.Batch, xs []*Extraction) []*PendingFreeze {
	return s.queueFreezeMany(b, xs)
}

// Result returns the freeze's outcome once the batch results are closed.
func (p *PendingFreeze) Result() (*FreezeResult, error) { return p.p.result() }

// Frozen is the freeze x would have had on finding in already frozen
// under x's tenant, ref and action: nothing inserted, in read back, with
// x's divergence from it. It lets a caller that read in itself (the
// executor's read-first replays, see Columns) skip the insert that could
// only have conflicted.
func (s *Store) Frozen(x *Extraction, in *Intent) *PendingFreeze {
	return &PendingFreeze{p: &pending{s: s, x: x, found: true, in: in}}
}

// Inserted is the freeze x had when a caller's own statement inserted in
// with FreezeManyInsert: created, nothing to compare.
func (s *Store) Inserted(x *Extraction, in *Intent) *PendingFreeze {
	return &PendingFreeze{p: &pending{s: s, x: x, found: true, in: in, inserted: true}}
}

// InsertedAt is Inserted for a caller whose statement returned only the
// inserted row's created_at: the rest of the row is what FreezeManyArgs
// wrote for x, so it is built from x rather than read back (x must have no
// field error).
func (s *Store) InsertedAt(x *Extraction, createdAt time.Time) *PendingFreeze {
	return s.Inserted(x, insertedIntent(x, createdAt))
}

// FreezeManyArgs is FreezeManyInsert's seven parameters for the
// extractions of xs without a field error (those are left out, since
// nothing of theirs can be frozen); ok is false when there is none.
func FreezeManyArgs(xs []*Extraction) (args []any, ok bool) { return freezeManyArgs(xs) }

// Columns is an intent's select list, for a statement of another package
// that reads intents (FROM intents, unaliased) together with its own rows
// and scans them with Scan.
const Columns = intentColumns

// Scan reads an intent selected as Columns from row, after lead
// destinations.
func Scan(row pgx.Row, lead ...any) (*Intent, error) { return scanIntent(row, lead...) }

// Get reads the intent (tenant, ref, action).
func Get(ctx context.Context, db DBTX, tenant, ref, action string) (*Intent, error) {
	return get(ctx, db, tenant, ref, action)
}

// GetByKey reads the intent the tenant froze under key. Another tenant's
// key finds nothing.
func GetByKey(ctx context.Context, db DBTX, tenant, key string) (*Intent, error) {
	return getByKey(ctx, db, tenant, key)
}

// Revisions lists an intent's amendments, oldest first.
func Revisions(ctx context.Context, db DBTX, tenant, ref, action string) ([]Revision, error) {
	return revisions(ctx, db, tenant, ref, action)
}

// AmendParams is an amendment.
type AmendParams struct {
	Tenant string
	Ref    string
	Action string
	// Fields is the complete new extraction (not a patch). The intent_ref
	// is written into the reference field as in Freeze.
	Fields map[string]any
	Reason string // required
	By     string // who amended (operator id); audit only
	// Version selects the rule version; 0 keeps the intent's version.
	Version int
	// OverrideCompleted amends even though the action under the current
	// key completed and the tool moves money (a money field in its
	// schema): the new key will be charged as a new action, beside the
	// completed one. For an operator who means it; By is then required,
	// and the revision records the override.
	OverrideCompleted bool
}

// AmendResult is an applied amendment.
type AmendResult struct {
	Intent   *Intent  // the intent as amended
	OldKey   string   // the key it had before
	Changed  []string // fields that changed (names only)
	Revision int      // the revision that was replaced
}

// Amend replaces a frozen intent's payload and key. It refuses with
// ErrActionActive while an action under the current key is started or in
// review, with a *CompletedError (ErrCompleted) when that action completed
// and the tool moves money (unless OverrideCompleted), and with
// ErrNoChange when the payload would not change. It runs
// in its own transaction (a savepoint when db is a pgx.Tx).
func (s *Store) Amend(ctx context.Context, db Beginner, p AmendParams) (*AmendResult, error) {
	return s.amend(ctx, db, p)
}
