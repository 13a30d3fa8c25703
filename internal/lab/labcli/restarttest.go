package labcli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/internal/cli"
	"github.com/retrysafe/retrysafe/internal/lab/restarttest"
)

func init() {
	cli.Register(&cli.Command{Name: "restart-test", Summary: "kill real workers at every crash point, let the queue redeliver, prove each intent charged once", Run: runRestartTest})
}

// restartTestHelp is `retrysafe restart-test --help`'s text, with the
// crash points and faults it knows.
func restartTestHelp() string {
	var points, faults []string
	for _, p := range restarttest.CrashPoints {
		points = append(points, fmt.Sprintf("  %-18s %s", p.Name, p.Description))
		if p.OptIn != "" {
			points = append(points, fmt.Sprintf("  %-18s (not in default: %s)", "", p.OptIn))
		}
	}
	for _, f := range restarttest.Faults {
		faults = append(faults, fmt.Sprintf("  %-18s %s", f.Name, f.Description))
		if f.OptIn != "" {
			faults = append(faults, fmt.Sprintf("  %-18s (not in default: %s)", "", f.OptIn))
		}
	}
	return `Starts a whole deployment as real processes — PostgreSQL (a private cluster
unless --database-url / DATABASE_URL), the sandbox PSP, model and WhatsApp,
'retrysafe serve' with the WhatsApp webhook — and 'retrysafe worker'
processes, then kills the workers with SIGKILL while they charge customers.

Each run is one conversation (its own customer, invoice, amount and Pix key:
CPF, CNPJ, e-mail or phone, in varied spellings) whose billing message is
delivered through the signed webhook, sometimes several times at once, and
sometimes as two or three messages spelling the same key differently (CPF
punctuated and bare, a phone three ways: one intent). Runs are dealt to
scenarios. A scenario's runs go in batches (--batch) to a worker armed for
it — RETRYSAFE_FAILPOINTS=<point>@k, which does nothing unless set — that
dies at the point with its whole batch in flight. After the last scenario, the
test waits --rescue-after and starts --workers plain workers: River's own
rescuer hands the killed jobs back, and the test waits until every run is
settled, runs 'retrysafe reconcile' once, and checks:

  every intent charged exactly once at the PSP, no intent lost (a charge and
  a reply for every message), no action left 'started', and one key per
  intent: the frozen key, the key each turn recorded and the Idempotency-Key
  of every request the PSP saw (its /_sandbox/requests log) are equal.

With --psp apipix (the default) every charge is then paid, and its receipt
must go out once; a share of the runs (--refund-rate) then refund part of
the charge: a pix.refund intent of its own ("<invoice>:refund:1") asked for
through serve's sidecar (POST /v1/tools/pix.refund/execute with the paid
Pix's e2eid), whose first PUT the test fails before the PSP acts, so that
a worker's reconciler takes it over; that worker is armed for one of the
refund's crash points (` + strings.Join(restarttest.RefundPoints, ", ") + `)
and killed there. Every refund must be made exactly once at the PSP, under
one devolução id on every attempt, none lost or left started.

Exit 0 only when all of that holds and every selected scenario was reached;
1 otherwise (and with --naive, which must fail: it proves the test can).

Crash points (--crash-points, comma separated; "default" is every one not
marked otherwise below, "all" every one):
` + strings.Join(points, "\n") + `

Extra faults (--faults, comma separated; "default" is every one not marked
otherwise below, "all" every one, "none" none; the pg-* faults only on the
test's own cluster):
` + strings.Join(faults, "\n") + `

The test's own cluster runs PostgreSQL's durable settings (fsync,
synchronous_commit and full_page_writes on); --db-synchronous-commit off
makes off the database's default (ALTER DATABASE ... SET), the usual
throughput tuning under which a claim must still commit durably. The
sandbox PSP keeps its ledger on a second private cluster that no fault
touches, as a real provider's does not go down with retrysafe's database.

Worker timings are short so that a killed job comes back in seconds; they
are printed in the report. River's rescuer runs every 30 s (fixed in River)
and once when a worker becomes leader; the test needs no other redelivery
path. The plan (runs, messages, batches, failpoint counts, kill delays) is
reproducible with --seed; process timing is real and is not.

Progress goes to stderr; the report (a table, or JSON with --json) to
stdout. Process logs go to --log (default a file in the temp directory,
named in the report).`
}

// restartTestFlags are restart-test's flags beyond the Config fields they
// set directly.
type restartTestFlags struct {
	cfg            restarttest.Config
	crash          string
	faultList      string
	corpus         string
	logPath        string
	asJSON         bool
	seed           int64
	serveReconcile bool
}

func (f *restartTestFlags) register(fs *flag.FlagSet, e *cli.Env) {
	cfg := &f.cfg
	def := restarttest.DefaultTimings()
	fs.IntVar(&cfg.Runs, "runs", 100, "runs (conversations), dealt evenly to the scenarios")
	fs.Int64Var(&f.seed, "seed", 0, "seed of the plan and of the sandbox model (0: from the clock; the report prints it)")
	fs.StringVar(&f.crash, "crash-points", "default", "crash points to cover, comma separated (see above)")
	fs.StringVar(&f.faultList, "faults", "default", "extra faults, comma separated, or none (the pg-* faults only on the test's own cluster)")
	fs.IntVar(&cfg.Workers, "workers", 2, "worker processes that work the redeliveries at once")
	fs.BoolVar(&cfg.Naive, "naive", false, "the control: workers send a fresh random Idempotency-Key on every provider call; must report duplicates")
	fs.StringVar(&cfg.PSP, "psp", restarttest.PSPAPIPix, "the PSP's API: "+restarttest.PSPV1+" (pix.charge with Idempotency-Key) or "+restarttest.PSPAPIPix+
		" (the Central Bank's API Pix: pix.cob by txid; every charge is then paid and its receipt checked)")
	fs.Float64Var(&cfg.RefundRate, "refund-rate", 0.3, "API Pix: share of runs that, once paid, refund part of the charge (pix.refund through serve's sidecar, settled by workers killed at "+
		strings.Join(restarttest.RefundPoints, ", ")+"); 0: none; ignored with --psp "+restarttest.PSPV1)
	fs.BoolVar(&f.asJSON, "json", false, "write the report as JSON on stdout")
	fs.StringVar(&cfg.DatabaseURL, "database-url", e.Getenv("DATABASE_URL"), "PostgreSQL URL (env DATABASE_URL); empty: a private throwaway cluster (needed by the pg-* faults)")
	fs.StringVar(&cfg.DBSynchronousCommit, "db-synchronous-commit", "", "set the own cluster's database default: ALTER DATABASE ... SET synchronous_commit = this (on, off, local, ...); empty leaves the server's (on)")
	fs.StringVar(&cfg.Standby, "standby", "sync", "pg-failover's standby: sync (synchronous_standby_names names it) or async")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the test's schemas on --database-url for inspection")
	fs.StringVar(&f.corpus, "corpus", "", "message templates, one JSON object per line ({\"text\": \"... {amount} ... {key}\"}), e.g. testdata/restart/messages.jsonl; default built in")
	fs.IntVar(&cfg.Batch, "batch", 8, "runs delivered to one armed worker")
	fs.IntVar(&cfg.Concurrency, "concurrency", 8, "each worker's --concurrency (jobs in flight per process)")
	fs.StringVar(&cfg.Journal, "journal", "on", "the workers' --journal: on (replay model answers) or off")
	fs.Float64Var(&cfg.WrongAmountRate, "wrong-amount-rate", 0.05, "sandbox model: probability that a tool call carries a misread amount")
	fs.DurationVar(&cfg.ModelLatency, "model-latency", 50*time.Millisecond, "sandbox model: time to answer, ±50%")
	fs.DurationVar(&cfg.Timings.ModelTimeout, "model-timeout", def.ModelTimeout, "worker --model-timeout")
	fs.DurationVar(&cfg.Timings.ClaimTTL, "claim-ttl", def.ClaimTTL, "worker --claim-ttl (> --model-timeout)")
	fs.DurationVar(&cfg.Timings.JobTimeout, "job-timeout", def.JobTimeout, "worker --job-timeout")
	fs.DurationVar(&cfg.Timings.RescueAfter, "rescue-after", def.RescueAfter, "worker --rescue-after (> --job-timeout): how old a killed job must be before River rescues it")
	fs.DurationVar(&cfg.Timings.RetryBase, "retry-base", def.RetryBase, "worker --retry-base")
	fs.DurationVar(&cfg.Timings.RetryMax, "retry-max", def.RetryMax, "worker --retry-max")
	fs.DurationVar(&cfg.Timings.Poll, "poll", def.Poll, "worker --poll")
	fs.DurationVar(&cfg.Timings.ProviderTimeout, "timeout", def.ProviderTimeout, "worker and serve --timeout (one provider call)")
	fs.DurationVar(&cfg.Timings.Lease, "lease", def.Lease, "worker and serve --lease (> --timeout + 2s)")
	fs.DurationVar(&cfg.Timings.ReconcileInterval, "reconcile-interval", def.ReconcileInterval, "worker and serve --reconcile-interval")
	fs.IntVar(&cfg.MaxAttempts, "max-attempts", 0, "worker and serve --max-attempts: claims of one action before it goes to review (0: their default, 5)")
	fs.BoolVar(&f.serveReconcile, "serve-reconcile", true, "run serve's reconciler too, as a deployment does (false: only the workers settle expired actions)")
	fs.DurationVar(&cfg.SettleTimeout, "settle-timeout", 3*time.Minute, "how long the redelivery may take before unsettled runs count as lost")
	fs.StringVar(&f.logPath, "log", "", "file for every process's output (default: a new file in the temp directory)")
}

// config completes the Config from the flags that are not its fields.
func (f *restartTestFlags) config() (restarttest.Config, error) {
	cfg := f.cfg
	cfg.Seed = clockSeed(f.seed)
	cfg.ServeReconcileOff = !f.serveReconcile
	cfg.CrashPoints = splitList(f.crash)
	cfg.Faults = splitList(f.faultList)
	if f.corpus != "" {
		file, err := os.Open(f.corpus)
		if err != nil {
			return cfg, fmt.Errorf("--corpus: %w", err)
		}
		cfg.Templates, err = restarttest.ReadTemplates(file)
		file.Close()
		if err != nil {
			return cfg, fmt.Errorf("--corpus %s: %w", f.corpus, err)
		}
	}
	return cfg, nil
}

func runRestartTest(ctx context.Context, e *cli.Env, args []string) error {
	fs := cli.NewFlagSet(e, "restart-test", "restart-test [--runs N] [--seed S] [--crash-points LIST] [--faults LIST] [--workers N] [--naive] [--json] [flags]",
		restartTestHelp())
	var f restartTestFlags
	f.register(fs, e)
	if err := cli.ParseNoArgs(e, fs, args); err != nil {
		return err
	}
	cfg, err := f.config()
	if err != nil {
		return err
	}
	logFile, logName, err := openProcessLog(f.logPath, "retrysafe-restart-test-*.log")
	if err != nil {
		return err
	}
	defer logFile.Close()
	cfg.Log = &lockedWriter{w: logFile}
	prog := newProgressLine(e.Stderr)
	cfg.Progress = prog.update
	fmt.Fprintf(e.Stderr, "retrysafe restart-test: seed %d, %d runs; process logs in %s\n", cfg.Seed, cfg.Runs, logName)

	rep, err := restarttest.Run(ctx, cfg)
	prog.end()
	if err != nil {
		return err
	}
	withLog := struct {
		*restarttest.Report
		Log string `json:"log"`
	}{rep, logName}
	return writeLabReport(e, f.asJSON, withLog, rep, logName, rep.Pass)
}

// clockSeed is seed, or one drawn from the clock when it is 0.
func clockSeed(seed int64) int64 {
	if seed == 0 {
		return time.Now().UnixNano() % 1_000_000_000
	}
	return seed
}

// openProcessLog opens the file that receives every process's output:
// path, or a new file in the temp directory named after pattern. It
// returns the file's absolute name too, for the report.
func openProcessLog(path, pattern string) (*os.File, string, error) {
	var logFile *os.File
	var err error
	if path == "" {
		logFile, err = os.CreateTemp("", pattern)
	} else {
		logFile, err = os.Create(path)
	}
	if err != nil {
		return nil, "", fmt.Errorf("--log: %w", err)
	}
	name, _ := filepath.Abs(logFile.Name())
	return logFile, name, nil
}

// writeLabReport writes a lab command's report: asJSON as JSON, else
// the table and where the process logs are; a report that did not pass
// exits 1 without more words.
func writeLabReport(e *cli.Env, asJSON bool, asJSONValue any, table interface{ WriteTable(io.Writer) error }, logName string, pass bool) error {
	if asJSON {
		if err := writeJSON(e.Stdout, asJSONValue); err != nil {
			return err
		}
	} else {
		if err := table.WriteTable(e.Stdout); err != nil {
			return err
		}
		fmt.Fprintf(e.Stdout, "(process logs: %s)\n", logName)
	}
	if !pass {
		return cli.ErrSilentFailure
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// lockedWriter serializes the processes' output into one file.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// progressLine keeps one status line on a terminal (rewritten in place),
// or prints a line every 10 s and at each phase change elsewhere (CI logs).
type progressLine struct {
	mu        sync.Mutex
	w         io.Writer
	tty       bool
	lastPhase string // phase and scenario of the last line printed
	lastPrint time.Time
	width     int
}

func newProgressLine(w io.Writer) *progressLine {
	p := &progressLine{w: w}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progressLine) update(pr restarttest.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := fmt.Sprintf("restart-test %s  %-11s", pr.Elapsed.Round(time.Second), pr.Phase)
	switch pr.Phase {
	case "kills":
		line += fmt.Sprintf(" scenario %d/%d %-18s delivered %d/%d  kills %d", min(pr.Scenarios+1, pr.Total), pr.Total, pr.Scenario, pr.Delivered, pr.Runs, pr.Kills)
	case "redelivery", "verifying", "done":
		line += fmt.Sprintf(" settled %d/%d  kills %d", pr.Settled, pr.Runs, pr.Kills)
	}
	if p.tty {
		pad := ""
		if n := p.width - len(line); n > 0 {
			pad = strings.Repeat(" ", n)
		}
		p.width = len(line)
		fmt.Fprintf(p.w, "\r%s%s", line, pad)
		return
	}
	if at := pr.Phase + " " + pr.Scenario; at != p.lastPhase || time.Since(p.lastPrint) >= 10*time.Second {
		fmt.Fprintln(p.w, line)
		p.lastPhase, p.lastPrint = at, time.Now()
	}
}

func (p *progressLine) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.width > 0 {
		fmt.Fprintln(p.w)
	}
}
