package sidecar

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/server/metrics"
)

// Reconciler runs the executor's reconciler passes, counting and logging
// what each settled. It is executor.RunReconciler plus observation: the
// executor's own loop reports nothing back.
type Reconciler struct {
	// Executor does the work. Required.
	Executor *executor.Executor
	// Metrics, when set, receives each pass's counts.
	Metrics *metrics.Metrics
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Interval is the pause after a pass that did not fill its batch.
	// Default 5s.
	Interval time.Duration
	// Batch is the executor's ReconcileBatch: a pass that took over that
	// many actions may have left more, so the next runs at once.
	// Default 50.
	Batch int
	// OnPass, when set, sees every pass's result (the CLI prints them).
	OnPass func(executor.ReconcileResult, error)
}

// Once runs one pass.
func (r *Reconciler) Once(ctx context.Context) (executor.ReconcileResult, error) {
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	res, err := r.Executor.ReconcileOnce(ctx)
	if r.Metrics != nil {
		r.Metrics.ObserveReconcile(res)
	}
	if err != nil && ctx.Err() == nil {
		log.Error("reconciler: pass failed", "error", err)
	} else if res != (executor.ReconcileResult{}) {
		log.Info("reconciler: pass",
			"taken_over", res.TakenOver, "completed", res.Completed, "failed", res.Failed,
			"review", res.Review, "retrying", res.Retrying, "lease_lost", res.LeaseLost, "errors", res.Errors)
	}
	if r.OnPass != nil {
		r.OnPass(res, err)
	}
	return res, err
}

// Run runs passes until ctx is done, then returns nil. A failed pass (the
// database is down) is logged and retried after Interval: the loop outlives
// outages.
func (r *Reconciler) Run(ctx context.Context) error {
	interval, batch := r.Interval, r.Batch
	if interval <= 0 {
		interval = 5 * time.Second
	}
	if batch <= 0 {
		batch = 50
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		res, err := r.Once(ctx)
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return nil
		}
		next := interval
		if err == nil && res.TakenOver >= batch {
			next = 0
		}
		t.Reset(next)
	}
}
