package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/retrysafe/retrysafe/executor"
)

// ErrBusy matches every *BusyError.
var ErrBusy = errors.New("busy elsewhere")

// BusyError says when to try again: another worker holds the work (a live
// claim or lease), or the database answered with a transient error. It is
// not a failure: AddWorker's workers snooze the job for RetryAfter.
type BusyError struct {
	What       string // the action name, or what else is held ("message")
	RetryAfter time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("%s busy elsewhere, retry after %s", e.What, e.RetryAfter)
}

// Is makes a *BusyError match ErrBusy.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// Statuses an outbox row settles as once its key ran to an end.
const (
	Sent   = "sent"
	Failed = "failed" // the provider refused for good
	Review = "review" // the executor gave up deciding; an operator resolves the action
)

// minSnooze keeps a busy job from spinning when the lease is all but over.
const minSnooze = 100 * time.Millisecond

// Executor runs a frozen key; *executor.Executor satisfies it.
type Executor interface {
	ExecuteKey(ctx context.Context, tenant, key string, opts *executor.Opts) (*executor.Outcome, error)
}

// Relay executes the tenant's frozen intent under key and returns its
// outcome and the status the outbox row settles as. what names the action
// in a *BusyError.
//
// The error is a *BusyError when the action is in flight elsewhere (the
// outcome is returned with it: its Failure may say why the executor backs
// off) or the database answered with a transient error; it matches
// executor.ErrNotFound when no intent is frozen under key (the job can
// never succeed). Other errors are the executor's.
func Relay(ctx context.Context, ex Executor, tenant, key, what string) (*executor.Outcome, string, error) {
	out, err := ex.ExecuteKey(ctx, tenant, key, &executor.Opts{NoWait: true})
	if err != nil {
		if !errors.Is(err, executor.ErrNotFound) && executor.IsRetryable(err) {
			return nil, "", &BusyError{What: what, RetryAfter: time.Second}
		}
		return nil, "", err
	}
	switch out.Status {
	case executor.StatusCompleted:
		return out, Sent, nil
	case executor.StatusFailed:
		return out, Failed, nil
	case executor.StatusReview:
		return out, Review, nil
	case executor.StatusInFlight:
		return out, "", &BusyError{What: what, RetryAfter: max(out.RetryAfter, minSnooze)}
	}
	return out, "", fmt.Errorf("unexpected status %q", out.Status)
}

// UniqueIn is the insert options of a job in queue that River inserts once
// while one with the same `river:"unique"` fields exists: a second guard
// behind the owner's primary key.
func UniqueIn(queue string) river.InsertOpts {
	return river.InsertOpts{Queue: queue, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// Work is one kind of job: what it does and what its errors mean.
type Work[T river.JobArgs] struct {
	// Do is the job's work. A *BusyError snoozes the job; an error
	// matching one of Final cancels it; River retries any other (an error
	// River makes, such as river.JobSnooze, passes through).
	Do func(ctx context.Context, job *river.Job[T]) error
	// Final are the errors retrying cannot fix.
	Final []error
	// Exhausted, when set, is called before River discards a job whose
	// last attempt failed (with a retryable error), with a context that
	// outlives the job's: leave the outbox row where an operator looks.
	Exhausted func(ctx context.Context, args T)
	// Timeout bounds one job; 0 is the client's JobTimeout.
	Timeout time.Duration
}

// AddWorker registers w as the worker of T's kind.
func AddWorker[T river.JobArgs](workers *river.Workers, w Work[T]) error {
	if w.Do == nil {
		return errors.New("outbox: Work.Do is required")
	}
	return river.AddWorkerSafely(workers, &worker[T]{w: w})
}

type worker[T river.JobArgs] struct {
	river.WorkerDefaults[T]
	w Work[T]
}

func (wk *worker[T]) Work(ctx context.Context, job *river.Job[T]) error {
	err := wk.w.Do(ctx, job)
	var busy *BusyError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &busy):
		return river.JobSnooze(max(busy.RetryAfter, minSnooze))
	}
	for _, f := range wk.w.Final {
		if errors.Is(err, f) {
			return river.JobCancel(err)
		}
	}
	var snooze *river.JobSnoozeError
	if wk.w.Exhausted != nil && job.Attempt >= job.MaxAttempts && !errors.As(err, &snooze) {
		wk.w.Exhausted(context.WithoutCancel(ctx), job.Args)
	}
	return err
}

func (wk *worker[T]) Timeout(*river.Job[T]) time.Duration { return wk.w.Timeout }
