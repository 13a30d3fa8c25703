package restarttest

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/internal/lab/harness"
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
	t, err := newTester(cfg)
	if err != nil {
		return nil, err
	}
	stopProgress := t.reportProgress()
	defer stopProgress()

	stack, err := harness.StartStack(ctx, t.stackConfig())
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
	if err := t.seedConversations(ctx); err != nil {
		return nil, err
	}

	t.setPhase("kills", "")
	for i, s := range t.scenarios {
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
	return t.verify(ctx)
}

// newTester plans a restart test: its scenarios, its runs and their
// refunds.
func newTester(cfg Config) (*tester, error) {
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
		t.index(r)
	}
	t.progress = Progress{Phase: "starting", Total: len(scens), Runs: cfg.Runs}
	return t, nil
}

// index files r under its scenario and its messages.
func (t *tester) index(r *RunPlan) {
	t.byScen[r.Scenario] = append(t.byScen[r.Scenario], r)
	for _, m := range r.Messages {
		t.byMsg[m.ID] = r
	}
}

// processArgs are the flags of the test's workers and of serve: the
// short timings that bring a killed job back in seconds.
func processArgs(tm Timings, concurrency int, journal string) (worker, serve []string) {
	worker = append(tm.workerArgs(),
		"--concurrency", fmt.Sprint(concurrency),
		"--max-conns", fmt.Sprint(2*concurrency+4),
		"--journal", journal,
		"--shutdown-timeout", "3s")
	serve = []string{"--lease", tm.Lease.String(), "--timeout", tm.ProviderTimeout.String(),
		"--reconcile-interval", tm.ReconcileInterval.String()}
	return worker, serve
}

// stackConfig is the deployment the test starts, and notes its settings
// for the report.
func (t *tester) stackConfig() harness.StackConfig {
	cfg := t.cfg
	wargs, sargs := processArgs(cfg.Timings, cfg.Concurrency, cfg.Journal)
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
	for _, s := range t.scenarios {
		t.settings.Scenarios = append(t.settings.Scenarios, s.name)
	}

	db := harness.DatabaseConfig{SynchronousCommit: cfg.DBSynchronousCommit, SeparatePSP: cfg.DatabaseURL == ""}
	for _, sc := range t.scenarios {
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
	return scfg
}

// seedConversations gives every run its customer and open invoice.
func (t *tester) seedConversations(ctx context.Context) error {
	for _, r := range t.runs {
		if err := t.stack.SeedConversation(ctx, r.WaID, r.Customer, r.Invoice, r.AmountCents); err != nil {
			return fmt.Errorf("seed conversation: %w", err)
		}
	}
	return nil
}

// verify runs the operator's reconcile pass, pays the charges, makes the
// refunds, and reads the outcome.
func (t *tester) verify(ctx context.Context) (*Report, error) {
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
