package restarttest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/executor/executortest"
	"github.com/retrysafe/retrysafe/internal/lab/harness"
)

// StatsDirEnv names the directory where a retrysafe process started with
// it writes its runtime figures (RuntimeStats, as <pid>.json, every
// couple of seconds); the soak reads them. Set by the soak, never by a
// deployment.
const StatsDirEnv = "RETRYSAFE_RUNTIME_STATS_DIR"

// RuntimeStats is what a process reports about itself in StatsDirEnv.
type RuntimeStats struct {
	Goroutines int   `json:"goroutines"`
	HeapKiB    int64 `json:"heap_inuse_kib"`
}

// SoakProgress is where a soak stands.
type SoakProgress struct {
	Phase     string // "load", "settle", "verifying", "done"
	Elapsed   time.Duration
	Delivered int
	Runs      int
	Crashes   int
	Settled   int
	Sample    []Sample // the latest per process
}

// Soak runs one soak and returns its report. An error means it could not
// run; a soak that ran and found a duplicate, a lost or stuck intent, or a
// process whose memory or goroutines grew returns a report whose Pass is
// false.
func Soak(ctx context.Context, cfg SoakConfig) (*SoakReport, error) {
	s, err := newSoak(cfg)
	if err != nil {
		return nil, err
	}
	statsDir, err := os.MkdirTemp("", "retrysafe-soak-stats-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(statsDir)
	s.statsDir = statsDir

	stack, err := harness.StartStack(ctx, s.stackConfig())
	if err != nil {
		return nil, fmt.Errorf("start the stack: %w", err)
	}
	defer stack.Close()
	s.setStack(ctx, stack)
	if err := s.t.seedConversations(ctx); err != nil {
		return nil, err
	}
	for i := range s.workers {
		if err := s.startWorker(ctx, i); err != nil {
			return nil, err
		}
	}
	defer s.stopWorkers()

	s.rep = &SoakReport{Seed: cfg.Seed, Runs: s.n, Storms: s.storms, Database: s.t.settings.Database}
	loadTook, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.settle(ctx); err != nil {
		return nil, err
	}
	return s.verdict(ctx, loadTook)
}

// soak is one soak under way: the tester whose runs, deliveries and
// verdict it reuses, its long-lived workers, and what the load did.
type soak struct {
	cfg      SoakConfig
	t        *tester
	rng      *rand.Rand
	scen     scenario
	n        int // runs planned
	storms   int
	statsDir string
	stack    *harness.Stack
	wargs    []string
	sargs    []string
	workers  []*soakWorker
	rep      *SoakReport

	restarts  int
	posts     int // charge requests through the closed workers' proxies
	injected  int // PSP faults they asked for
	samples   []Sample
	loadStart time.Time
	// Written by the load's loop; crashes and crashDown under t.mu.
	crashes     int
	crashDown   time.Duration
	redelivered int
	next        int // runs delivered
}

// soakWorker is a long-lived worker and the proxy that injects its PSP
// faults.
type soakWorker struct {
	w     *worker
	proxy *pspProxy
}

// newSoak plans a soak: its runs, a share of them same-key storms.
func newSoak(cfg SoakConfig) (*soak, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x736f616b))
	n := int(cfg.Rate*cfg.Duration.Seconds()) + 1
	scen := scenario{name: "fault:soak", fault: &soakFault}
	t := &tester{
		cfg: Config{Runs: n, Seed: cfg.Seed, Bin: cfg.Bin, Log: cfg.Log, Timings: cfg.Timings, Workers: cfg.Workers,
			Concurrency: cfg.Concurrency, Journal: "on", Templates: cfg.Templates, SettleTimeout: cfg.SettleTimeout},
		scenarios: []scenario{scen}, byScen: map[string][]*RunPlan{}, byMsg: map[string]*RunPlan{}, rng: rng,
		stats: map[string]*scenarioStats{scen.name: {}}, deliveries: map[int]int{}, delivered: map[int]bool{}, hits: map[int]int{},
		start: time.Now(),
	}
	t.runs = planRuns(rng, n, []string{scen.name}, cfg.Templates, cfg.Seed)
	s := &soak{cfg: cfg, t: t, rng: rng, scen: scen, n: n, workers: make([]*soakWorker, cfg.Workers)}
	for _, r := range t.runs {
		if rng.Float64() < cfg.StormRate {
			r.Duplicates = cfg.StormSize - 1
			s.storms++
		}
		t.index(r)
	}
	return s, nil
}

// stackConfig is the soak's deployment: a private cluster, the PSP's
// tables on one of their own, processes that report their runtime
// figures.
func (s *soak) stackConfig() harness.StackConfig {
	cfg := s.cfg
	s.wargs, s.sargs = processArgs(cfg.Timings, cfg.Concurrency, "on")
	return harness.StackConfig{
		Database: harness.DatabaseConfig{SynchronousCommit: cfg.DBSynchronousCommit, SeparatePSP: true},
		Bin:      cfg.Bin, Log: cfg.Log, Tenant: "soak", PhoneNumberID: "5511400000002",
		ModelSeed: cfg.Seed, ModelWrongAmountRate: 0.05, WorkerArgs: s.wargs, ServeArgs: s.sargs,
		Env: []string{StatsDirEnv + "=" + s.statsDir},
	}
}

// setStack notes the started stack and the settings the report prints.
func (s *soak) setStack(ctx context.Context, stack *harness.Stack) {
	s.stack = stack
	t := s.t
	t.stack = stack
	t.settings = Settings{WorkerFlags: strings.Join(s.wargs, " "), ServeFlags: strings.Join(s.sargs, " "), Workers: s.cfg.Workers,
		Journal: "on", WrongAmountRate: 0.05, ModelLatency: "the sandbox's default", Scenarios: []string{s.scen.name}, Schema: stack.Cfg.Schema,
		RescueAfter: s.cfg.Timings.RescueAfter.String(), Redelivery: "long-lived workers; River's rescuer brings back jobs a crash left running"}
	t.settings.Database = describeDatabase(ctx, stack)
}

// startWorker starts worker i behind a proxy of its own that injects the
// PSP faults.
func (s *soak) startWorker(ctx context.Context, i int) error {
	proxy, err := newPSPProxy(s.stack.PSP.Ready, s.rng.Uint64())
	if err != nil {
		return err
	}
	proxy.configureMix(soakFaults(s.cfg.Timings), s.cfg.FaultRate)
	w, err := s.t.startWorker(ctx, "soak", "", 0, proxy)
	if err != nil {
		proxy.Close()
		return err
	}
	s.workers[i] = &soakWorker{w: w, proxy: proxy}
	return nil
}

// closeWorker counts what sw's proxy saw and closes it.
func (s *soak) closeWorker(sw *soakWorker) {
	p, inj, _ := sw.proxy.stats()
	s.posts += p
	s.injected += inj
	sw.proxy.Close()
}

func (s *soak) stopWorkers() {
	for _, sw := range s.workers {
		if sw != nil {
			sw.w.proc.Stop(5 * time.Second)
			sw.proxy.Close()
		}
	}
}

// sample reads the memory and goroutines of serve and every worker.
func (s *soak) sample(at time.Duration) []Sample {
	procs := []*harness.Proc{s.stack.Server}
	for _, sw := range s.workers {
		procs = append(procs, sw.w.proc)
	}
	var out []Sample
	for _, p := range procs {
		if p.Exited() {
			continue
		}
		smp := Sample{Seconds: at.Seconds(), Process: p.Name, Pid: p.Pid(), RSSKiB: rssKiB(p.Pid())}
		if b, err := os.ReadFile(filepath.Join(s.statsDir, strconv.Itoa(p.Pid())+".json")); err == nil {
			var rs RuntimeStats
			if json.Unmarshal(b, &rs) == nil {
				smp.Goroutines, smp.HeapKiB = rs.Goroutines, rs.HeapKiB
			}
		}
		out = append(out, smp)
	}
	return out
}

func (s *soak) progress(phase string, latest []Sample, settled int) {
	if s.cfg.Progress == nil {
		return
	}
	t := s.t
	t.mu.Lock()
	d, c := t.progress.Delivered, s.crashes
	t.mu.Unlock()
	s.cfg.Progress(SoakProgress{Phase: phase, Elapsed: time.Since(s.loadStart), Delivered: d, Runs: s.n, Crashes: c, Settled: settled, Sample: latest})
}

// soakClock paces the load: new intents, redeliveries, crashes, samples,
// and its end.
type soakClock struct {
	newRun    *time.Ticker
	redeliver <-chan time.Time // nil without redeliveries
	crash     *time.Ticker
	sample    *time.Ticker
	end       <-chan time.Time
	stops     []func()
}

func newSoakClock(cfg SoakConfig) *soakClock {
	c := &soakClock{
		newRun: time.NewTicker(time.Duration(float64(time.Second) / cfg.Rate)),
		crash:  time.NewTicker(cfg.CrashEvery),
		sample: time.NewTicker(cfg.SampleEvery),
		end:    time.After(cfg.Duration),
	}
	c.stops = []func(){c.newRun.Stop, c.crash.Stop, c.sample.Stop}
	if cfg.RedeliverRate > 0 {
		rt := time.NewTicker(time.Duration(float64(time.Second) / cfg.RedeliverRate))
		c.stops = append(c.stops, rt.Stop)
		c.redeliver = rt.C
	}
	return c
}

func (c *soakClock) stop() {
	for _, f := range c.stops {
		f()
	}
}

// load sends the mixed load for cfg.Duration, crashes the database every
// cfg.CrashEvery and samples the processes; it returns how long the load
// ran.
func (s *soak) load(ctx context.Context) (time.Duration, error) {
	t, rep, rng := s.t, s.rep, s.rng
	s.loadStart = time.Now()
	var deliveries sync.WaitGroup
	clock := newSoakClock(s.cfg)
	defer clock.stop()
	crashDone := make(chan struct{})
	close(crashDone)
load:
	for {
		select {
		case <-ctx.Done():
			deliveries.Wait()
			return 0, ctx.Err()
		case <-clock.end:
			break load
		case <-clock.newRun.C:
			if s.next < s.n {
				r := t.runs[s.next]
				s.next++
				deliveries.Go(func() { t.deliverRun(ctx, r) })
			}
		case <-clock.redeliver:
			if s.next > 0 {
				r := t.runs[rng.IntN(s.next)]
				m := r.Messages[rng.IntN(len(r.Messages))]
				s.redelivered++
				deliveries.Go(func() { t.post(ctx, r, m) })
			}
		case <-clock.crash.C:
			if !isClosed(crashDone) {
				continue // the last crash is still recovering
			}
			crashDone = make(chan struct{})
			go s.crash(ctx, crashDone)
		case <-clock.sample.C:
			if err := s.sampleAndRestart(ctx); err != nil {
				return 0, err
			}
		}
	}
	loadTook := time.Since(s.loadStart)
	<-crashDone
	deliveries.Wait()
	rep.Runs = s.next
	t.runs = t.runs[:s.next] // the runs never delivered are not part of the verdict
	t.byScen[s.scen.name] = t.runs
	return loadTook, nil
}

// crash crashes the database once, when it finds work in flight, and
// counts what it hit; done is closed once it is over.
func (s *soak) crash(ctx context.Context, done chan struct{}) {
	defer close(done)
	t, stack, rep := s.t, s.stack, s.rep
	// The crash waits (up to 10 s) for a moment with a job running and an
	// action claimed, not completed: a crash between two messages would
	// test little. What it finds in flight is counted.
	var jobs, started int
	for wait := time.Now(); time.Since(wait) < 10*time.Second; time.Sleep(20 * time.Millisecond) {
		err := stack.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'running'`).Scan(&jobs)
		if err == nil && jobs > 0 {
			// The ledger's rows through the executor's test API, a moment
			// after the jobs: the crash comes a moment after both reads
			// either way.
			var n int64
			n, err = executortest.Count(ctx, stack.Pool, executortest.Filter{Status: "started"})
			started = int(n)
		}
		if err == nil && jobs > 0 && started > 0 {
			break
		}
	}
	d, err := stack.CrashDatabase(ctx)
	if err != nil {
		t.problem("crash PostgreSQL: %v", err)
		return
	}
	t.mu.Lock()
	s.crashes++
	s.crashDown = max(s.crashDown, d)
	rep.CrashJobsRunning += jobs
	rep.CrashActionsStarted += started
	t.mu.Unlock()
}

// sampleAndRestart takes a sample of every process and restarts a worker
// that died.
func (s *soak) sampleAndRestart(ctx context.Context) error {
	latest := s.sample(time.Since(s.loadStart))
	s.samples = append(s.samples, latest...)
	for i, sw := range s.workers {
		if sw.w.proc.Exited() {
			s.t.problem("soak worker %s exited: %s", sw.w.name, lastLine(sw.w.proc.Tail()))
			s.closeWorker(sw)
			s.restarts++
			if err := s.startWorker(ctx, i); err != nil {
				return err
			}
		}
	}
	s.progress("load", latest, 0)
	return nil
}

// settle waits until every delivered run is answered, nothing is queued
// and nothing is started.
func (s *soak) settle(ctx context.Context) error {
	cfg, t, stack := s.cfg, s.t, s.stack
	deadline := time.Now().Add(cfg.SettleTimeout)
	for {
		settled, err := t.settledCount(ctx, t.runs)
		if err == nil {
			s.progress("settle", nil, settled)
			if settled == len(t.runs) {
				started, err := executortest.Count(ctx, stack.Pool, executortest.Filter{Tenant: stack.Cfg.Tenant, Status: "started"})
				if err == nil && started == 0 {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			t.problem("not every run settled within %s (--settle-timeout)", cfg.SettleTimeout)
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return nil
}

// verdict closes the workers, runs the operator's reconcile pass, reads
// the runs' outcome and judges the soak.
func (s *soak) verdict(ctx context.Context, loadTook time.Duration) (*SoakReport, error) {
	t, rep := s.t, s.rep
	s.progress("verifying", nil, len(t.runs))
	for _, sw := range s.workers {
		s.closeWorker(sw)
	}
	t.mu.Lock()
	t.stats[s.scen.name].faultsInjected = s.injected
	t.stats[s.scen.name].pgCrashes = s.crashes
	t.stats[s.scen.name].dbDown = s.crashDown
	rep.Crashes = s.crashes
	t.mu.Unlock()
	if err := t.reconcilePass(ctx); err != nil {
		t.problem("reconcile pass: %v", err)
	}
	rr, err := t.collect(ctx)
	if err != nil {
		return nil, err
	}
	rep.Restart = rr
	rep.Load, rep.Total = elapsed(loadTook), elapsed(time.Since(t.start))
	rep.Redeliveries, rep.FaultsAsked, rep.ChargePosts = s.redelivered, s.injected, s.posts
	rep.CrashDownMax = elapsed(s.crashDown)
	rep.WorkerRestarts = s.restarts
	rep.Samples = s.samples
	rep.Trends = trends(s.samples, s.cfg.WarmUp, loadTook)

	var fail []string
	if !rr.Pass {
		fail = append(fail, rr.Failures...)
	}
	if s.crashes == 0 {
		fail = append(fail, "the database was never crashed (--duration shorter than --crash-every?)")
	}
	for _, tr := range rep.Trends {
		if !tr.Flat {
			fail = append(fail, fmt.Sprintf("%s (pid %d) grew: RSS %d → %d KiB, goroutines %d → %d", tr.Process, tr.Pid, tr.RSSEarlyKiB, tr.RSSLateKiB, tr.GoroutinesEarly, tr.GoroutinesLate))
		}
	}
	if len(rep.Trends) == 0 {
		fail = append(fail, "no process was sampled long enough to compare (--duration too short for --warm-up?)")
	}
	rep.Failures = fail
	rep.Pass = len(fail) == 0
	pspReqs := rr.PSPRequests
	if rep.Pass {
		rep.Verdict = fmt.Sprintf("PASS: %s of load, %d intents (%d same-key storms, %d webhook redeliveries, %d PSP faults of %d charge requests via the proxies, %d PSP requests), %d database crashes: every intent charged exactly once, 0 lost, 0 stuck; memory and goroutines flat",
			rep.Load, rep.Runs, s.storms, s.redelivered, s.injected, s.posts, pspReqs, s.crashes)
	} else {
		rep.Verdict = "FAIL: " + strings.Join(fail, "; ")
	}
	s.progress("done", nil, len(t.runs))
	return rep, nil
}

// rssKiB reads a process's resident set size from /proc (0 if gone).
func rssKiB(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}
