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
	"github.com/retrysafe/retrysafe/internal/ledger"
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
const SupersededClass = ledger.SupersededClass

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
	// The fields are the ledger row's (internal/ledger.Intent), in its
	// order: the store and the executor convert one into the other.
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
	// The fields are the ledger row's (internal/ledger.Revision).
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

// Outcome is the FreezeResult of x for a caller that froze it with
// statements of its own (the executor, which freezes and claims in one
// batch): in is the intent found under x's tenant, ref and action once x's
// insert ran (nil when none), created whether that insert made it. It
// compares x with in as Freeze does: the divergent fields are named, and
// x's values dropped.
func (s *Store) Outcome(x *Extraction, in *Intent, created bool) (*FreezeResult, error) {
	return s.outcome(x, in, created)
}

// Get reads the intent (tenant, ref, action).
func Get(ctx context.Context, db DBTX, tenant, ref, action string) (*Intent, error) {
	return get(ctx, db, tenant, ref, action)
}

// GetByKey reads the intent the tenant froze under key. Another tenant's
// key finds nothing.
func GetByKey(ctx context.Context, db DBTX, tenant, key string) (*Intent, error) {
	return getByKey(ctx, db, tenant, key)
}

// RefsByKeyPrefix returns the intent_refs of the tenant's intents of action
// whose key starts with prefix, at most two: enough for a caller that must
// act on exactly one (a Pix txid is the first characters of its charge's
// key) to tell one from several.
func RefsByKeyPrefix(ctx context.Context, db DBTX, tenant, action, prefix string) ([]string, error) {
	return refsByKeyPrefix(ctx, db, tenant, action, prefix)
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
