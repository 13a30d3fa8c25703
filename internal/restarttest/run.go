package restarttest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/internal/harness"
)

// killDeadline bounds how long an armed worker may live: a failpoint that
// has not fired by then (its messages all went past it) is replaced by a
// plain SIGKILL, recorded as "forced".
const killDeadline = 12 * time.Second

// jobKinds are the River jobs of one message: its inbox job and its reply
// (outbox) job.
var jobKinds = []string{agent.KindInbox, agent.KindReply}

// Kill is one worker process the test killed (or that died).
type Kill struct {
	Scenario string `json:"scenario"`
	Worker   string `json:"worker"`
	// How: "failpoint" (the armed point fired), "proxy" (inside the
	// provider call), "timer" (random-time SIGKILL), "forced" (the
	// failpoint had not fired by the deadline, or the racing worker at
	// the end of its batch), "exited" (died of something else).
	How     string `json:"how"`
	Point   string `json:"point,omitempty"`
	RunsHit int    `json:"runs_hit"` // runs with a job in flight in the process
}

// scenarioStats is what happened to a scenario's batches beyond kills.
type scenarioStats struct {
	faultsInjected int // PSP faults asked for by the proxy
	pgRestarts     int
	pgCrashes      int
	failovers      int
	dbDown         time.Duration // longest time without a database (crash, failover)
	raceHandouts   int           // running jobs handed to a second worker
	workers        int
}

type tester struct {
	cfg       Config
	scenarios []scenario
	runs      []*RunPlan
	byScen    map[string][]*RunPlan
	byMsg     map[string]*RunPlan
	rng       *rand.Rand
	stack     *harness.Stack
	start     time.Time
	settings  Settings

	mu         sync.Mutex
	kills      []Kill
	stats      map[string]*scenarioStats
	deliveries map[int]int // run index → webhook posts answered 200
	delivered  map[int]bool
	hits       map[int]int // run index → kills that found it in flight
	problems   []string    // harness-level failures (they fail the verdict)
	workerSeq  int
	pixPaid    int // API Pix: charges paid after the runs settled
	lastKill   time.Time
	lastDB     time.Time // when the last database fault ended
	leader     string    // riverLeader, read before the redelivery workers stop
	progress   Progress
	// Refunds (API Pix, Config.RefundRate): serve's proxy, what the
	// refund phase saw, kills that found a run's refund held.
	serveProxy *pspProxy
	refunds    *RefundCheck
	refundHits map[int]int
}

// Run executes one restart test and returns its report. An error means
// the test could not run (no database, a process would not start); a test
// that ran and found duplicates returns a report whose Pass is false.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	scens, err := cfg.scenarios(cfg.DatabaseURL == "")
	if err != nil {
		return nil, err
	}
	if err := cfg.validate(len(scens)); err != nil {
		return nil, err
	}
	for _, tp := range cfg.Templates {
		if err := tp.check(); err != nil {
			return nil, err
		}
	}
	t := &tester{
		cfg: cfg, scenarios: scens, byScen: map[string][]*RunPlan{}, byMsg: map[string]*RunPlan{},
		rng:   rand.New(rand.NewPCG(uint64(cfg.Seed), 0x726573746172)),
		stats: map[string]*scenarioStats{}, deliveries: map[int]int{}, delivered: map[int]bool{}, hits: map[int]int{},
		refundHits: map[int]int{}, start: time.Now(),
	}
	names := make([]string, len(scens))
	for i, s := range scens {
		names[i] = s.name
		t.stats[s.name] = &scenarioStats{}
	}
	t.runs = planRunsOf(t.rng, cfg.Runs, names, cfg.Templates, cfg.Seed, t.keyKinds())
	t.planRefunds()
	for _, r := range t.runs {
		t.byScen[r.Scenario] = append(t.byScen[r.Scenario], r)
		for _, m := range r.Messages {
			t.byMsg[m.ID] = r
		}
	}
	t.progress = Progress{Phase: "starting", Total: len(scens), Runs: cfg.Runs}

	stopProgress := t.reportProgress()
	defer stopProgress()

	wargs := append(cfg.Timings.workerArgs(),
		"--concurrency", fmt.Sprint(cfg.Concurrency),
		"--max-conns", fmt.Sprint(2*cfg.Concurrency+4),
		"--journal", cfg.Journal,
		"--shutdown-timeout", "3s")
	sargs := []string{"--lease", cfg.Timings.Lease.String(), "--timeout", cfg.Timings.ProviderTimeout.String(),
		"--reconcile-interval", cfg.Timings.ReconcileInterval.String()}
	if cfg.MaxAttempts > 0 {
		wargs = append(wargs, "--max-attempts", fmt.Sprint(cfg.MaxAttempts))
		sargs = append(sargs, "--max-attempts", fmt.Sprint(cfg.MaxAttempts))
	}
	if cfg.ServeReconcileOff {
		sargs = append(sargs, "--reconcile=false")
	}
	wargs = append(wargs, t.pspWorkerArgs()...)
	var modelArgs []string
	if cfg.ModelLatency > 0 {
		modelArgs = []string{"--latency", cfg.ModelLatency.String()}
	}
	t.settings = Settings{
		WorkerFlags: strings.Join(wargs, " "), ServeFlags: strings.Join(sargs, " "),
		Workers: cfg.Workers, Batch: cfg.Batch, Journal: cfg.Journal, Naive: cfg.Naive,
		WrongAmountRate: cfg.WrongAmountRate, ModelLatency: cfg.ModelLatency.String(),
		RescueAfter: cfg.Timings.RescueAfter.String(),
		Redelivery: "River's own rescuer: a killed job stays 'running' until the leader's rescuer " +
			"(every 30 s, and once when a client becomes leader) finds it older than --rescue-after; " +
			"the test waits --rescue-after after the last kill before starting the redelivery workers, " +
			"so that the new leader's first pass rescues every killed job",
	}
	for _, s := range scens {
		t.settings.Scenarios = append(t.settings.Scenarios, s.name)
	}

	db := harness.DatabaseConfig{SynchronousCommit: cfg.DBSynchronousCommit, SeparatePSP: cfg.DatabaseURL == ""}
	for _, sc := range scens {
		if sc.fault != nil && sc.fault.Name == "pg-failover" {
			db.Standby = cmp.Or(cfg.Standby, "sync")
		}
	}
	scfg := harness.StackConfig{
		DatabaseURL: cfg.DatabaseURL, Database: db, Keep: cfg.Keep, Bin: cfg.Bin, Log: cfg.Log,
		Tenant: "restart-test", PhoneNumberID: "5511400000001",
		ModelSeed: cfg.Seed, ModelWrongAmountRate: cfg.WrongAmountRate, ModelArgs: modelArgs,
		WorkerArgs: wargs, ServeArgs: sargs, PSPFlavour: t.pspFlavour(),
	}
	if t.refundsPlanned() {
		scfg.ServeAPIPixURL = t.serveProxyURL
	}
	stack, err := harness.StartStack(ctx, scfg)
	if t.serveProxy != nil {
		defer t.serveProxy.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("start the stack: %w", err)
	}
	defer stack.Close()
	t.stack = stack
	t.settings.Schema = stack.Cfg.Schema
	t.settings.Database = describeDatabase(ctx, stack)

	for _, r := range t.runs {
		if err := stack.SeedConversation(ctx, r.WaID, r.Customer, r.Invoice, r.AmountCents); err != nil {
			return nil, fmt.Errorf("seed conversation: %w", err)
		}
	}

	t.setPhase("kills", "")
	for i, s := range scens {
		t.setPhase("kills", s.name)
		if err := t.killPhase(ctx, s); err != nil {
			return nil, err
		}
		t.mu.Lock()
		t.progress.Scenarios = i + 1
		t.mu.Unlock()
	}
	t.setPhase("redelivery", "")
	if err := t.redeliver(ctx); err != nil {
		return nil, err
	}
	t.setPhase("verifying", "")
	if err := t.reconcilePass(ctx); err != nil {
		t.problem("reconcile pass: %v", err)
	}
	if err := t.payAll(ctx); err != nil {
		t.problem("pay the charges: %v", err)
	}
	if err := t.refundPhase(ctx); err != nil {
		t.problem("refunds: %v", err)
	}
	rep, err := t.collect(ctx)
	if err != nil {
		return nil, err
	}
	t.checkReceipts(rep)
	t.collectRefunds(ctx, rep)
	rep.RiverLeader = t.leader
	t.setPhase("done", "")
	return rep, nil
}

func (t *tester) problem(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.problems = append(t.problems, fmt.Sprintf(format, args...))
}

func (t *tester) setPhase(phase, scen string) {
	t.mu.Lock()
	t.progress.Phase, t.progress.Scenario = phase, scen
	p := t.progress
	t.mu.Unlock()
	if t.cfg.Progress != nil {
		p.Elapsed = time.Since(t.start)
		t.cfg.Progress(p)
	}
}

// reportProgress calls cfg.Progress every second until stopped.
func (t *tester) reportProgress() func() {
	if t.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				t.mu.Lock()
				p := t.progress
				t.mu.Unlock()
				p.Elapsed = time.Since(t.start)
				t.cfg.Progress(p)
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// failpointsEnv arms a worker: the crash point (if any) and, in naive
// mode, the broken control.
func (t *tester) failpointsEnv(point string) []string {
	var fps []string
	if t.cfg.Naive {
		fps = append(fps, agent.FailNaiveRandomKey)
	}
	if point != "" {
		fps = append(fps, point)
	}
	if len(fps) == 0 {
		return nil
	}
	return []string{"RETRYSAFE_FAILPOINTS=" + strings.Join(fps, ",")}
}

// worker is a worker process of the kill phase and what it was armed with.
type worker struct {
	proc   *harness.Proc
	name   string
	armed  string // failpoint name with its count, or ""
	point  string // failpoint name
	proxy  *pspProxy
	start  time.Time
	killed string // how the test ended it, when it did
}

// startWorker starts a worker; with a proxy, the worker reaches the PSP
// through it.
func (t *tester) startWorker(ctx context.Context, role, failpoint string, k int, proxy *pspProxy, args ...string) (*worker, error) {
	t.mu.Lock()
	t.workerSeq++
	name := fmt.Sprintf("%s-%d", role, t.workerSeq)
	t.mu.Unlock()
	failpoint = t.failpointFor(failpoint)
	w := &worker{name: name, point: failpoint, proxy: proxy}
	armed := ""
	if failpoint != "" {
		armed = fmt.Sprintf("%s@%d", failpoint, k)
		w.armed = armed
	}
	env := t.failpointsEnv(armed)
	if proxy != nil {
		env = append(env, t.pspURLEnv(proxy.URL()))
	}
	w.start = time.Now()
	p, err := t.stack.StartWorkerWith(ctx, name, append([]string{"--owner", name}, args...), env...)
	if err != nil {
		return nil, fmt.Errorf("start worker %s: %w", name, err)
	}
	w.proc = p
	return w, nil
}

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

// databaseFault does a pg-* fault to the test's own cluster and counts it.
func (t *tester) databaseFault(ctx context.Context, name string, st *scenarioStats) {
	var down time.Duration
	switch name {
	case "pg-restart":
		if err := t.stack.Cluster.Restart(ctx); err != nil {
			t.problem("pg_ctl restart: %v", err)
			return
		}
	case "pg-crash":
		d, err := t.stack.CrashDatabase(ctx)
		if err != nil {
			t.problem("crash PostgreSQL: %v", err)
			return
		}
		down = d
	case "pg-failover":
		ft, err := t.stack.Failover(ctx)
		if err != nil {
			t.problem("failover: %v", err)
			return
		}
		down = ft.Down
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch name {
	case "pg-restart":
		st.pgRestarts++
	case "pg-crash":
		st.pgCrashes++
	case "pg-failover":
		st.failovers++
	}
	st.dbDown = max(st.dbDown, down)
	t.lastDB = time.Now()
}

// riverLeader says which River client leads once the redelivery is done,
// and whether it was elected after the last database fault: River's
// leader table is UNLOGGED, so crash recovery empties it and a standby
// never has its rows; the queue's maintenance (the rescuer the redelivery
// depends on) needs a new election after every crash or failover.
func (t *tester) riverLeader(ctx context.Context) string {
	t.mu.Lock()
	last := t.lastDB
	t.mu.Unlock()
	if last.IsZero() {
		return ""
	}
	var id string
	var elected time.Time
	err := retryQuery(ctx, func() error {
		return t.stack.Pool.QueryRow(ctx, `SELECT leader_id, elected_at FROM river_leader ORDER BY elected_at DESC LIMIT 1`).Scan(&id, &elected)
	})
	if err != nil {
		t.problem("River has no leader after the redelivery: %v", err)
		return ""
	}
	if !elected.After(last) {
		t.problem("River's leader %s was elected at %s, before the last database fault ended (%s)", id, elected.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("%s, elected %s after the last database fault ended", id, elected.Sub(last).Round(100*time.Millisecond))
}

// describeDatabase says which database the test ran on and with which
// settings, as the server reports them to a new session (the database's
// own default included).
func describeDatabase(ctx context.Context, stack *harness.Stack) string {
	var fsync, syncCommit, fpw, standbys string
	err := stack.Pool.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit'),
		current_setting('full_page_writes'), current_setting('synchronous_standby_names')`).Scan(&fsync, &syncCommit, &fpw, &standbys)
	settings := fmt.Sprintf("fsync=%s synchronous_commit=%s full_page_writes=%s", fsync, syncCommit, fpw)
	if err != nil {
		settings = "settings unreadable: " + err.Error()
	}
	if stack.Cluster == nil {
		return "given by --database-url / DATABASE_URL (" + settings + ")"
	}
	d := fmt.Sprintf("private cluster on 127.0.0.1:%d (started by the test; %s)", stack.Cluster.Port, settings)
	if stack.Standby != nil {
		mode := "asynchronous"
		if standbys != "" {
			mode = "synchronous, synchronous_standby_names=" + standbys
		}
		d += fmt.Sprintf(", streaming standby on 127.0.0.1:%d (%s), processes given both hosts with target_session_attrs=read-write", stack.Standby.Port, mode)
	}
	if stack.PSPCluster != nil {
		d += fmt.Sprintf("; the PSP's tables on a cluster of their own (127.0.0.1:%d), which no fault touches", stack.PSPCluster.Port)
	}
	return d
}

// working reports whether a worker started at since has a job of scope
// running.
func (t *tester) working(ctx context.Context, scope []*RunPlan, since time.Time) bool {
	var n int
	err := t.stack.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = ANY($1) AND args->>'message_id' = ANY($2)
		AND state = 'running' AND attempted_at >= $3`, jobKinds, messageIDs(scope), since).Scan(&n)
	return err == nil && n > 0
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// idle reports whether no job of scope is waiting to be fetched now or
// running in a worker started at or after since.
func (t *tester) idle(ctx context.Context, scope []*RunPlan, since time.Time) bool {
	var n int
	err := t.stack.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = ANY($1) AND args->>'message_id' = ANY($2)
		AND ((state = 'available' AND scheduled_at <= now()) OR (state = 'running' AND attempted_at >= $3))`,
		jobKinds, messageIDs(scope), since).Scan(&n)
	return err == nil && n == 0
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

// killWorker SIGKILLs w (once) and notes how.
func (t *tester) killWorker(w *worker, how string) {
	t.mu.Lock()
	if w.killed == "" && !w.proc.Exited() {
		w.killed = how
	}
	t.mu.Unlock()
	w.proc.Kill()
}

// recordKills notes the dead workers of a batch: how each died and which
// runs they hosted.
func (t *tester) recordKills(ctx context.Context, scen string, workers []*worker) {
	ks := make([]Kill, len(workers))
	for i, w := range workers {
		<-w.proc.Done()
		t.mu.Lock()
		how := w.killed // written by killWorker, maybe on the proxy's goroutine
		t.mu.Unlock()
		ks[i] = Kill{Scenario: scen, Worker: w.name, How: how}
		if w.point != "" && strings.Contains(w.proc.Tail(), "failpoint "+w.point+" hit") {
			ks[i].How, ks[i].Point = "failpoint", w.armed
		}
		if ks[i].How == "" {
			ks[i].How = "exited"
			t.problem("worker %s exited on its own: %s", w.name, lastLine(w.proc.Tail()))
		}
	}
	// Jobs these processes fetched and never finished stay 'running': they
	// are the runs the kills hit. No other worker has run since the first
	// of them started.
	var ids []string
	err := retryQuery(ctx, func() error {
		rows, err := t.stack.Pool.Query(ctx, `SELECT DISTINCT args->>'message_id' FROM river_job
			WHERE kind = ANY($1) AND state = 'running' AND attempted_at >= $2`, jobKinds, workers[0].start)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		t.problem("list the jobs %s left: %v", workers[0].name, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	hit := map[int]bool{}
	for _, id := range ids {
		if r := t.byMsg[id]; r != nil && !hit[r.Index] {
			hit[r.Index] = true
			t.hits[r.Index]++
		}
	}
	ks[0].RunsHit = len(hit)
	t.kills = append(t.kills, ks...)
	t.progress.Kills = len(t.kills)
	t.lastKill = time.Now()
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
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
	done := map[string]bool{}
	err := retryQuery(ctx, func() error {
		rows, err := t.stack.Pool.Query(ctx, `
			SELECT m.message_id
			FROM messages m
			JOIN agent_turns tu ON tu.tenant_id = m.tenant_id AND tu.message_id = m.message_id
			WHERE m.tenant_id = $1 AND m.direction = 'in' AND m.message_id = ANY($2)
				AND tu.reply_status <> 'pending'
				AND NOT EXISTS (SELECT 1 FROM river_job j WHERE j.kind = ANY($3) AND j.args->>'message_id' = m.message_id
					AND j.state NOT IN ('completed', 'cancelled', 'discarded'))`,
			t.stack.Cfg.Tenant, ids, jobKinds)
		if err != nil {
			return err
		}
		defer rows.Close()
		clear(done)
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			done[id] = true
		}
		return rows.Err()
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
				var started int
				if err := t.stack.Pool.QueryRow(ctx, `SELECT count(*) FROM actions WHERE tenant_id = $1 AND status = 'started'`, t.stack.Cfg.Tenant).Scan(&started); err == nil && started == 0 {
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

func messageIDs(runs []*RunPlan) []string {
	var ids []string
	for _, r := range runs {
		for _, m := range r.Messages {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// retryQuery runs q, retrying for a while: the test restarts PostgreSQL on
// purpose, and a pooled connection may be dead for the first query after.
func retryQuery(ctx context.Context, q func() error) error {
	var err error
	for attempt := 0; attempt < 30; attempt++ {
		if err = q(); err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return err
}
