package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/internal/failpoint"
	"github.com/retrysafe/retrysafe/internal/outbox"
	"github.com/retrysafe/retrysafe/internal/riverretry"
)

// Queue and job kind of the notification relay.
const (
	QueueNotify = "payment_notify"
	KindNotify  = "payment_notify"
)

// NotifyArgs is one notification to send: the frozen intent's key. Unique
// in River by (tenant, effect key), a second guard behind the
// processed_effects primary key.
type NotifyArgs struct {
	Tenant    string `json:"tenant" river:"unique"`
	EffectKey string `json:"effect_key" river:"unique"`
	Key       string `json:"key"`
}

// Kind implements river.JobArgs.
func (NotifyArgs) Kind() string { return KindNotify }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (NotifyArgs) InsertOpts() river.InsertOpts { return outbox.UniqueIn(QueueNotify) }

// Failpoint names (see internal/failpoint).
const (
	// FailRelaySent: the executor recorded the notification as sent; the
	// outbox row is not marked yet.
	FailRelaySent = "webhook.relay-sent"
	// FailRelayBeforeAck: the outbox row is marked; the job is not
	// acknowledged.
	FailRelayBeforeAck = "webhook.relay-before-ack"
)

// RelayConfig configures a Relay.
type RelayConfig struct {
	// DB is the pool the outbox rows are marked on. Required.
	DB DBTX
	// Executor runs the notification intents; its tools must include the
	// notification tools (whatsapp.send_template, email.send). Required.
	Executor *executor.Executor
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Failpoint is called at FailRelaySent and FailRelayBeforeAck.
	// Default failpoint.Hit.
	Failpoint func(name string)
}

// Relay sends the notifications the webhook queued.
type Relay struct {
	cfg RelayConfig
	log *slog.Logger
}

// NewRelay validates cfg.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	switch {
	case cfg.DB == nil:
		return nil, fmt.Errorf("%w: RelayConfig.DB is required", ErrConfig)
	case cfg.Executor == nil:
		return nil, fmt.Errorf("%w: RelayConfig.Executor is required", ErrConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Failpoint == nil {
		cfg.Failpoint = failpoint.Hit
	}
	return &Relay{cfg: cfg, log: cfg.Logger}, nil
}

// Send is the relay job's work: execute the notification's frozen intent
// by key and record how it ended on the outbox row. A job that runs again
// after the message went out (redelivered, or its worker died before the
// mark) finds the executor's action row completed and replays it, or, if
// the worker died between the provider's answer and the executor's record,
// takes the expired lease over and asks the provider by key (or sends
// again with the same key, which the provider deduplicates): never a
// second message.
//
// It returns nil when the row is settled (sent, failed, review), a
// *BusyError when the action is in flight elsewhere or the database
// answered with a transient error, and ErrNotFound when no intent exists
// under the key (the job can never succeed).
func (r *Relay) Send(ctx context.Context, args NotifyArgs) error {
	if args.Tenant == "" || args.EffectKey == "" || args.Key == "" {
		return fmt.Errorf("%w: notification job needs tenant, effect key and key", ErrInvalid)
	}
	out, status, err := outbox.Relay(ctx, r.cfg.Executor, args.Tenant, args.Key, "notification")
	var busy *BusyError
	switch {
	case errors.Is(err, executor.ErrNotFound):
		r.settle(ctx, args, NotifyFailed, 0, "intent_missing") //nolint:errcheck // logged; the job is cancelled either way
		return fmt.Errorf("%w: notification intent", ErrNotFound)
	case errors.As(err, &busy):
		return busy
	case err != nil:
		return fmt.Errorf("webhook: send notification: %w", err)
	}
	var code string
	if status == NotifySent {
		r.cfg.Failpoint(FailRelaySent)
	} else {
		code = failureCode(out.Failure)
	}
	if err := r.settle(ctx, args, status, out.Attempt, code); err != nil {
		return err
	}
	lvl := slog.LevelInfo
	if status != NotifySent {
		lvl = slog.LevelWarn
	}
	r.log.Log(ctx, lvl, "webhook: notification "+status, "tenant", args.Tenant, "action", out.Action,
		"attempt", out.Attempt, "replayed", out.Replayed, "code", code)
	r.cfg.Failpoint(FailRelayBeforeAck)
	return nil
}

func (r *Relay) settle(ctx context.Context, args NotifyArgs, status string, attempt int, code string) error {
	if err := settleNotification(ctx, r.cfg.DB, args, status, attempt, code); err != nil {
		r.log.Warn("webhook: could not record the notification's outcome", "tenant", args.Tenant, "status", status, "error", err)
		return fmt.Errorf("webhook: notification status: %w", err)
	}
	return nil
}

func failureCode(f *executor.ToolFailure) string {
	if f == nil {
		return ""
	}
	if f.Code != "" {
		return string(f.Class) + ":" + f.Code
	}
	return string(f.Class)
}

// AddWorker registers the relay's worker (kind KindNotify) on workers.
// timeout bounds one job (0: the client's JobTimeout). The relay has no
// River client of its own: add QueueNotify to the Queues of the process's
// one client (retrysafe worker does, through agent.RiverConfig.Extra).
// One client per process matters: River's leader rescues orphaned jobs, and
// only of the kinds its client knows.
func AddWorker(workers *river.Workers, r *Relay, timeout time.Duration) error {
	err := outbox.AddWorker(workers, outbox.Work[NotifyArgs]{
		Do:    func(ctx context.Context, job *river.Job[NotifyArgs]) error { return r.Send(ctx, job.Args) },
		Final: []error{ErrNotFound, ErrInvalid}, // retrying cannot make the intent appear
		// River discards the job after its last attempt: leave the
		// outbox row where an operator looks (best effort; the database
		// may be what keeps failing).
		Exhausted: func(ctx context.Context, args NotifyArgs) {
			r.settle(ctx, args, NotifyFailed, 0, "relay_exhausted") //nolint:errcheck // logged
		},
		Timeout: timeout,
	})
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	return nil
}

// RetryPolicy is exponential backoff with jitter for failed jobs, shared
// by every retrysafe River queue.
type RetryPolicy = riverretry.Policy
