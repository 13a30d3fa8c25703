package labcli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/retrysafe/retrysafe/internal/cli"
	"github.com/retrysafe/retrysafe/internal/lab/restarttest"
)

func init() {
	cli.Register(&cli.Command{Name: "soak", Summary: "hours-long mixed load with hard database crashes: memory and goroutines flat, each intent charged once", Run: runSoak})
	// A process the soak starts reports its goroutines and heap to it.
	// Nothing else sets this variable.
	if dir := os.Getenv(restarttest.StatsDirEnv); dir != "" {
		go writeRuntimeStats(dir)
	}
}

// writeRuntimeStats writes this process's RuntimeStats into dir as
// <pid>.json every two seconds, replacing the file whole (rename) so that
// a reader never sees half of one.
func writeRuntimeStats(dir string) {
	path := filepath.Join(dir, strconv.Itoa(os.Getpid())+".json")
	for {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b, _ := json.Marshal(restarttest.RuntimeStats{Goroutines: runtime.NumGoroutine(), HeapKiB: int64(ms.HeapInuse / 1024)})
		if os.WriteFile(path+".tmp", b, 0o600) == nil {
			os.Rename(path+".tmp", path) //nolint:errcheck // the next round tries again
		}
		time.Sleep(2 * time.Second)
	}
}

// soakHelp is `retrysafe soak --help`'s text.
const soakHelp = `Starts a whole deployment as real processes, as restart-test does — a
private PostgreSQL cluster with durable settings, the sandbox PSP (its
ledger on a cluster of its own), model and WhatsApp, 'retrysafe serve' and
--workers long-lived 'retrysafe worker' processes — and for --duration
sends a mixed load:

  new intents (--rate a second: a conversation, its open invoice and its
  billing message, its Pix key in varied spellings, some asked for in two
  or three messages), same-key storms (--storm-rate of them posted
  --storm-size times at once), webhook redeliveries of earlier messages
  (--redeliver-rate a second), and PSP faults on --fault-rate of the
  charge requests (500 before charging, charged then dropped, charged then
  500, charged then answered too late),

while the database is crashed every --crash-every: SIGKILL of the
postmaster and every backend at once, then a start through crash
recovery. serve and the workers are not restarted.

Every --sample-every it reads the resident memory (/proc) and goroutines
(reported by the processes themselves) of serve and each worker. After
the load, it waits until every run has settled, runs 'retrysafe
reconcile' once, and checks what restart-test checks (each intent charged
exactly once, none lost, none stuck, one key per intent) plus: each
process's memory and goroutines at the end of the load within 25% of
those after the --warm-up.

Exit 0 only when all of that holds. Not part of ./scripts/test: it runs
for as long as it is told.`

// soakFlags are soak's flags beyond the SoakConfig fields they set
// directly.
type soakFlags struct {
	cfg     restarttest.SoakConfig
	seed    int64
	asJSON  bool
	logPath string
}

func (f *soakFlags) register(fs *flag.FlagSet) {
	cfg := &f.cfg
	fs.DurationVar(&cfg.Duration, "duration", 30*time.Minute, "how long the load runs (the settle and the verdict come after)")
	fs.DurationVar(&cfg.CrashEvery, "crash-every", 3*time.Minute, "crash the database this often")
	fs.Float64Var(&cfg.Rate, "rate", 1, "new intents a second")
	fs.Float64Var(&cfg.StormRate, "storm-rate", 0.1, "share of intents whose first message is posted --storm-size times at once")
	fs.IntVar(&cfg.StormSize, "storm-size", 8, "posts of one message in a same-key storm")
	fs.Float64Var(&cfg.RedeliverRate, "redeliver-rate", 0.5, "webhook redeliveries of earlier messages a second")
	fs.Float64Var(&cfg.FaultRate, "fault-rate", 0.1, "share of charge requests that get a PSP fault")
	fs.IntVar(&cfg.Workers, "workers", 2, "long-lived worker processes")
	fs.IntVar(&cfg.Concurrency, "concurrency", 8, "each worker's --concurrency")
	fs.StringVar(&cfg.DBSynchronousCommit, "db-synchronous-commit", "", "ALTER DATABASE ... SET synchronous_commit = this on the private cluster (empty: the server's, on)")
	fs.DurationVar(&cfg.SampleEvery, "sample-every", 10*time.Second, "how often memory and goroutines are read")
	fs.DurationVar(&cfg.WarmUp, "warm-up", 0, "readings before this are not compared (0: a fifth of --duration, at most 3m)")
	fs.DurationVar(&cfg.SettleTimeout, "settle-timeout", 5*time.Minute, "how long the runs may take to settle after the load before they count as lost")
	fs.Int64Var(&f.seed, "seed", 0, "seed of the plan and of the sandbox model (0: from the clock)")
	fs.BoolVar(&f.asJSON, "json", false, "write the report (with every sample) as JSON on stdout")
	fs.StringVar(&f.logPath, "log", "", "file for every process's output (default: a new file in the temp directory)")
}

func runSoak(ctx context.Context, e *cli.Env, args []string) error {
	fs := cli.NewFlagSet(e, "soak", "soak [--duration D] [--crash-every D] [--rate N] [flags]", soakHelp)
	var f soakFlags
	f.register(fs)
	f.cfg.Timings = restarttest.DefaultTimings()
	if err := cli.ParseNoArgs(e, fs, args); err != nil {
		return err
	}
	cfg := f.cfg
	cfg.Seed = clockSeed(f.seed)
	logFile, logName, err := openProcessLog(f.logPath, "retrysafe-soak-*.log")
	if err != nil {
		return err
	}
	defer logFile.Close()
	cfg.Log = &lockedWriter{w: logFile}
	cfg.Progress = soakProgressLine(e.Stderr)
	fmt.Fprintf(e.Stderr, "retrysafe soak: seed %d, %s of load; process logs in %s\n", cfg.Seed, cfg.Duration, logName)
	rep, err := restarttest.Soak(ctx, cfg)
	if err != nil {
		return err
	}
	return writeLabReport(e, f.asJSON, rep, rep, logName, rep.Pass)
}

// soakProgressLine prints a line on w at each phase and once a minute
// during the load.
func soakProgressLine(w io.Writer) func(restarttest.SoakProgress) {
	last := time.Time{}
	return func(p restarttest.SoakProgress) {
		if p.Phase == "load" && time.Since(last) < time.Minute {
			return
		}
		last = time.Now()
		line := fmt.Sprintf("soak %s %-9s delivered %d/%d  crashes %d", p.Elapsed.Round(time.Second), p.Phase, p.Delivered, p.Runs, p.Crashes)
		if p.Phase != "load" {
			line += fmt.Sprintf("  settled %d", p.Settled)
		}
		for _, s := range p.Sample {
			line += fmt.Sprintf("  %s rss %d KiB goroutines %d", s.Process, s.RSSKiB, s.Goroutines)
		}
		fmt.Fprintln(w, line)
	}
}
