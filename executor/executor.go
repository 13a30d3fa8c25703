package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/ledger"
	"github.com/retrysafe/retrysafe/tools"
)

// DBTX is satisfied by *pgxpool.Pool, *pgx.Conn and pgx.Tx (intent's
// definition: one interface for every package).
type DBTX = intent.DBTX

// ToolSource finds the tool for an action; *tools.Registry satisfies it.
type ToolSource interface {
	Tool(name string) (tools.Tool, bool)
}

// Clock is the worker's clock, used only to time backoff sleeps and jitter
// (lease arithmetic is done by the database).
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx is done (returning ctx.Err()).
	Sleep(ctx context.Context, d time.Duration) error
}

// Status of an action as callers see it.
type Status string

// Statuses. InFlight is not stored: it is a started row whose lease is live.
const (
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusInFlight  Status = "in_flight"
	StatusReview    Status = "review"
)

// Stored statuses of the actions table.
const (
	RowStarted   = "started"
	RowCompleted = "completed"
	RowFailed    = "failed"
	RowReview    = "review"
)

// Sentinel errors.
var (
	// ErrInFlight: another worker holds a live lease on the action; retry
	// after Outcome.RetryAfter. Returned by Outcome.Err.
	ErrInFlight = errors.New("executor: action in flight")
	// ErrLeaseLost: this worker's lease was taken over; its result was
	// dropped (the completion was fenced).
	ErrLeaseLost = errors.New("executor: lease lost, result dropped")
	// ErrNeedsReview: the action waits for an operator. Returned by
	// Outcome.Err.
	ErrNeedsReview = errors.New("executor: action needs review")
	// ErrFailed: the provider definitively refused. Outcome.Err wraps it
	// in a *ToolFailure.
	ErrFailed = errors.New("executor: action failed")
	// ErrNotFound: no action or intent for the tenant and key.
	ErrNotFound = errors.New("executor: not found")
	// ErrUnknownTool: no tool is registered for the action.
	ErrUnknownTool = errors.New("executor: no tool for action")
	// ErrConfig: invalid Config.
	ErrConfig = errors.New("executor: invalid config")
	// ErrRefused: the database refused the call's data (SQLSTATE class
	// 22 or 54); nothing was frozen or called, and the same call is
	// refused again. Not retryable.
	ErrRefused = errors.New("executor: the database refused the call's data")
	// ErrNotResolvable: Resolve applies only to actions in review (or,
	// with Force, started ones whose lease expired).
	ErrNotResolvable = errors.New("executor: action is not in review")
)

// ToolFailure is the stored failure of an action (definitive, or the last
// uncertain one before review).
type ToolFailure struct {
	Class   tools.Class `json:"class"`
	Code    string      `json:"code,omitempty"`
	Status  int         `json:"status,omitempty"`
	Message string      `json:"message,omitempty"`
	Attempt int         `json:"attempt,omitempty"`
	// Resolution is set when an operator resolved the action.
	Resolution *Resolution `json:"resolution,omitempty"`
}

// Resolution records an operator's decision (see Resolve).
type Resolution struct {
	Status string    `json:"status"`
	Reason string    `json:"reason"`
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at"`
}

func (f *ToolFailure) Error() string {
	return fmt.Sprintf("executor: %s failure %s at attempt %d: %s", f.Class, f.Code, f.Attempt, f.Message)
}

// Is makes a definitive *ToolFailure match ErrFailed.
func (f *ToolFailure) Is(target error) bool {
	return target == ErrFailed && f.Class == tools.ClassDefinitive
}

// IsRetryable reports whether calling Execute again later may give a
// different answer: in flight, lease lost, or a transient database error
// (connection failure, serialization failure, deadlock). Failed and review
// are final for automation.
func IsRetryable(err error) bool { return isRetryable(err) }

// Outcome is what a caller gets back from Execute.
type Outcome struct {
	Status Status
	Tenant string
	Ref    string
	Action string
	Key    string // the frozen idempotency key
	// Replayed: this call did not run the tool; the stored outcome of an
	// earlier call is returned.
	Replayed bool
	// Created: this call froze the intent.
	Created bool
	// Divergent names fields of this call's extraction that differ from
	// the frozen payload; the divergent values were dropped, not sent.
	Divergent []string
	// Ignored names input fields the tool's schema does not know.
	Ignored  []string
	Response json.RawMessage // completed: the provider's response
	Failure  *ToolFailure    // failed, review: the stored failure
	Attempt  int
	// RetryAfter, for in_flight: when the current lease ends.
	RetryAfter time.Duration
	// tookOver: this call took over an expired lease (ExecutionEvent).
	tookOver bool
}

// Err maps the outcome to an error: nil when completed, ErrInFlight,
// ErrNeedsReview, or the *ToolFailure (matching ErrFailed) when failed.
func (o *Outcome) Err() error {
	switch o.Status {
	case StatusCompleted:
		return nil
	case StatusInFlight:
		return ErrInFlight
	case StatusReview:
		if o.Failure != nil {
			return fmt.Errorf("%w: %w", ErrNeedsReview, o.Failure)
		}
		return ErrNeedsReview
	case StatusFailed:
		if o.Failure != nil {
			return o.Failure
		}
		return ErrFailed
	}
	return fmt.Errorf("executor: unknown status %q", o.Status)
}

// The defaults of Config's zero fields. Commands take their flags'
// defaults from here, so that a default is written once.
const (
	DefaultLease             = 30 * time.Second
	DefaultTimeout           = 10 * time.Second
	DefaultLeaseMargin       = 2 * time.Second
	DefaultRetryHorizon      = 6 * time.Hour
	DefaultBackoffBase       = 200 * time.Millisecond
	DefaultBackoffMax        = time.Minute
	DefaultReconcileBatch    = 50
	DefaultReconcileInterval = 5 * time.Second
	DefaultLostWriteRetry    = 10 * time.Second
	DefaultGroupCommit       = 32
	DefaultGroupCommitConns  = 2
)

// Config configures an Executor. Zero fields take the documented defaults;
// New validates the result.
type Config struct {
	// DB is the pool. Required. Must not be a pgx.Tx: the claim must be
	// committed before the provider is called. Its sessions must run read
	// committed, whatever the database's default isolation: the statements
	// are written for a snapshot each. A pool from dbpool (Open, or
	// Configure on the application's own pgxpool.Config) starts every
	// session so, with search_path on the migrated schema.
	DB DBTX
	// Intents is the intent store. Required.
	Intents *intent.Store
	// Tools finds tools by action. Required.
	Tools ToolSource
	// Owner identifies this worker in lease_owner: each call's lease
	// owner is Owner, "/" and random bits of the call's own (see Fencing
	// and takeover in the package doc). Default: host:pid:random.
	Owner string
	// Lease is how long a claim is exclusive. Default 30s.
	Lease time.Duration
	// Timeout bounds one provider call. Default 10s. Without Heartbeat,
	// Lease must exceed Timeout + LeaseMargin.
	Timeout time.Duration
	// LeaseMargin is the safety gap between the end of a call and the end
	// of its lease (completion latency, clock skew). Default 2s.
	LeaseMargin time.Duration
	// Heartbeat, when > 0, extends the lease every Heartbeat during a
	// call, which may then run up to Timeout even past Lease; Lease must
	// exceed 2*Heartbeat + LeaseMargin. A failed extension cancels the
	// call. Default 0 (off).
	Heartbeat time.Duration
	// RetryHorizon is how long after an action was first claimed
	// (database clock) transient and uncertain failures are retried with
	// the same key: long enough to ride out a provider's outage, so that
	// what ends it is time, not how fast callers retried. When it is spent,
	// an action nothing can have acted on (every attempt failed before the
	// provider acted, or a Lookup by key found nothing) fails with code
	// retries_exhausted; one whose outcome nobody can tell goes to review.
	// Default 6h.
	RetryHorizon time.Duration
	// MaxAttempts, when > 0, also bounds the attempts (each may call the
	// provider once), with the same end as RetryHorizon. Default 0: time
	// alone decides. Concurrent callers and redeliveries do not spend
	// attempts: only a takeover of an expired lease (at most one per
	// backoff) or a retry after one does.
	MaxAttempts int
	// BackoffBase and BackoffMax bound the delay before attempt n+1:
	// min(BackoffMax, BackoffBase*2^(n-1)), of which the upper half is
	// random (jitter). Defaults 200ms and 1m.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// Clock defaults to the system clock.
	Clock Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// ReconcileBatch is how many expired leases one reconciler pass takes.
	// Default 50.
	ReconcileBatch int
	// ReconcileInterval is the reconciler's pause between idle passes.
	// Default 5s.
	ReconcileInterval time.Duration
	// SyncCompletion makes every completion wait for its WAL flush. By
	// default a success does not when the tool takes the key or can be
	// looked up: a completed row that a database crash loses goes back to
	// started with its lease, and the next attempt learns the outcome from
	// the provider by the same key (Lookup, or the same-key call answered
	// with the provider's stored answer), so nothing is charged twice and
	// a first execution waits for one flush instead of two. Failures,
	// review and tools that can do neither always wait. Set it when a
	// success must never be re-learned from the provider.
	SyncCompletion bool
	// GroupCommit bounds how many concurrent calls share one round trip
	// and one commit for their claims (and, separately, for their
	// completions). Calls are grouped only while earlier groups are at the
	// database, never held back to fill one: a lone call goes at once.
	// Default 32; 1 turns grouping off (every call commits alone).
	GroupCommit int
	// GroupCommitConns is how many groups of each kind may be at the
	// database at once, each on its own pool connection; beyond the first,
	// one goes out only when half a group (GroupCommit/2 calls) is
	// waiting. Default 2.
	GroupCommitConns int
	// LostWriteRetry is how long a write lost with its connection after
	// it was sent (a claim, a takeover, a completion, a release) is sent
	// again while the database cannot be reached (no connection can be
	// made, or the server says it is starting up, shutting down or
	// full), from the loss. Then the call ends in the connection's error
	// and its intent is settled later under its lease, by the same key:
	// a shorter window costs a reconciliation, never a second charge.
	// Set it to how long the database's failover or restart takes (a
	// managed PostgreSQL's failover is often 30 to 120 seconds) to have
	// such calls end in their outcome instead. A claim or takeover sent
	// again also ends with the caller's context; a completion or release
	// does not (its outcome is in hand), each of its tries bounded by 5
	// to 10 seconds. Default 10s.
	LostWriteRetry time.Duration
	// Observer is told of every provider call, lookup and execution (see
	// Observer). Default NopObserver{}.
	Observer Observer
	// Failpoints is hit at FailActionClaimed and FailProviderAnswered
	// around every provider call, and at FailClaimLost. Default: nothing.
	Failpoints Failpoints
}

// Validate fills defaults into a copy of c and checks it.
func (c Config) Validate() (Config, error) { return c.validate() }

// Executor executes tools for frozen intents. Safe for concurrent use.
type Executor struct {
	cfg Config
	// claims, completions and completionsAsync group concurrent calls'
	// writes into shared commits (see grouper).
	claims, completions, completionsAsync *grouper
	// fresh groups the first step of a call while claims write (the
	// usual case): one statement freezes and claims what is new, and only
	// a call whose intent was already frozen goes on to the freeze and
	// claim (see queueFresh).
	fresh *grouper
	// lookups groups read-first lookups: while the latest claims wrote
	// nothing (a redelivery storm), a call first reads its intent and
	// action in one statement, and freezes and claims only when that
	// finds no settled or in-flight action (see queueLookups).
	lookups *grouper
	// readOnlyRun counts the latest freeze-and-claims that wrote nothing
	// (see noteClaim).
	readOnlyRun atomic.Int64
	// bound is the deadline of the executor's own writes (see writeBound).
	bound writeBound
}

// New validates cfg.
func New(cfg Config) (*Executor, error) {
	c, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	e := &Executor{cfg: c}
	e.claims = newGrouper(c.DB, &e.bound, c.GroupCommit, c.GroupCommitConns, claimsBuild(e.queueClaims))
	e.completions = newGrouper(c.DB, &e.bound, c.GroupCommit, c.GroupCommitConns, e.buildCompletes(false))
	e.completionsAsync = newGrouper(c.DB, &e.bound, c.GroupCommit, c.GroupCommitConns, e.buildCompletes(true))
	e.fresh = newGrouper(c.DB, &e.bound, c.GroupCommit, c.GroupCommitConns, claimsBuild(e.queueFresh))
	e.lookups = newGrouper(c.DB, &e.bound, c.GroupCommit, c.GroupCommitConns, claimsBuild(e.queueLookups))
	e.lookups.readOnly.Store(true) // nothing to commit: no reason to wait
	e.lookups.plans = ledger.QueueLookupPlans
	e.fresh.plans = nil            // the fresh claim makes the plan settings itself
	e.completions.plans = nil      // see buildCompletes
	e.completionsAsync.plans = nil // see buildCompletes
	return e, nil
}

// Config returns the validated configuration (defaults filled in).
func (e *Executor) Config() Config { return e.cfg }

// Call is one tool call to execute.
type Call struct {
	Tenant    string
	Ref       string         // intent_ref, from the system (never the model)
	Action    string         // tool name
	Fields    map[string]any // the model's raw fields
	SourceRef string         // transport id (message id); audit only
}

// Opts tunes one Execute. A nil *Opts means the defaults.
type Opts struct {
	// NoWait returns in_flight after a transient failure instead of
	// sleeping the backoff and retrying inside this call; a later call or
	// the reconciler retries with the same key.
	NoWait bool
	// Version selects the derive rule version for a first freeze.
	Version int
}

// Execute freezes the call's extraction (or reads the intent frozen first)
// and runs the tool per the state table. The returned Outcome describes the
// action; err is non-nil only when no answer could be given (a field error
// with no intent frozen yet, an unknown tool, a database error) or, with a
// non-nil Outcome, ErrLeaseLost. Check Outcome.Status or Outcome.Err().
func (e *Executor) Execute(ctx context.Context, call Call, opts *Opts) (*Outcome, error) {
	start := e.start()
	out, err := e.execute(ctx, call, opts)
	e.finished(call.Tenant, call.Action, start, out, err)
	return out, err
}

// ExecuteKey executes (or replays) the tenant's already-frozen intent under
// key. Another tenant's key finds nothing (ErrNotFound).
func (e *Executor) ExecuteKey(ctx context.Context, tenant, key string, opts *Opts) (*Outcome, error) {
	start := e.start()
	out, err := e.executeKey(ctx, tenant, key, opts)
	e.finished(tenant, "", start, out, err)
	return out, err
}

// Action is a stored action row.
type Action struct {
	Tenant     string
	Key        string
	Ref        string
	Action     string
	Status     string // started, completed, failed, review
	Attempt    int
	LeaseOwner string
	LeaseUntil *time.Time
	Expired    bool          // started and lease_until <= now() (database clock)
	LeaseLeft  time.Duration // started: lease_until - now() (database clock), <= 0 when expired
	Response   json.RawMessage
	Failure    *ToolFailure
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time
}

// Get reads the tenant's action under key.
func Get(ctx context.Context, db DBTX, tenant, key string) (*Action, error) {
	return get(ctx, db, tenant, key)
}

// ListParams filters List.
type ListParams struct {
	Tenant string // required
	Status string // "" for all
	Limit  int    // default 100
}

// List returns the tenant's actions, most recently updated first.
func List(ctx context.Context, db DBTX, p ListParams) ([]*Action, error) {
	return list(ctx, db, p)
}

// ResolveParams is an operator's decision on an action in review.
type ResolveParams struct {
	Tenant string
	Key    string
	// Status is completed or failed.
	Status string
	// Response (completed) is stored and replayed, e.g. the charge the
	// operator found at the provider.
	Response json.RawMessage
	Reason   string // required
	By       string
	// Force also resolves a started action whose lease has expired.
	Force bool
}

// Resolve settles an action in review. It never calls a tool.
func Resolve(ctx context.Context, db DBTX, p ResolveParams) (*Action, error) {
	return resolve(ctx, db, p)
}

// ReconcileResult counts one reconciler pass.
type ReconcileResult struct {
	TakenOver int // expired leases taken
	Completed int
	Failed    int
	Review    int
	Retrying  int // still started (transient failure, backoff)
	LeaseLost int
	Errors    int
}

// ReconcileOnce takes up to Config.ReconcileBatch started actions whose
// lease expired and settles each (Lookup first where the tool can).
func (e *Executor) ReconcileOnce(ctx context.Context) (ReconcileResult, error) {
	return e.reconcileOnce(ctx)
}

// RunReconciler runs passes until ctx is done: immediately again after a
// full batch, after ReconcileInterval otherwise.
func (e *Executor) RunReconciler(ctx context.Context) error {
	return e.runReconciler(ctx)
}
