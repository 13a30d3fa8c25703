package restarttest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/executor/executortest"
	"github.com/retrysafe/retrysafe/internal/lab/harness"
)

// deliverRuns posts every message of chunk to the server's webhook, the
// runs at once.
func (t *tester) deliverRuns(ctx context.Context, chunk []*RunPlan) {
	var wg sync.WaitGroup
	for _, r := range chunk {
		wg.Go(func() { t.deliverRun(ctx, r) })
	}
	wg.Wait()
}

// deliverRun posts a run's first message 1+Duplicates times at once, and
// its other messages with it (Concurrent) or after it.
func (t *tester) deliverRun(ctx context.Context, r *RunPlan) {
	var wg sync.WaitGroup
	for range 1 + r.Duplicates {
		wg.Go(func() { t.post(ctx, r, r.Messages[0]) })
	}
	if r.Concurrent {
		for _, m := range r.Messages[1:] {
			wg.Go(func() { t.post(ctx, r, m) })
		}
		wg.Wait()
	} else {
		wg.Wait()
		for _, m := range r.Messages[1:] {
			t.post(ctx, r, m)
		}
	}
	t.mu.Lock()
	if !t.delivered[r.Index] {
		t.delivered[r.Index] = true
		t.progress.Delivered++
	}
	t.mu.Unlock()
}

// post delivers one message, retrying as WhatsApp does until the webhook
// answers 200 (the server may be without its database for a moment).
func (t *tester) post(ctx context.Context, r *RunPlan, m Message) {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		code, err := t.stack.Deliver(ctx, m.ID, r.WaID, m.Text)
		if err == nil && code == http.StatusOK {
			t.mu.Lock()
			t.deliveries[r.Index]++
			t.mu.Unlock()
			return
		}
		if ctx.Err() != nil || attempt == 40 {
			t.problem("webhook delivery of run %d message %s: status %d, %v", r.Index, m.ID, code, err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// settledCount counts the runs of runs that are settled: every message
// has its turn recorded and its reply out (or given up), and none of its
// jobs is still queued or running.
func (t *tester) settledCount(ctx context.Context, runs []*RunPlan) (int, error) {
	ids := messageIDs(runs)
	var done map[string]bool
	err := retryQuery(ctx, func() error {
		// One snapshot, as one statement had: the turns and the jobs at
		// the same instant.
		return pgx.BeginTxFunc(ctx, t.stack.Pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			answered, err := agent.Answered(ctx, tx, t.stack.Cfg.Tenant, ids)
			if err != nil {
				return err
			}
			rows, err := tx.Query(ctx, `SELECT DISTINCT args->>'message_id' FROM river_job
				WHERE kind = ANY($1) AND args->>'message_id' = ANY($2) AND state NOT IN ('completed', 'cancelled', 'discarded')`,
				jobKinds, ids)
			if err != nil {
				return err
			}
			open, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			for _, id := range open {
				delete(answered, id)
			}
			done = answered
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range runs {
		all := true
		for _, m := range r.Messages {
			all = all && done[m.ID]
		}
		if all {
			n++
		}
	}
	return n, nil
}

// redeliver lets the queue bring back what the kills left behind: it
// waits until the last killed job is older than --rescue-after (so that
// the first rescuer pass of the new leader takes every one), starts
// cfg.Workers plain workers and waits for every run to settle, restarting
// a worker that dies.
func (t *tester) redeliver(ctx context.Context) error {
	t.mu.Lock()
	wait := time.Until(t.lastKill.Add(t.cfg.Timings.RescueAfter))
	t.mu.Unlock()
	if wait > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	workers := make([]*worker, t.cfg.Workers)
	for i := range workers {
		w, err := t.startWorker(ctx, "redeliver", "", 0, nil)
		if err != nil {
			return err
		}
		workers[i] = w
	}
	defer func() {
		var wg sync.WaitGroup
		for _, w := range workers {
			if w != nil {
				wg.Go(func() { w.proc.Stop(5 * time.Second) })
			}
		}
		wg.Wait()
	}()
	deadline := time.Now().Add(t.cfg.SettleTimeout)
	for {
		n, err := t.settledCount(ctx, t.runs)
		if err == nil {
			t.mu.Lock()
			t.progress.Settled = n
			t.mu.Unlock()
			if n == len(t.runs) {
				started, err := executortest.Count(ctx, t.stack.Pool, executortest.Filter{Tenant: t.stack.Cfg.Tenant, Status: "started"})
				if err == nil && started == 0 {
					// While the workers run: a leader that stops resigns.
					t.leader = t.riverLeader(ctx)
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			t.problem("not every run settled within %s (--settle-timeout)", t.cfg.SettleTimeout)
			return nil
		}
		for i, w := range workers {
			if w.proc.Exited() {
				t.problem("redelivery worker %s exited: %s", w.name, lastLine(w.proc.Tail()))
				nw, err := t.startWorker(ctx, "redeliver", "", 0, nil)
				if err != nil {
					return err
				}
				workers[i] = nw
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// reconcilePass runs `retrysafe reconcile` once, as an operator would
// before declaring an action stuck.
func (t *tester) reconcilePass(ctx context.Context) error {
	p, err := harness.Start(ctx, harness.Spec{
		Name: "reconcile", Bin: t.cfg.Bin, Log: t.cfg.Log, Env: t.stack.Env(),
		Args: []string{"reconcile", "--schema", t.stack.Cfg.Schema, "--lease", t.cfg.Timings.Lease.String(), "--timeout", t.cfg.Timings.ProviderTimeout.String()},
	})
	if err != nil {
		return err
	}
	select {
	case <-p.Done():
	case <-time.After(time.Minute):
		p.Kill()
		return errors.New("reconcile did not finish in a minute")
	}
	if err := p.Err(); err != nil {
		return fmt.Errorf("%v: %s", err, lastLine(p.Tail()))
	}
	return nil
}
