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
	"github.com/retrysafe/retrysafe/internal/harness"
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
	storms := 0
	for _, r := range t.runs {
		if rng.Float64() < cfg.StormRate {
			r.Duplicates = cfg.StormSize - 1
			storms++
		}
		t.byScen[r.Scenario] = append(t.byScen[r.Scenario], r)
		for _, m := range r.Messages {
			t.byMsg[m.ID] = r
		}
	}
	statsDir, err := os.MkdirTemp("", "retrysafe-soak-stats-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(statsDir)

	tm := cfg.Timings
	wargs := append(tm.workerArgs(), "--concurrency", fmt.Sprint(cfg.Concurrency), "--max-conns", fmt.Sprint(2*cfg.Concurrency+4),
		"--journal", "on", "--shutdown-timeout", "3s")
	sargs := []string{"--lease", tm.Lease.String(), "--timeout", tm.ProviderTimeout.String(), "--reconcile-interval", tm.ReconcileInterval.String()}
	stack, err := harness.StartStack(ctx, harness.StackConfig{
		Database: harness.DatabaseConfig{SynchronousCommit: cfg.DBSynchronousCommit, SeparatePSP: true},
		Bin:      cfg.Bin, Log: cfg.Log, Tenant: "soak", PhoneNumberID: "5511400000002",
		ModelSeed: cfg.Seed, ModelWrongAmountRate: 0.05, WorkerArgs: wargs, ServeArgs: sargs,
		Env: []string{StatsDirEnv + "=" + statsDir},
	})
	if err != nil {
		return nil, fmt.Errorf("start the stack: %w", err)
	}
	defer stack.Close()
	t.stack = stack
	t.settings = Settings{WorkerFlags: strings.Join(wargs, " "), ServeFlags: strings.Join(sargs, " "), Workers: cfg.Workers,
		Journal: "on", WrongAmountRate: 0.05, ModelLatency: "the sandbox's default", Scenarios: []string{scen.name}, Schema: stack.Cfg.Schema,
		RescueAfter: tm.RescueAfter.String(), Redelivery: "long-lived workers; River's rescuer brings back jobs a crash left running"}
	t.settings.Database = describeDatabase(ctx, stack)
	for _, r := range t.runs {
		if err := stack.SeedConversation(ctx, r.WaID, r.Customer, r.Invoice, r.AmountCents); err != nil {
			return nil, fmt.Errorf("seed conversation: %w", err)
		}
	}

	type soakWorker struct {
		w     *worker
		proxy *pspProxy
	}
	workers := make([]*soakWorker, cfg.Workers)
	restarts := 0
	startOne := func(i int) error {
		proxy, err := newPSPProxy(stack.PSP.Ready, rng.Uint64())
		if err != nil {
			return err
		}
		proxy.configureMix(soakFaults(tm), cfg.FaultRate)
		w, err := t.startWorker(ctx, "soak", "", 0, proxy)
		if err != nil {
			proxy.Close()
			return err
		}
		workers[i] = &soakWorker{w: w, proxy: proxy}
		return nil
	}
	var posts, injected int
	closeWorker := func(sw *soakWorker) {
		p, inj, _ := sw.proxy.stats()
		posts += p
		injected += inj
		sw.proxy.Close()
	}
	for i := range workers {
		if err := startOne(i); err != nil {
			return nil, err
		}
	}
	defer func() {
		for _, sw := range workers {
			if sw != nil {
				sw.w.proc.Stop(5 * time.Second)
				sw.proxy.Close()
			}
		}
	}()

	rep := &SoakReport{Seed: cfg.Seed, Runs: n, Storms: storms, Database: t.settings.Database}
	var samples []Sample
	sample := func(at time.Duration) []Sample {
		procs := []*harness.Proc{stack.Server}
		for _, sw := range workers {
			procs = append(procs, sw.w.proc)
		}
		var out []Sample
		for _, p := range procs {
			if p.Exited() {
				continue
			}
			s := Sample{Seconds: at.Seconds(), Process: p.Name, Pid: p.Pid(), RSSKiB: rssKiB(p.Pid())}
			if b, err := os.ReadFile(filepath.Join(statsDir, strconv.Itoa(p.Pid())+".json")); err == nil {
				var rs RuntimeStats
				if json.Unmarshal(b, &rs) == nil {
					s.Goroutines, s.HeapKiB = rs.Goroutines, rs.HeapKiB
				}
			}
			out = append(out, s)
		}
		return out
	}

	// The load.
	loadStart := time.Now()
	var deliveries sync.WaitGroup
	var crashDown time.Duration
	var crashes, redelivered, next int
	newEvery := time.Duration(float64(time.Second) / cfg.Rate)
	newTick := time.NewTicker(newEvery)
	defer newTick.Stop()
	var redeliverC <-chan time.Time
	if cfg.RedeliverRate > 0 {
		rt := time.NewTicker(time.Duration(float64(time.Second) / cfg.RedeliverRate))
		defer rt.Stop()
		redeliverC = rt.C
	}
	crashTick := time.NewTicker(cfg.CrashEvery)
	defer crashTick.Stop()
	sampleTick := time.NewTicker(cfg.SampleEvery)
	defer sampleTick.Stop()
	end := time.After(cfg.Duration)
	progress := func(phase string, latest []Sample, settled int) {
		if cfg.Progress == nil {
			return
		}
		t.mu.Lock()
		d, c := t.progress.Delivered, crashes
		t.mu.Unlock()
		cfg.Progress(SoakProgress{Phase: phase, Elapsed: time.Since(loadStart), Delivered: d, Runs: n, Crashes: c, Settled: settled, Sample: latest})
	}
	crashDone := make(chan struct{})
	close(crashDone)
load:
	for {
		select {
		case <-ctx.Done():
			deliveries.Wait()
			return nil, ctx.Err()
		case <-end:
			break load
		case <-newTick.C:
			if next < n {
				r := t.runs[next]
				next++
				deliveries.Go(func() { t.deliverRun(ctx, r) })
			}
		case <-redeliverC:
			if next > 0 {
				r := t.runs[rng.IntN(next)]
				m := r.Messages[rng.IntN(len(r.Messages))]
				redelivered++
				deliveries.Go(func() { t.post(ctx, r, m) })
			}
		case <-crashTick.C:
			if !isClosed(crashDone) {
				continue // the last crash is still recovering
			}
			crashDone = make(chan struct{})
			go func(done chan struct{}) {
				defer close(done)
				// The crash waits (up to 10 s) for a moment with a job
				// running and an action claimed, not completed: a crash
				// between two messages would test little. What it finds
				// in flight is counted.
				var jobs, started int
				for wait := time.Now(); time.Since(wait) < 10*time.Second; time.Sleep(20 * time.Millisecond) {
					err := stack.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'running'`).Scan(&jobs)
					if err == nil && jobs > 0 {
						// The ledger's rows through the executor's test
						// API, a moment after the jobs: the crash comes a
						// moment after both reads either way.
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
				crashes++
				crashDown = max(crashDown, d)
				rep.CrashJobsRunning += jobs
				rep.CrashActionsStarted += started
				t.mu.Unlock()
			}(crashDone)
		case <-sampleTick.C:
			latest := sample(time.Since(loadStart))
			samples = append(samples, latest...)
			for i, sw := range workers {
				if sw.w.proc.Exited() {
					t.problem("soak worker %s exited: %s", sw.w.name, lastLine(sw.w.proc.Tail()))
					closeWorker(sw)
					restarts++
					if err := startOne(i); err != nil {
						return nil, err
					}
				}
			}
			progress("load", latest, 0)
		}
	}
	loadTook := time.Since(loadStart)
	<-crashDone
	deliveries.Wait()
	rep.Runs = next
	t.runs = t.runs[:next] // the runs never delivered are not part of the verdict
	t.byScen[scen.name] = t.runs

	// Settle: every delivered run answered, nothing queued, nothing started.
	deadline := time.Now().Add(cfg.SettleTimeout)
	for {
		settled, err := t.settledCount(ctx, t.runs)
		if err == nil {
			progress("settle", nil, settled)
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
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	progress("verifying", nil, len(t.runs))
	for _, sw := range workers {
		closeWorker(sw)
	}
	t.mu.Lock()
	t.stats[scen.name].faultsInjected = injected
	t.stats[scen.name].pgCrashes = crashes
	t.stats[scen.name].dbDown = crashDown
	rep.Crashes = crashes
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
	rep.Redeliveries, rep.FaultsAsked, rep.ChargePosts = redelivered, injected, posts
	rep.CrashDownMax = elapsed(crashDown)
	rep.WorkerRestarts = restarts
	rep.Samples = samples
	rep.Trends = trends(samples, cfg.WarmUp, loadTook)

	var fail []string
	if !rr.Pass {
		fail = append(fail, rr.Failures...)
	}
	if crashes == 0 {
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
			rep.Load, rep.Runs, storms, redelivered, injected, posts, pspReqs, crashes)
	} else {
		rep.Verdict = "FAIL: " + strings.Join(fail, "; ")
	}
	progress("done", nil, len(t.runs))
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
