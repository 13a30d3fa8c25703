package restarttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

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

// SoakConfig is one soak: long-lived serve and workers under a mixed load,
// with the database crashed every CrashEvery.
type SoakConfig struct {
	// Duration of the load; the settle and the verdict come after.
	Duration time.Duration
	// CrashEvery: a hard crash of the database (pgembed.Cluster.Crash:
	// SIGKILL of every process, then crash recovery) this often.
	CrashEvery time.Duration
	// Rate: new intents (runs: a conversation, its invoice and message)
	// per second.
	Rate float64
	// StormRate: share of runs whose first message is posted StormSize
	// times at once (a same-key storm: one message, one intent, one key).
	StormRate float64
	StormSize int
	// RedeliverRate: webhook redeliveries per second of a message
	// delivered earlier (same message id, as WhatsApp redelivers).
	RedeliverRate float64
	// FaultRate: share of charge requests the PSP answers with a fault
	// (500 before charging, charge then drop, charge then 500, charge then
	// answer too late), drawn per request.
	FaultRate float64
	// Workers and Concurrency: the long-lived workers.
	Workers     int
	Concurrency int
	// DBSynchronousCommit as in Config.
	DBSynchronousCommit string
	// SampleEvery: how often the memory and goroutines of serve and the
	// workers are read; WarmUp: samples before it are not compared.
	SampleEvery time.Duration
	WarmUp      time.Duration
	// SettleTimeout bounds the wait for every run to settle after the load.
	SettleTimeout time.Duration

	Seed      int64
	Bin       string
	Log       io.Writer
	Templates []Template
	Timings   Timings
	// Progress, when set, is called every SampleEvery and at the end.
	Progress func(SoakProgress)
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

// Sample is one reading of one process.
type Sample struct {
	Seconds    float64 `json:"seconds"` // since the load began
	Process    string  `json:"process"`
	Pid        int     `json:"pid"`
	RSSKiB     int64   `json:"rss_kib"`
	Goroutines int     `json:"goroutines"`
	HeapKiB    int64   `json:"heap_inuse_kib"`
}

// Trend compares a process's readings early in the load (after the
// warm-up) with those at its end.
type Trend struct {
	Process string `json:"process"`
	Pid     int    `json:"pid"`
	// Early: the median of the readings in the first third after the
	// warm-up; Late: of the last third; Max over the load.
	RSSEarlyKiB     int64  `json:"rss_early_kib"`
	RSSLateKiB      int64  `json:"rss_late_kib"`
	RSSMaxKiB       int64  `json:"rss_max_kib"`
	GoroutinesEarly int    `json:"goroutines_early"`
	GoroutinesLate  int    `json:"goroutines_late"`
	GoroutinesMax   int    `json:"goroutines_max"`
	HeapEarlyKiB    int64  `json:"heap_early_kib"`
	HeapLateKiB     int64  `json:"heap_late_kib"`
	Samples         int    `json:"samples"`
	Flat            bool   `json:"flat"`
	FlatRule        string `json:"flat_rule"`
}

// SoakReport is the outcome of a soak.
type SoakReport struct {
	Pass     bool     `json:"pass"`
	Verdict  string   `json:"verdict"`
	Failures []string `json:"failures"`
	// Load is how long the load actually ran; Total the whole soak.
	Load  string `json:"load"`
	Total string `json:"total"`
	Seed  int64  `json:"seed"`
	// What the load did.
	Runs         int    `json:"runs"`
	Storms       int    `json:"storms"`
	Redeliveries int    `json:"webhook_redeliveries"`
	FaultsAsked  int    `json:"psp_faults"`
	ChargePosts  int    `json:"charge_posts_via_proxies"`
	Crashes      int    `json:"crashes"`
	CrashDownMax string `json:"crash_down_max"`
	// CrashJobsRunning and CrashActionsStarted: River jobs running and
	// actions started (claimed, not completed) just before each crash,
	// summed over the crashes: what they hit.
	CrashJobsRunning    int      `json:"crash_jobs_running"`
	CrashActionsStarted int      `json:"crash_actions_started"`
	WorkerRestarts      int      `json:"worker_restarts"`
	Trends              []Trend  `json:"trends"`
	Samples             []Sample `json:"samples"`
	// Restart is the restart test's own verdict over every run of the
	// soak: one charge per intent, none lost, none stuck, one key.
	Restart  *Report `json:"report"`
	Database string  `json:"database"`
}

func (c *SoakConfig) defaults() {
	if c.Duration == 0 {
		c.Duration = 30 * time.Minute
	}
	if c.CrashEvery == 0 {
		c.CrashEvery = 3 * time.Minute
	}
	if c.Rate == 0 {
		c.Rate = 1
	}
	if c.StormSize == 0 {
		c.StormSize = 8
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.Concurrency == 0 {
		c.Concurrency = 8
	}
	if c.SampleEvery == 0 {
		c.SampleEvery = 10 * time.Second
	}
	if c.WarmUp == 0 {
		c.WarmUp = min(3*time.Minute, c.Duration/5)
	}
	if c.SettleTimeout == 0 {
		c.SettleTimeout = 5 * time.Minute
	}
	if c.Templates == nil {
		c.Templates = DefaultTemplates()
	}
	if c.Timings == (Timings{}) {
		c.Timings = DefaultTimings()
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

func (c *SoakConfig) validate() error {
	switch {
	case c.Duration < 10*time.Second:
		return fmt.Errorf("--duration %s: want at least 10s", c.Duration)
	case c.Rate <= 0 || c.Rate > 50:
		return fmt.Errorf("--rate %v: want (0, 50] new intents per second", c.Rate)
	case c.Rate*c.Duration.Seconds() > 99_000:
		return fmt.Errorf("--rate × --duration: %d runs, want at most 99,000", int(c.Rate*c.Duration.Seconds()))
	case c.StormRate < 0 || c.StormRate > 1 || c.FaultRate < 0 || c.FaultRate > 1:
		return errors.New("--storm-rate and --fault-rate: want 0..1")
	case c.RedeliverRate < 0:
		return errors.New("--redeliver-rate: want at least 0")
	case c.Workers < 1 || c.Workers > 16:
		return fmt.Errorf("--workers %d: want 1..16", c.Workers)
	case c.Concurrency < 1 || c.Concurrency > 100:
		return fmt.Errorf("--concurrency %d: want 1..100", c.Concurrency)
	case c.CrashEvery < 10*time.Second:
		return fmt.Errorf("--crash-every %s: want at least 10s", c.CrashEvery)
	}
	return nil
}

// soakFault is the soak's one row in the restart test's report.
var soakFault = Fault{Name: "soak", Description: "long-lived serve and workers under mixed load (new intents, redeliveries, same-key storms, PSP faults), the database crashed every few minutes"}

// soakFaults are the PSP faults the soak's proxies draw from.
func soakFaults(tm Timings) []string {
	return []string{"fail-before", "drop-after", "fail-after", pspFault("psp-slow", tm)}
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
					err := stack.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM river_job WHERE state = 'running'),
						(SELECT count(*) FROM actions WHERE status = 'started')`).Scan(&jobs, &started)
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
				var started int
				if err := stack.Pool.QueryRow(ctx, `SELECT count(*) FROM actions WHERE tenant_id = $1 AND status = 'started'`, stack.Cfg.Tenant).Scan(&started); err == nil && started == 0 {
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

// trends compares each process's early and late readings. A process is
// flat when its late median RSS is within 25% (plus 8 MiB) of its early
// one and its late median goroutine count within 25% (plus 20).
func trends(samples []Sample, warmUp, load time.Duration) []Trend {
	byPid := map[int][]Sample{}
	var pids []int
	for _, s := range samples {
		if _, ok := byPid[s.Pid]; !ok {
			pids = append(pids, s.Pid)
		}
		byPid[s.Pid] = append(byPid[s.Pid], s)
	}
	var out []Trend
	for _, pid := range pids {
		ss := byPid[pid]
		var early, late []Sample
		span := load - warmUp
		for _, s := range ss {
			at := time.Duration(s.Seconds * float64(time.Second))
			switch {
			case at < warmUp:
			case at < warmUp+span/3:
				early = append(early, s)
			case at >= load-span/3:
				late = append(late, s)
			}
		}
		if len(early) == 0 || len(late) == 0 {
			continue
		}
		tr := Trend{Process: ss[0].Process, Pid: pid, Samples: len(ss),
			RSSEarlyKiB: median(early, func(s Sample) int64 { return s.RSSKiB }), RSSLateKiB: median(late, func(s Sample) int64 { return s.RSSKiB }),
			GoroutinesEarly: int(median(early, func(s Sample) int64 { return int64(s.Goroutines) })), GoroutinesLate: int(median(late, func(s Sample) int64 { return int64(s.Goroutines) })),
			HeapEarlyKiB: median(early, func(s Sample) int64 { return s.HeapKiB }), HeapLateKiB: median(late, func(s Sample) int64 { return s.HeapKiB }),
			FlatRule: "late median within 25% + 8 MiB (RSS) and 25% + 20 (goroutines) of the early median"}
		for _, s := range ss {
			tr.RSSMaxKiB = max(tr.RSSMaxKiB, s.RSSKiB)
			tr.GoroutinesMax = max(tr.GoroutinesMax, s.Goroutines)
		}
		tr.Flat = float64(tr.RSSLateKiB) <= 1.25*float64(tr.RSSEarlyKiB)+8192 &&
			float64(tr.GoroutinesLate) <= 1.25*float64(tr.GoroutinesEarly)+20
		out = append(out, tr)
	}
	return out
}

func median(ss []Sample, f func(Sample) int64) int64 {
	v := make([]int64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	slices.Sort(v)
	return v[len(v)/2]
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

// WriteTable writes the soak's figures and verdict.
func (r *SoakReport) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "retrysafe soak: %s of load (%s in all), seed %d\n", r.Load, r.Total, r.Seed)
	fmt.Fprintf(w, "  database: %s\n", r.Database)
	fmt.Fprintf(w, "  load: %d intents, %d same-key storms, %d webhook redeliveries, %d PSP faults of %d charge requests through the workers' proxies\n",
		r.Runs, r.Storms, r.Redeliveries, r.FaultsAsked, r.ChargePosts)
	fmt.Fprintf(w, "  database crashes: %d (SIGKILL of the postmaster and every backend, then crash recovery; down at most %s); workers restarted: %d\n",
		r.Crashes, r.CrashDownMax, r.WorkerRestarts)
	fmt.Fprintf(w, "  in flight just before the crashes, summed: %d River jobs running, %d actions claimed and not completed\n\n", r.CrashJobsRunning, r.CrashActionsStarted)
	fmt.Fprintln(w, "  process     pid    RSS early → late (max) KiB      goroutines early → late (max)   heap early → late KiB   flat")
	for _, t := range r.Trends {
		fmt.Fprintf(w, "  %-10s %6d   %7d → %7d (%7d)        %5d → %5d (%5d)           %7d → %7d        %v\n",
			t.Process, t.Pid, t.RSSEarlyKiB, t.RSSLateKiB, t.RSSMaxKiB, t.GoroutinesEarly, t.GoroutinesLate, t.GoroutinesMax, t.HeapEarlyKiB, t.HeapLateKiB, t.Flat)
	}
	if len(r.Trends) > 0 {
		fmt.Fprintf(w, "  (%s)\n", r.Trends[0].FlatRule)
	}
	fmt.Fprintln(w)
	if r.Restart != nil {
		if err := r.Restart.WriteTable(w); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	_, err := fmt.Fprintln(w, r.Verdict)
	return err
}
