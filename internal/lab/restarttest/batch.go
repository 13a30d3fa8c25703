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
	b := t.newBatch(s, scope)
	proxy, err := newPSPProxy(t.stack.PSP.Ready, b.proxySeed)
	if err != nil {
		return err
	}
	defer proxy.Close()
	b.proxy = proxy
	if err := b.startWorker(ctx); err != nil {
		return err
	}

	var deliveries sync.WaitGroup
	b.delivered = make(chan struct{})
	deliveries.Go(func() { t.deliverRuns(ctx, chunk); close(b.delivered) })
	if err := b.watch(ctx); err != nil {
		return err
	}
	// The second racer dies at the end of the batch too.
	for _, x := range b.workers[1:] {
		t.killWorker(x, "forced")
	}
	if b.restarted != nil {
		<-b.restarted
	}
	deliveries.Wait()
	t.recordKills(ctx, s.name, b.workers)
	_, injected, _ := proxy.stats()
	t.mu.Lock()
	b.st.faultsInjected += injected
	t.mu.Unlock()
	return nil
}

// batchRun is one batch of a scenario: its draws from the plan, the
// worker armed for it, and where the kill stands.
type batchRun struct {
	t     *tester
	s     scenario
	st    *scenarioStats
	scope []*RunPlan

	// The plan's draws.
	k            int
	proxySeed    uint64
	randomKill   time.Duration
	faultKill    time.Duration
	restartAfter time.Duration
	raceDelay    time.Duration

	// How the worker is armed.
	failpoint string
	fault     string
	killAt    int
	role      string
	race      bool
	dbFault   bool
	// timed: the scenario ends with a timer, started by its trigger.
	timed bool

	proxy     *pspProxy
	w         *worker
	hosted    atomic.Pointer[worker] // for the proxy's kill
	workers   []*worker
	delivered chan struct{} // closed once the chunk is delivered

	timer        <-chan time.Time
	restarted    chan struct{}
	handedOut    map[int64]bool
	idleSince    time.Time
	restartBegun bool
	raceFailed   bool
	started      time.Time
	deadline     killWatch
}

// newBatch draws the batch's numbers and arms it for s.
func (t *tester) newBatch(s scenario, scope []*RunPlan) *batchRun {
	b := &batchRun{t: t, s: s, st: t.stats[s.name], scope: scope, handedOut: map[int64]bool{}}
	// Every draw from t.rng happens here, in order, before any goroutine
	// starts: one seed, one plan.
	b.k = 1 + t.rng.IntN(min(3, max(1, len(scope))))
	b.proxySeed = t.rng.Uint64()
	b.randomKill = time.Duration(t.rng.IntN(400)) * time.Millisecond
	b.faultKill = time.Duration(t.rng.IntN(700)) * time.Millisecond
	b.restartAfter = time.Duration(t.rng.IntN(200)) * time.Millisecond
	b.raceDelay = time.Duration(500+t.rng.IntN(2000)) * time.Millisecond

	b.role = strings.TrimPrefix(s.name, "fault:")
	b.race = s.fault != nil && s.fault.Name == "race"
	b.dbFault = s.fault.dbFault()
	switch {
	case s.point != nil && s.point.Failpoint != "":
		b.failpoint = s.point.Failpoint
	case s.point != nil && s.point.Name == "provider-call":
		b.killAt = b.k
	case b.race:
		// The first racer is slow inside the PSP call, so that the second
		// gets the job while the first still holds it.
		b.fault = "delay=" + b.raceDelay.String()
	case s.fault != nil && !b.dbFault:
		b.fault = pspFault(s.fault.Name, t.cfg.Timings)
	}
	b.timed = b.failpoint == "" && b.killAt == 0
	return b
}

// startWorker starts the batch's worker behind its proxy.
func (b *batchRun) startWorker(ctx context.Context) error {
	rate := 0.5
	if b.race {
		rate = 1
	}
	b.proxy.configure(b.fault, rate, b.killAt, func() {
		if w := b.hosted.Load(); w != nil {
			b.t.killWorker(w, "proxy")
		}
	})
	w, err := b.t.startWorker(ctx, b.role, b.failpoint, b.k, b.proxy)
	if err != nil {
		return err
	}
	b.hosted.Store(w)
	b.st.workers++
	b.w = w
	b.workers = []*worker{w}
	return nil
}

// arm starts the kill's timer, once.
func (b *batchRun) arm(d time.Duration) {
	if b.timer == nil {
		b.timer = time.After(d)
	}
}

// watch waits until the batch's worker is dead, killing it when its
// scenario says.
func (b *batchRun) watch(ctx context.Context) error {
	b.started = time.Now()
	b.deadline = newKillWatch()
	defer b.deadline.stop()
	w := b.w
	for !w.proc.Exited() {
		select {
		case <-ctx.Done():
			for _, x := range b.workers {
				x.proc.Kill()
			}
			return ctx.Err()
		case <-w.proc.Done():
		case <-b.restarted:
			b.restarted = nil
			// The worker dies a little later: after a crash or a
			// failover it must first have found the database again.
			if b.s.fault.Name == "pg-restart" {
				b.arm(b.faultKill / 2)
			} else {
				b.arm(time.Second + b.faultKill)
			}
			b.deadline.timer.Reset(killDeadline)
		case <-b.timer:
			b.t.killWorker(w, "timer")
		case <-b.deadline.timer.C:
			b.t.killWorker(w, "forced")
		case <-b.deadline.tick.C:
			b.look(ctx)
		}
	}
	return nil
}

// busy reports whether the worker has started on the scope (the trigger
// of the random kill, the restart and the race).
func (b *batchRun) busy(ctx context.Context) bool {
	return b.timer == nil && b.t.working(ctx, b.scope, b.w.start)
}

// look is a tick of watch: whether the scenario's trigger has come.
func (b *batchRun) look(ctx context.Context) {
	switch {
	case !b.timed:
		b.lookIdle(ctx)
	case b.s.point != nil: // random
		if b.busy(ctx) {
			b.arm(b.randomKill)
		}
	case b.dbFault:
		b.lookDatabase(ctx)
	case b.race:
		b.lookRace(ctx)
	default: // a PSP fault
		if _, injected, _ := b.proxy.stats(); injected > 0 {
			b.arm(b.faultKill)
		}
	}
	if b.timed && b.timer == nil && b.restarted == nil && time.Since(b.started) > 5*time.Second {
		b.arm(0) // the trigger never came: end the batch
	}
}

// lookIdle ends a failpoint's batch early: a failpoint all of whose
// messages went past it never fires, so once the worker has nothing of
// the scope left to do, do not wait for the deadline.
func (b *batchRun) lookIdle(ctx context.Context) {
	if !isClosed(b.delivered) || !b.t.idle(ctx, b.scope, b.w.start) {
		b.idleSince = time.Time{}
		return
	}
	if b.idleSince.IsZero() {
		b.idleSince = time.Now()
	} else if time.Since(b.idleSince) > 500*time.Millisecond {
		b.t.killWorker(b.w, "forced")
	}
}

// lookDatabase starts the database fault: a restart once the worker is
// working the batch; a crash or failover once a charge has reached the
// PSP too, so that claims, completions and provider calls are in flight
// when the database dies.
func (b *batchRun) lookDatabase(ctx context.Context) {
	trigger := b.busy(ctx)
	if b.s.fault.Name != "pg-restart" {
		posts, _, _ := b.proxy.stats()
		trigger = trigger && posts > 0
	}
	if b.restartBegun || (time.Since(b.started) <= 3*time.Second && !trigger) {
		return
	}
	b.restartBegun = true
	b.restarted = make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		time.Sleep(b.restartAfter)
		b.t.databaseFault(ctx, b.s.fault.Name, b.st)
	}(b.restarted)
}

// lookRace starts the second racer once the first holds the batch, and
// hands it the jobs.
func (b *batchRun) lookRace(ctx context.Context) {
	t := b.t
	if len(b.workers) == 1 && !b.raceFailed && (time.Since(b.started) > 3*time.Second || b.busy(ctx)) {
		w2, err := t.startWorker(ctx, "race-b", "", 0, nil)
		if err != nil {
			t.problem("start the second racer: %v", err)
			b.raceFailed = true
		} else {
			b.st.workers++
			b.workers = append(b.workers, w2)
		}
	}
	if len(b.workers) == 2 {
		if n := t.handOut(ctx, b.scope, b.handedOut, b.w.start); n > 0 {
			t.mu.Lock()
			b.st.raceHandouts += n
			t.mu.Unlock()
			b.arm(200*time.Millisecond + b.faultKill)
		}
	}
}

// killWatch is the clock of a worker the test means to kill: a tick to
// look at it, and a timer that forces the kill at killDeadline.
type killWatch struct {
	timer *time.Timer
	tick  *time.Ticker
}

func newKillWatch() killWatch {
	return killWatch{timer: time.NewTimer(killDeadline), tick: time.NewTicker(50 * time.Millisecond)}
}

func (k killWatch) stop() {
	k.timer.Stop()
	k.tick.Stop()
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
