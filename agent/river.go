package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/retrysafe/retrysafe/internal/outbox"
	"github.com/retrysafe/retrysafe/internal/riverretry"
)

// Queues and job kinds.
const (
	QueueInbox = "agent_inbox"
	QueueReply = "agent_reply"
	KindInbox  = "agent_inbox"
	KindReply  = "agent_reply"
)

// InboxArgs is one inbound message to answer. Unique in River by (tenant,
// message id), a second guard behind the messages primary key.
type InboxArgs struct {
	Tenant    string `json:"tenant" river:"unique"`
	MessageID string `json:"message_id" river:"unique"`
}

// Kind implements river.JobArgs.
func (InboxArgs) Kind() string { return KindInbox }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (InboxArgs) InsertOpts() river.InsertOpts { return outbox.UniqueIn(QueueInbox) }

// ReplyArgs is one reply to send: the frozen reply intent's key. Unique by
// (tenant, message id).
type ReplyArgs struct {
	Tenant    string `json:"tenant" river:"unique"`
	MessageID string `json:"message_id" river:"unique"`
	Key       string `json:"key"`
}

// Kind implements river.JobArgs.
func (ReplyArgs) Kind() string { return KindReply }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (ReplyArgs) InsertOpts() river.InsertOpts { return outbox.UniqueIn(QueueReply) }

// RiverConfig configures the River client that works the agent's queues.
// Zero fields take the documented defaults.
type RiverConfig struct {
	// Schema holds River's tables (the same schema as retrysafe's; see
	// internal/riverschema). Empty: the pool's search_path.
	Schema string
	// Concurrency is the number of jobs worked at once per queue (inbox
	// and reply). Default 4.
	Concurrency int
	// JobTimeout cancels a job's context after this long. Default 2m.
	JobTimeout time.Duration
	// RescueStuckJobsAfter: a job running this long is presumed orphaned
	// (its worker died) and is made available again. Must exceed
	// JobTimeout. Default 5m.
	RescueStuckJobsAfter time.Duration
	// RetryBase and RetryMax shape the retry backoff of failed jobs:
	// min(RetryMax, RetryBase*2^(attempt-1)), of which the upper half is
	// random. Defaults 1s and 5m.
	RetryBase, RetryMax time.Duration
	// MaxAttempts before River discards a job. Default 25.
	MaxAttempts int
	// FetchPollInterval is the fallback poll when LISTEN/NOTIFY is quiet.
	// Default River's (1s).
	FetchPollInterval time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// TestOnly skips River's start-up jitter (tests only).
	TestOnly bool
	// Extra adds other workers (and their queues) to the same client, such
	// as the payment receipt relay. One client per process matters: River
	// elects one leader among all clients to rescue orphaned jobs, and a
	// leader that does not know a job's kind cannot rescue it.
	Extra func(*river.Workers) error
	// ExtraQueues are the queues Extra's workers work.
	ExtraQueues []string
}

// Validate fills defaults into a copy of c and checks it.
func (c RiverConfig) Validate() (RiverConfig, error) {
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.JobTimeout = cmp.Or(c.JobTimeout, DefaultJobTimeout)
	c.RescueStuckJobsAfter = cmp.Or(c.RescueStuckJobsAfter, DefaultRescueStuckJobsAfter)
	c.RetryBase = cmp.Or(c.RetryBase, DefaultRetryBase)
	c.RetryMax = cmp.Or(c.RetryMax, DefaultRetryMax)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, DefaultMaxAttempts)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	switch {
	case c.Concurrency < 1 || c.Concurrency > 10000:
		return c, fmt.Errorf("%w: Concurrency %d: want 1..10000", ErrConfig, c.Concurrency)
	case c.JobTimeout < 0:
		return c, fmt.Errorf("%w: JobTimeout must be positive", ErrConfig)
	case c.RescueStuckJobsAfter <= c.JobTimeout:
		return c, fmt.Errorf("%w: RescueStuckJobsAfter (%s) must exceed JobTimeout (%s)", ErrConfig, c.RescueStuckJobsAfter, c.JobTimeout)
	case c.RetryBase <= 0 || c.RetryMax < c.RetryBase:
		return c, fmt.Errorf("%w: want 0 < RetryBase <= RetryMax", ErrConfig)
	case c.MaxAttempts < 1:
		return c, fmt.Errorf("%w: MaxAttempts must be at least 1", ErrConfig)
	case c.FetchPollInterval < 0:
		return c, fmt.Errorf("%w: FetchPollInterval must not be negative", ErrConfig)
	}
	return c, nil
}

// NewClient builds the River client that works the inbox and reply queues
// with a's handlers. Start it with Start(ctx); stop it with Stop.
func NewClient(pool *pgxpool.Pool, a *Agent, rc RiverConfig) (*river.Client[pgx.Tx], error) {
	rc, err := rc.Validate()
	if err != nil {
		return nil, err
	}
	workers, err := a.workers(rc.JobTimeout)
	if err != nil {
		return nil, err
	}
	queues := map[string]river.QueueConfig{
		QueueInbox: {MaxWorkers: rc.Concurrency},
		QueueReply: {MaxWorkers: rc.Concurrency},
	}
	if rc.Extra != nil {
		if err := rc.Extra(workers); err != nil {
			return nil, err
		}
		for _, q := range rc.ExtraQueues {
			queues[q] = river.QueueConfig{MaxWorkers: rc.Concurrency}
		}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:               rc.Schema,
		Queues:               queues,
		Workers:              workers,
		JobTimeout:           rc.JobTimeout,
		RescueStuckJobsAfter: rc.RescueStuckJobsAfter,
		RetryPolicy:          &RetryPolicy{Base: rc.RetryBase, Max: rc.RetryMax, Clock: a.cfg.Clock},
		MaxAttempts:          rc.MaxAttempts,
		FetchPollInterval:    rc.FetchPollInterval,
		Logger:               rc.Logger,
		TestOnly:             rc.TestOnly,
	})
	if err != nil {
		return nil, fmt.Errorf("agent: river client: %w", err)
	}
	return client, nil
}

// NewInserter builds an insert-only River client (it works no queue): what
// the webhook and the agent need to enqueue jobs inside their transactions.
func NewInserter(pool *pgxpool.Pool, schema string) (*river.Client[pgx.Tx], error) {
	c, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: schema})
	if err != nil {
		return nil, fmt.Errorf("agent: river inserter: %w", err)
	}
	return c, nil
}

// RetryPolicy is exponential backoff with jitter for failed jobs, shared
// by every retrysafe River queue.
type RetryPolicy = riverretry.Policy

// workers are the agent's three kinds of job. Retrying cannot make a
// message or an intent appear (ErrNotFound) nor mend a job's arguments
// (ErrInvalid): those are cancelled; a busy message or action snoozes.
func (a *Agent) workers(timeout time.Duration) (*river.Workers, error) {
	final := []error{ErrNotFound, ErrInvalid}
	workers := river.NewWorkers()
	err := errors.Join(
		outbox.AddWorker(workers, outbox.Work[InboxArgs]{Final: final, Timeout: timeout,
			Do: func(ctx context.Context, job *river.Job[InboxArgs]) error {
				return snoozeModel(a.HandleInbox(ctx, job.Args.Tenant, job.Args.MessageID))
			}}),
		outbox.AddWorker(workers, outbox.Work[ReplyArgs]{Final: final, Timeout: timeout,
			Do: func(ctx context.Context, job *river.Job[ReplyArgs]) error { return a.HandleReply(ctx, job.Args) }}),
		outbox.AddWorker(workers, outbox.Work[ResendArgs]{Final: final, Timeout: timeout,
			Do: func(ctx context.Context, job *river.Job[ResendArgs]) error { return a.HandleResend(ctx, job.Args) }}),
	)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return workers, nil
}

// snoozeModel snoozes the job for as long as the model API said to wait:
// waiting less is refused again, and River's own backoff would not know.
func snoozeModel(err error) error {
	var me *ModelError
	if errors.As(err, &me) && me.Retryable && me.RetryAfter > 0 {
		return river.JobSnooze(me.RetryAfter)
	}
	return err
}
