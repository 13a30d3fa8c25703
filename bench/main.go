// Command bench measures retrysafe against the floor of the PostgreSQL it
// runs on and against durable-execution peers, and writes a Markdown table
// (to stdout and results/) and the same figures as JSON (results/).
//
//	./scripts/bench                      the full run (about 10 minutes on 2 cores)
//	./scripts/bench --quick              a smoke run (about a minute)
//	./scripts/bench --concurrency 8,32 --slice 2s --skip-dbos --skip-scale
//	./scripts/bench --combine bench/results/bench-*.json   earlier runs side by side (combine.go)
//
// Every database-touching benchmark creates its own database on the server
// (--db, default $BENCH_DATABASE_URL, $TEST_DATABASE_URL or the local one)
// and drops it afterwards. Every throughput is also given as a ratio to the
// floor measured in the same run at the same number of callers; every
// workload of a level runs --rounds slices, one workload at a time in a new
// order each round, and each comparison is the median of the ratios of
// slices of the same round (paired.go); the CPU time per operation of
// the floor and of retrysafe's first executions is paired the same way,
// and first executions also run with the tool answered in process, since
// the benchmark's HTTP provider shares the database's cores. At one
// caller the lone call is also measured interleaved block by block
// (lone.go). Rows whose
// operations call the tool also split their latency at the call, and when
// the server has pg_stat_statements loaded each point records its
// statements.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/internal/pgembed"
)

const defaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// defaultPurgeSettings is the purge under load's Batch/Pause unless
// --purge-settings says otherwise.
const defaultPurgeSettings = "100/20ms"

// defaultScaleWarmup is --scale-warmup unless --quick. Two minutes, not
// 30 s: on the fortieth host the rounds after a 30 s warm-up began with
// both sides' CPU per execution 1.4 to 1.7 times what it settled to a
// minute later, unevenly (the first rounds' paired ratios 0.60 to 1.09),
// while after 120 s the rounds were flat from the first
// (docs/benchmarks.md).
const defaultScaleWarmup = 2 * time.Minute

type config struct {
	dbURL        string
	quick        bool
	concurrency  []int
	maxConns     int
	skipDBOS     bool
	skipScale    bool
	skipNaive    bool
	scaleRows    int
	scaleCallers int
	// scaleWarmup is how long first executions run on the preloaded
	// tables before the paired rounds (scale.go: warmSides).
	scaleWarmup time.Duration
	// scaleDB names the scale runs' database, kept after the run and
	// reused by the next one that names it (unless scaleDrop).
	scaleDB   string
	scaleDrop bool
	// lonePause is the pause before every call of the lone-call
	// interleave's second pass (lone.go); 0 skips that pass.
	lonePause time.Duration
	// purgeRows is how many of the preloaded rows are expired (-1: a day's
	// share, dayShare); purgeSettings the Batch/Pause of each purge under
	// load, at purgeCallers callers, for at most purgeRounds paired rounds.
	purgeRows     int
	purgeSettings []purgeSetting
	purgeCallers  int
	purgeRounds   int
	// purgeTail: after its rounds a purge finishes under the same load;
	// false stops it there (exploring settings).
	purgeTail bool
	// rounds is how many rounds of slices each level runs: every workload
	// of the level once per round, in an order that changes each round
	// (paired.go).
	rounds int
	// slice is one workload's measured time in one round, after
	// sliceWarmup.
	slice, sliceWarmup time.Duration
	out                string
	only               *regexp.Regexp // runs only the points whose "system/workload" matches
	cpuProfile         string
	// session is the settings of every session on a benchmark database.
	session map[string]string
	// privateServer, when set, is the settings of a private durable
	// cluster the run starts and uses instead of --db (main.go).
	privateServer []string
	// privateServerEnv is more environment for that cluster's server
	// (--private-server-env, repeatable: NAME=value each).
	privateServerEnv envList
	// groupCommit and groupCommitConns, when > 0, override the executor's
	// defaults in every retrysafe point.
	groupCommit, groupCommitConns int
	// keepPools: every workload of a level keeps its pools from its first
	// slice to the level's end (paired.go: rotate).
	keepPools bool
	// instructions: count instructions per operation under callgrind
	// (instructions.go) instead of the timed benchmark.
	instructions bool
	// callgrindDir keeps callgrind's output files of --instructions.
	callgrindDir string
	// combine: the JSON reports of earlier runs to put side by side
	// (combine.go) instead of benchmarking.
	combine []string
}

type bench struct {
	cfg config
	srv *server
	log io.Writer
	// pgss: the server has pg_stat_statements loaded, and each point
	// records its statements.
	pgss bool
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, format+"\n", args...)
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad concurrency %q", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("empty concurrency list")
	}
	return out, nil
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := os.Getenv("BENCH_DATABASE_URL")
	if def == "" {
		def = os.Getenv("TEST_DATABASE_URL")
	}
	if def == "" {
		def = defaultURL
	}
	var (
		c     config
		conc  string
		rows  = fs.Int("scale-rows", 0, "intents and actions preloaded for the scale runs (default 1000000, 20000 with --quick; 10000000 is a week of retention at ~15 executions/s)")
		scale = fs.Int("scale-callers", 32, "concurrent callers of the preloaded-tables-against-empty comparison")
		purge = fs.String("purge-settings", defaultPurgeSettings, "executor.PurgeParams Batch/Pause of each purge under load, comma-separated BATCH/PAUSE (e.g. 1000/0,100/20ms), or none")
		pRnds = fs.Int("purge-rounds", 0, "most paired rounds (purging, purge held) of each purge under load; the purge then finishes under the same load, unmeasured (default 12, 4 with --quick)")
		round = fs.Int("rounds", 0, "rounds of slices at each level: every workload once per round, in a new order each round (default 6, 3 with --quick)")
		slice = fs.Duration("slice", 0, "measured time of one workload in one round (default 1s, 300ms with --quick)")
	)
	fs.StringVar(&c.dbURL, "db", def, "administrative URL of the PostgreSQL server to create benchmark databases on")
	fs.BoolVar(&c.quick, "quick", false, "short smoke run: 1s points, callers 1,8, a small preload")
	fs.StringVar(&conc, "concurrency", "", "comma-separated concurrent callers (default 1,8,32,128; 1,8 with --quick)")
	fs.IntVar(&c.maxConns, "max-conns", 32, "pool size cap: each point uses min(callers, max-conns) connections")
	fs.BoolVar(&c.skipDBOS, "skip-dbos", false, "skip DBOS Transact")
	fs.BoolVar(&c.skipScale, "skip-scale", false, "skip the scale runs (preloaded tables against empty ones, the purge under load)")
	fs.StringVar(&c.scaleDB, "scale-db", "", "name of the scale runs' database: created and preloaded when missing, reused when it holds a preload of --scale-rows, and kept after the run")
	warmScale := fs.Duration("scale-warmup", 0, "first executions on the preloaded tables before their paired rounds with empty ones, unmeasured but logged every 10s (rate, full-page images/op), on the pool the preloaded side's rounds then keep (the empty side's pool is warmed too, for 5s or this when shorter): the rounds measure the tables past the checkpoint that ends the preload instead of right after it, on backends that have already mapped the pages they touch; when the rounds would not fit before the server's next checkpoint, a CHECKPOINT follows and first executions go on until its burst of full-page images is over, reported on its own (default "+defaultScaleWarmup.String()+", none with --quick; 0s: none)")
	fs.BoolVar(&c.scaleDrop, "scale-drop", false, "drop the --scale-db database at the end of the run")
	fs.IntVar(&c.purgeRows, "purge-rows", -1, "how many of the preloaded rows finished 8 days ago and are purged (default: a day at 15/s per 10M rows, 12.96 %)")
	fs.IntVar(&c.purgeCallers, "purge-callers", 8, "concurrent callers while purging")
	fs.BoolVar(&c.purgeTail, "purge-tail", true, "let each purge finish under load after its paired rounds (false: stop it there, to compare settings quickly; its rate is then the rounds')")
	fs.BoolVar(&c.keepPools, "keep-pools", false, "every workload of a level keeps its pools open from its first slice to the level's end, as a deployment does, instead of opening them for each slice (needs about 10 x min(callers, max-conns) connections)")
	fs.DurationVar(&c.lonePause, "lone-pause", 20*time.Millisecond, "the lone-call interleave runs again with this pause before every call, as an agent's calls come (after the model's turn, not back to back), one block of each workload per round; reported beside the lone-call target, whose verdict rests on the back-to-back interleave (0: no second pass)")
	fs.BoolVar(&c.skipNaive, "skip-naive", false, "skip the naive check-then-act handler")
	fs.StringVar(&c.out, "out", "results", "directory for the Markdown and JSON results")
	priv := fs.String("private-server", "", "start a private, durable PostgreSQL cluster (the installed server binaries, a temporary directory, removed at the end) with these server settings, name=value comma-separated, and run every benchmark on it instead of --db: e.g. shared_buffers=4GB,max_wal_size=16GB,checkpoint_timeout=30min to size the server for the 10M-row point; - for the installation's defaults")
	fs.Var(&c.privateServerEnv, "private-server-env", "NAME=value: more environment for the --private-server (or --instructions) cluster's server, its postmaster and every backend; repeatable. E.g. GLIBC_TUNABLES=glibc.malloc.trim_threshold=67108864:glibc.malloc.mmap_threshold=8388608 keeps glibc from handing each statement's memory back to the kernel and faulting it in again (README, \"PostgreSQL's allocator\")")
	sess := fs.String("session-settings", "", "PostgreSQL settings every session on a benchmark database starts with, name=value comma-separated (session-level: the server's configuration is not changed), e.g. wal_compression=lz4")
	comb := fs.Bool("combine", false, "instead of benchmarking, print the targets and paired ratios of the JSON reports named after the flags (results/bench-*.json of earlier runs) side by side, each run's own verdicts and IQRs")
	only := fs.String("only", "", "regexp: run only the points whose \"system/workload\" matches (the floor always runs; the lone-call interleave at one caller is \"retrysafe/lone call\", the scale runs \"retrysafe/scale\")")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.BoolVar(&c.instructions, "instructions", false, "instead of the timed benchmark, count the instructions one operation executes at one caller, in this process and in its PostgreSQL backend (valgrind's callgrind; a private cluster under it, with --private-server's settings if given): a cost that does not move with the machine's load; --quick for fewer operations, --only to choose workloads")
	fs.StringVar(&c.callgrindDir, "callgrind-dir", "", "with --instructions: keep callgrind's output files here (client.PID for this process's runs, pg.PID for the server's processes), for callgrind_annotate")
	fs.IntVar(&c.groupCommit, "group-commit", 0, "retrysafe's executor.Config.GroupCommit (default: the executor's)")
	fs.IntVar(&c.groupCommitConns, "group-commit-conns", 0, "retrysafe's executor.Config.GroupCommitConns (default: the executor's)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if *comb {
		if c.instructions {
			return c, errors.New("--combine reads earlier runs' reports and --instructions runs a benchmark: one or the other")
		}
		if fs.NArg() == 0 {
			return c, errors.New("--combine needs the JSON reports of the runs to combine, e.g. --combine bench/results/bench-*.json")
		}
		c.combine = fs.Args()
		return c, nil
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c.scaleRows, c.rounds, c.purgeRounds = 1_000_000, 6, 12
	c.slice, c.sliceWarmup = time.Second, 250*time.Millisecond
	if conc == "" {
		conc = "1,8,32,128"
	}
	if c.quick {
		c.scaleRows, c.rounds, c.purgeRounds = 20_000, 3, 4
		c.slice, c.sliceWarmup = 300*time.Millisecond, 100*time.Millisecond
		if !flagSet(fs, "concurrency") {
			conc = "1,8"
		}
		if !flagSet(fs, "scale-callers") {
			*scale = 8
		}
	}
	if *rows > 0 {
		c.scaleRows = *rows
	}
	if *round > 0 {
		c.rounds = *round
	}
	if *pRnds > 0 {
		c.purgeRounds = *pRnds
	}
	if *slice > 0 {
		c.slice = *slice
		c.sliceWarmup = min(c.sliceWarmup, *slice/4)
	}
	c.scaleCallers = *scale
	var err error
	if *only != "" {
		if c.only, err = regexp.Compile(*only); err != nil {
			return c, fmt.Errorf("--only: %w", err)
		}
	}
	if c.concurrency, err = parseInts(conc); err != nil {
		return c, err
	}
	c.scaleWarmup = defaultScaleWarmup
	if c.quick {
		c.scaleWarmup = 0
	}
	if flagSet(fs, "scale-warmup") {
		c.scaleWarmup = *warmScale
	}
	if c.scaleWarmup < 0 {
		return c, errors.New("--scale-warmup must not be negative")
	}
	if c.lonePause < 0 || c.lonePause > 10*time.Second {
		return c, errors.New("--lone-pause must be between 0 and 10s")
	}
	if c.maxConns < 1 || c.scaleCallers < 1 || c.purgeCallers < 1 {
		return c, errors.New("--max-conns, --scale-callers and --purge-callers must be positive")
	}
	if c.purgeRows > c.scaleRows {
		return c, fmt.Errorf("--purge-rows %d is more than --scale-rows %d", c.purgeRows, c.scaleRows)
	}
	if c.scaleDrop && c.scaleDB == "" {
		return c, errors.New("--scale-drop goes with --scale-db")
	}
	if c.session, err = parseSettings(*sess); err != nil {
		return c, fmt.Errorf("--session-settings: %w", err)
	}
	if *priv != "" {
		if flagSet(fs, "db") {
			return c, errors.New("--private-server and --db exclude each other")
		}
		if c.scaleDB != "" {
			return c, errors.New("--scale-db keeps a database for the next run, and a private server is removed at the end of this one")
		}
		c.privateServer = []string{}
		if *priv != "-" {
			set, err := parseSettings(*priv)
			if err != nil {
				return c, fmt.Errorf("--private-server: %w", err)
			}
			for k, v := range set {
				c.privateServer = append(c.privateServer, k+"="+v)
			}
			slices.Sort(c.privateServer)
		}
	}
	if len(c.privateServerEnv) > 0 && c.privateServer == nil && !c.instructions {
		return c, errors.New("--private-server-env is the environment of a private cluster: it goes with --private-server (or --instructions)")
	}
	if c.purgeSettings, err = parsePurgeSettings(*purge); err != nil {
		return c, fmt.Errorf("--purge-settings: %w", err)
	}
	if c.groupCommit < 0 || c.groupCommitConns < 0 {
		return c, errors.New("--group-commit and --group-commit-conns must not be negative")
	}
	tuning = func(ec *executor.Config) { ec.GroupCommit, ec.GroupCommitConns = c.groupCommit, c.groupCommitConns }
	return c, nil
}

// parseSettings reads "name=value,name=value".
func parseSettings(v string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		k, val, ok := strings.Cut(f, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("%q is not name=value", f)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(val)
	}
	return out, nil
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

func main() { os.Exit(mainCode()) }

// mainCode is main, returning the exit code so that its defers run.
func mainCode() int {
	if len(os.Args) > 1 && os.Args[1] == instrChildCmd {
		return instrChild(os.Args[2:])
	}
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if cfg.combine != nil {
		reps, err := loadReports(cfg.combine)
		if err == nil {
			err = combined(os.Stdout, reps)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		return 0
	}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if cfg.instructions {
		return runInstructions(ctx, cfg)
	}
	if cfg.privateServer != nil {
		// A private cluster: its settings are the run's, and the shared
		// server's configuration is left alone. pgembed's reaper stops it
		// if this process dies before Stop.
		fmt.Fprintf(os.Stderr, "bench: starting a private PostgreSQL cluster (%s)%s\n", strings.Join(cfg.privateServer, ", "), cfg.privateServerEnv.describe())
		cl, err := pgembed.StartWith(ctx, pgembed.Options{Settings: cfg.privateServer, Env: cfg.privateServerEnv})
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: --private-server:", err)
			return 1
		}
		cfg.dbURL = cl.URL
		defer func() {
			if err := cl.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "bench: stopping the private cluster:", err)
			}
		}()
	}
	return finish(ctx, cfg)
}

// finish runs the benchmarks and writes the report; it returns the exit
// code.
func finish(ctx context.Context, cfg config) int {
	rep, err := run(ctx, cfg, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if !printAndWrite(rep.markdown(), cfg.out, rep.write) {
		return 1
	}
	if rep.failures() > 0 {
		fmt.Fprintf(os.Stderr, "bench: %d points failed\n", rep.failures())
		return 1
	}
	return 0
}

// printAndWrite prints a report's Markdown, writes it with write and says
// where; false when writing failed (and said so).
func printAndWrite(md, dir string, write func(dir, md string) ([]string, error)) bool {
	fmt.Print(md)
	paths, err := write(dir, md)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return false
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", strings.Join(paths, ", "))
	return true
}

// run performs every benchmark cfg asks for and returns the report.
func run(ctx context.Context, cfg config, log io.Writer) (*report, error) {
	b := &bench{cfg: cfg, srv: &server{url: cfg.dbURL, session: cfg.session}, log: log}
	settings, err := b.srv.describe(ctx)
	if err != nil {
		return nil, err
	}
	if b.pgss, err = b.srv.pgssAvailable(ctx); err != nil {
		return nil, err
	}
	if err := b.checkKeepPools(settings); err != nil {
		return nil, err
	}
	rep := newReport(cfg, settings)
	began := time.Now()
	b.logf("bench: %s, fsync=%s synchronous_commit=%s; slices of %s after %s warm-up, %d rounds per level; callers %v; pool min(callers, %d)",
		settings["server_version"], settings["fsync"], settings["synchronous_commit"], cfg.slice, cfg.sliceWarmup, cfg.rounds, cfg.concurrency, cfg.maxConns)
	if b.pgss {
		b.logf("bench: pg_stat_statements is loaded: each point records its statements (it costs the server a few per cent)")
	}

	// Level by level, every workload of a level in short slices, one at a
	// time, in a new order each round (paired.go): each comparison is the
	// median of ratios of slices a few seconds apart.
	for _, n := range cfg.concurrency {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		b.logf("callers=%d", n)
		m0 := readMachineTicks()
		b.level(ctx, rep, n)
		if n == 1 && b.loneWanted() {
			lone, pairs := b.loneCall(ctx)
			rep.Lone = lone
			rep.Pairs = append(rep.Pairs, pairs...)
		}
		if p := readMachineTicks().since(m0).stealPct(); p >= 0 {
			b.logf("  callers=%d: CPU steal %.1f %% of the machine's time over the level", n, p)
		}
	}
	if !cfg.skipNaive && b.wanted("naive/race") {
		b.logf("race: callers on one key")
		for _, n := range cfg.concurrency {
			if n < 2 {
				continue
			}
			rep.Races = append(rep.Races, b.runRace(ctx, "naive", n), b.runRace(ctx, "retrysafe", n))
		}
	}
	if !cfg.skipScale && b.wanted("retrysafe/scale") {
		b.logf("scale: %s rows, %d callers; purge under load at %d callers", count(cfg.scaleRows), cfg.scaleCallers, cfg.purgeCallers)
		rs, sr := b.runScale(ctx)
		for _, r := range rs {
			rep.add(r)
		}
		rep.Scale = sr
		if sr.Pair != nil {
			rep.Pairs = append(rep.Pairs, *sr.Pair)
		}
		for _, p := range sr.Purges {
			if p.Rounds > 0 {
				rep.Pairs = append(rep.Pairs, p.Pair)
			}
		}
	}
	rep.Seconds = time.Since(began).Seconds()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return rep, nil
}

func (b *bench) wanted(name string) bool { return b.cfg.only == nil || b.cfg.only.MatchString(name) }

// resultsDir resolves dir against the working directory.
func resultsDir(dir string) (string, error) {
	if filepath.IsAbs(dir) {
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return filepath.Join(wd, dir), nil
}

// checkKeepPools refuses --keep-pools up front when the server's
// max_connections cannot hold a level's pools all at once (each workload
// min(callers, --max-conns) connections, one more for DBOS's LISTEN, and a
// few for the benchmark's own administrative connections), instead of
// failing the level's points one by one with "too many clients".
func (b *bench) checkKeepPools(settings map[string]string) error {
	if !b.cfg.keepPools {
		return nil
	}
	allowed, err := strconv.Atoi(settings["max_connections"])
	if err != nil {
		return fmt.Errorf("--keep-pools: the server's max_connections %q: %w", settings["max_connections"], err)
	}
	callers, workloads := slices.Max(b.cfg.concurrency), len(b.levelWorkloads())
	conns := min(callers, b.cfg.maxConns)
	need := workloads*(conns+1) + keepPoolsSpare
	if need > allowed {
		return fmt.Errorf("--keep-pools needs about %d connections at %d callers (%d workloads of %d, and %d to spare), and the server allows %d: raise max_connections (e.g. --private-server max_connections=%d), lower --max-conns, or drop --keep-pools",
			need, callers, workloads, conns+1, keepPoolsSpare, allowed, need)
	}
	return nil
}

// keepPoolsSpare is the connections checkKeepPools leaves for the
// benchmark's administrative ones, the server's reserved ones and others'.
const keepPoolsSpare = 10

// envList is a repeatable NAME=value flag (--private-server-env).
type envList []string

func (e *envList) String() string { return strings.Join(*e, " ") }

func (e *envList) Set(v string) error {
	if err := pgembed.CheckEnv(v); err != nil {
		return err
	}
	*e = append(*e, v)
	return nil
}

// describe is the list for the log line that starts the cluster: empty, or
// "; environment NAME=value ...".
func (e envList) describe() string {
	if len(e) == 0 {
		return ""
	}
	return "; environment " + strings.Join(e, " ")
}
