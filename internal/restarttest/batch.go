package restarttest

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/agent"
)

// killPhase sends a scenario's runs, a batch at a time, to workers armed
// for it, and kills each worker at the scenario's point. Then, at most
// twice, a worker armed the same way takes what the batches left in the
// queue (jobs beyond a worker's concurrency, reply jobs), so that most
// runs of a scenario meet its point; what is still left goes to the next
// scenario's worker or to the redelivery.
func (t *tester) killPhase(ctx context.Context, s scenario) error {
	runs := t.byScen[s.name]
	pending := runs
	for leftoverRounds := 0; ; {
		n := min(t.cfg.Batch, len(pending))
		chunk := pending[:n]
		pending = pending[n:]
		scope := chunk
		if len(chunk) == 0 {
			left, err := t.runsWithAvailableJobs(ctx, runs)
			if err != nil {
				return err
			}
			if len(left) == 0 || leftoverRounds == 2 {
				return nil
			}
			leftoverRounds++
			scope = left
		}
		if err := t.batch(ctx, s, chunk, scope); err != nil {
			return err
		}
	}
}

// runsWithAvailableJobs lists the runs with a job waiting in the queue
// (never fetched, or snoozed back) that a worker could take now.
func (t *tester) runsWithAvailableJobs(ctx context.Context, runs []*RunPlan) ([]*RunPlan, error) {
	var ids []string
	err := retryQuery(ctx, func() error {
		rows, err := t.stack.Pool.Query(ctx, `SELECT DISTINCT args->>'message_id' FROM river_job
			WHERE kind = ANY($1) AND state = 'available' AND scheduled_at <= now() AND args->>'message_id' = ANY($2)`,
			jobKinds, messageIDs(runs))
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []*RunPlan
	seen := map[int]bool{}
	for _, id := range ids {
		if r := t.byMsg[id]; r != nil && !seen[r.Index] {
			seen[r.Index] = true
			out = append(out, r)
		}
	}
	return out, nil
}

// batch delivers chunk (possibly empty: a round for leftovers) to a worker
// armed for s and kills it; scope is the runs the worker is expected to
// work (chunk, or the leftovers).
//
// How the worker dies depends on the scenario:
//   - a failpoint: the worker kills itself at the k-th hit of the point;
//   - provider-call: the proxy kills it on its k-th answered charge;
//   - random: a timer fires a random delay after the worker started
//     working the scope (its first job running);
//   - a fault: a random delay after the fault first happened (the PSP
//     fault asked for, PostgreSQL restarted, a job handed to the second
//     racer).
//
// A worker whose failpoint has not fired once it has nothing of the scope
// left to do, or by killDeadline, is killed anyway ("forced").
func (t *tester) batch(ctx context.Context, s scenario, chunk, scope []*RunPlan) error {
	st := t.stats[s.name]
	// Every draw from t.rng happens here, in order, before any goroutine
	// starts: one seed, one plan.
	k := 1 + t.rng.IntN(min(3, max(1, len(scope))))
	proxySeed := t.rng.Uint64()
	randomKill := time.Duration(t.rng.IntN(400)) * time.Millisecond
	faultKill := time.Duration(t.rng.IntN(700)) * time.Millisecond
	restartAfter := time.Duration(t.rng.IntN(200)) * time.Millisecond
	raceDelay := time.Duration(500+t.rng.IntN(2000)) * time.Millisecond

	proxy, err := newPSPProxy(t.stack.PSP.Ready, proxySeed)
	if err != nil {
		return err
	}
	defer proxy.Close()

	var (
		failpoint string
		fault     string
		killAt    int
		hosted    atomic.Pointer[worker] // for the proxy's kill
		role      = strings.TrimPrefix(s.name, "fault:")
		race      = s.fault != nil && s.fault.Name == "race"
		dbFault   = s.fault.dbFault()
	)
	switch {
	case s.point != nil && s.point.Failpoint != "":
		failpoint = s.point.Failpoint
	case s.point != nil && s.point.Name == "provider-call":
		killAt = k
	case race:
		// The first racer is slow inside the PSP call, so that the second
		// gets the job while the first still holds it.
		fault = "delay=" + raceDelay.String()
	case s.fault != nil && !dbFault:
		fault = pspFault(s.fault.Name, t.cfg.Timings)
	}
	rate := 0.5
	if race {
		rate = 1
	}
	proxy.configure(fault, rate, killAt, func() {
		if w := hosted.Load(); w != nil {
			t.killWorker(w, "proxy")
		}
	})
	w, err := t.startWorker(ctx, role, failpoint, k, proxy)
	if err != nil {
		return err
	}
	hosted.Store(w)
	st.workers++
	workers := []*worker{w}

	var deliveries sync.WaitGroup
	delivered := make(chan struct{})
	deliveries.Go(func() { t.deliverRuns(ctx, chunk); close(delivered) })

	// timed: the scenario ends with a timer, started by its trigger.
	timed := failpoint == "" && killAt == 0
	var (
		timer        <-chan time.Time
		restarted    chan struct{}
		handedOut    = map[int64]bool{}
		idleSince    time.Time
		restartBegun bool
		raceFailed   bool
		started      = time.Now()
	)
	arm := func(d time.Duration) {
		if timer == nil {
			timer = time.After(d)
		}
	}
	deadline := time.NewTimer(killDeadline)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !w.proc.Exited() {
		select {
		case <-ctx.Done():
			for _, x := range workers {
				x.proc.Kill()
			}
			return ctx.Err()
		case <-w.proc.Done():
		case <-restarted:
			restarted = nil
			// The worker dies a little later: after a crash or a
			// failover it must first have found the database again.
			if s.fault.Name == "pg-restart" {
				arm(faultKill / 2)
			} else {
				arm(time.Second + faultKill)
			}
			deadline.Reset(killDeadline)
		case <-timer:
			t.killWorker(w, "timer")
		case <-deadline.C:
			t.killWorker(w, "forced")
		case <-tick.C:
			// busy: the worker has started on the scope (the trigger of
			// the random kill, the restart and the race).
			busy := func() bool { return timer == nil && t.working(ctx, scope, w.start) }
			switch {
			case !timed:
				// A failpoint all of whose messages went past it never
				// fires: once the worker has nothing of the scope left
				// to do, do not wait for the deadline.
				if isClosed(delivered) && t.idle(ctx, scope, w.start) {
					if idleSince.IsZero() {
						idleSince = time.Now()
					} else if time.Since(idleSince) > 500*time.Millisecond {
						t.killWorker(w, "forced")
					}
				} else {
					idleSince = time.Time{}
				}
			case s.point != nil: // random
				if busy() {
					arm(randomKill)
				}
			case dbFault:
				// A restart goes once the worker is working the batch; a
				// crash or failover once a charge has reached the PSP too,
				// so that claims, completions and provider calls are in
				// flight when the database dies.
				trigger := busy()
				if s.fault.Name != "pg-restart" {
					posts, _, _ := proxy.stats()
					trigger = trigger && posts > 0
				}
				if !restartBegun && (time.Since(started) > 3*time.Second || trigger) {
					restartBegun = true
					restarted = make(chan struct{})
					go func(done chan struct{}) {
						defer close(done)
						time.Sleep(restartAfter)
						t.databaseFault(ctx, s.fault.Name, st)
					}(restarted)
				}
			case race:
				// The second racer starts once the first holds the
				// batch, and gets its jobs handed over.
				if len(workers) == 1 && !raceFailed && (time.Since(started) > 3*time.Second || busy()) {
					b, err := t.startWorker(ctx, "race-b", "", 0, nil)
					if err != nil {
						t.problem("start the second racer: %v", err)
						raceFailed = true
					} else {
						st.workers++
						workers = append(workers, b)
					}
				}
				if len(workers) == 2 {
					if n := t.handOut(ctx, scope, handedOut, w.start); n > 0 {
						t.mu.Lock()
						st.raceHandouts += n
						t.mu.Unlock()
						arm(200*time.Millisecond + faultKill)
					}
				}
			default: // a PSP fault
				if _, injected, _ := proxy.stats(); injected > 0 {
					arm(faultKill)
				}
			}
			if timed && timer == nil && restarted == nil && time.Since(started) > 5*time.Second {
				arm(0) // the trigger never came: end the batch
			}
		}
	}
	// The second racer dies at the end of the batch too.
	for _, x := range workers[1:] {
		t.killWorker(x, "forced")
	}
	if restarted != nil {
		<-restarted
	}
	deliveries.Wait()
	t.recordKills(ctx, s.name, workers)
	_, injected, _ := proxy.stats()
	t.mu.Lock()
	st.faultsInjected += injected
	t.mu.Unlock()
	return nil
}

// pspFault is the X-Sandbox-Fault value of a PSP fault scenario.
func pspFault(name string, tm Timings) string {
	switch name {
	case "psp-500":
		return "fail-before"
	case "psp-drop":
		return "drop-after"
	case "psp-fail-after":
		return "fail-after"
	case "psp-slow":
		// Longer than the worker's provider timeout: the worker gives up,
		// the charge exists.
		return "slow=" + (tm.ProviderTimeout + time.Second).String()
	}
	return ""
}

// handOut makes the queue hand every running inbox job of chunk to a
// second worker, once per job, while the first still works it: what an
// at-least-once queue does when a visibility timeout runs out on a slow
// worker. It returns how many jobs it handed out.
func (t *tester) handOut(ctx context.Context, chunk []*RunPlan, done map[int64]bool, since time.Time) int {
	seen := make([]int64, 0, len(done))
	for id := range done {
		seen = append(seen, id)
	}
	rows, err := t.stack.Pool.Query(ctx, `UPDATE river_job SET state = 'available', scheduled_at = now()
		WHERE kind = $1 AND state = 'running' AND args->>'message_id' = ANY($2) AND NOT (id = ANY($3))
			AND attempted_at >= $4 AND attempted_at < now() - interval '100 milliseconds'
		RETURNING id`, agent.KindInbox, messageIDs(chunk), seen, since)
	if err != nil {
		return 0
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id int64
		if rows.Scan(&id) == nil {
			done[id] = true
			n++
		}
	}
	return n
}
