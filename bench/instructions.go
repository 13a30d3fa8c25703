package main

// Instruction counts: what an operation costs in instructions executed,
// counted by valgrind's callgrind, in this benchmark's process (the
// caller, the driver and the in-process HTTP tool, both of its ends) and
// in the PostgreSQL backend that served it. Unlike a rate or CPU time, a
// count does not move with what else the machine runs: the same binary,
// inputs and operation count give the same total within a fraction of a
// per cent, with the other core loaded or not.
//
// How: a private cluster runs under callgrind (pgembed's Wrap), so that
// every backend it forks writes its own total when it exits. For each
// workload and each of two operation counts, this binary runs itself
// under callgrind (instrChild) with one caller, one connection and
// GOMAXPROCS=1, on a database of its own prepared the same way each time,
// performs a warm-up and then the operations, and reports its backend's
// pid. The difference between the two runs' totals, over the difference
// in operations, is the cost of one operation: startup, connection and
// warm-up are the same in both and cancel. The cluster runs without
// autovacuum, whose work would land in a backend's count at moments the
// clock decides.
//
// What it leaves out: the kernel's work (callgrind counts user-space
// instructions only), which here is mostly the loopback TCP sends and
// receives of both connections and the WAL's writes and flushes, and the
// WAL writer's and checkpointer's processes. commits/op and WAL B/op in the
// timed report, and its CPU times, cover those.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/internal/pgembed"
)

// instrChildCmd is the hidden first argument that makes this binary one
// measured run (instrChild) instead of a benchmark.
const instrChildCmd = "instr-child"

// instrRun, when set, is the run id every workload constructed in this
// process uses for its keys (newRun): an instrChild of the replay workload
// must replay the intents its parent prepared under that id.
var instrRun string

// newRun is a workload's run id: the prefix of its keys and refs.
func newRun() string {
	if instrRun != "" {
		return instrRun
	}
	return randHex(4)
}

// instrShape is the operation counts of one workload's runs.
type instrShape struct {
	warmup, n1, n2, reps int
}

func (b *bench) instrShape() instrShape {
	if b.cfg.quick {
		return instrShape{warmup: 10, n1: 20, n2: 60, reps: 2}
	}
	return instrShape{warmup: 50, n1: 100, n2: 400, reps: 3}
}

// instrWorkloads are the workloads counted, at one caller, constructed
// anew (with instrRun, when set, as their run id).
func (b *bench) instrWorkloads() []workload {
	var out []workload
	for _, w := range []workload{
		b.floorWorkload(), b.floorTwoWorkload(), b.floorToolWorkload(),
		b.rsFirstWorkload("first execution", nil), b.rsInProcessWorkload(), b.rsReplayWorkload(),
	} {
		if b.wanted(w.system + "/" + w.name) {
			out = append(out, w)
		}
	}
	return out
}

// instrWorkload is the workload called name ("system/workload"), or nil.
func (b *bench) instrWorkloadNamed(name string) *workload {
	for _, w := range b.instrWorkloads() {
		if w.system+"/"+w.name == name {
			return &w
		}
	}
	return nil
}

// instrRow is one workload's counts: per operation, one value per
// repetition.
type instrRow struct {
	System   string    `json:"system"`
	Workload string    `json:"workload"`
	Client   []float64 `json:"client_instructions_per_op"`
	Backend  []float64 `json:"backend_instructions_per_op"`
	// Allocated is the client's bytes allocated per operation (the Go
	// runtime's own count): what its garbage collector, off while the
	// client is counted, would have to reclaim.
	Allocated []float64 `json:"client_bytes_allocated_per_op"`
}

func (r instrRow) total() []float64 {
	out := make([]float64, len(r.Client))
	for i := range r.Client {
		out[i] = r.Client[i] + r.Backend[i]
	}
	return out
}

type instrReport struct {
	Date    time.Time  `json:"date"`
	Command string     `json:"command"`
	Machine machine    `json:"machine"`
	Warmup  int        `json:"warmup_ops"`
	Ops     [2]int     `json:"ops"` // the two runs' operation counts
	Rows    []instrRow `json:"rows"`
	Seconds float64    `json:"seconds"`
}

// instrSample is one measured run's totals.
type instrSample struct {
	client, backend float64
	allocated       float64 // bytes the client allocated in its measured operations
}

// runInstructions is --instructions: the counts instead of the timed
// benchmark. It starts its own cluster under callgrind, with the
// --private-server settings when given.
func runInstructions(ctx context.Context, cfg config) int {
	rep, err := instructions(ctx, cfg, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: --instructions:", err)
		return 1
	}
	if !printAndWrite(rep.markdown(), cfg.out, rep.write) {
		return 1
	}
	return 0
}

func instructions(ctx context.Context, cfg config, log io.Writer) (*instrReport, error) {
	valgrind, err := exec.LookPath("valgrind")
	if err != nil {
		return nil, errors.New("valgrind not found: install it (apt-get install -y valgrind)")
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	out := cfg.callgrindDir
	if out == "" {
		if out, err = os.MkdirTemp("", "retrysafe-callgrind-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(out)
	} else if err := os.MkdirAll(out, 0o777); err != nil {
		return nil, err
	}
	if err := os.Chmod(out, 0o777); err != nil { // the server's user writes its backends' counts here
		return nil, err
	}
	began := time.Now()
	fmt.Fprintf(log, "bench: starting a private PostgreSQL cluster under callgrind (slow to start)\n")
	settings := append([]string{"autovacuum=off", "max_parallel_workers_per_gather=0"}, cfg.privateServer...)
	cl, err := pgembed.StartWith(ctx, pgembed.Options{
		Settings: settings,
		Env:      cfg.privateServerEnv,
		// Only what a backend does in PostgresMain (its session: the
		// startup of the connection and every statement) is counted: a
		// forked backend would otherwise start with the postmaster's count
		// at the time of the fork, which grows with every connection made.
		Wrap: []string{valgrind, "--tool=callgrind", "--trace-children=yes", "--collect-atstart=no", "--toggle-collect=PostgresMain",
			"--callgrind-out-file=" + filepath.Join(out, "pg.%p")},
	})
	if err != nil {
		return nil, err
	}
	defer cl.Stop() //nolint:errcheck // a temporary cluster

	b := &bench{cfg: cfg, srv: &server{url: cl.URL, session: cfg.session}, log: log}
	pg, err := b.srv.describe(ctx)
	if err != nil {
		return nil, err
	}
	shape := b.instrShape()
	rep := &instrReport{Date: time.Now().UTC(), Command: strings.Join(os.Args, " "), Machine: newReport(cfg, pg).Machine,
		Warmup: shape.warmup, Ops: [2]int{shape.n1, shape.n2}}
	var names []string
	for _, w := range b.instrWorkloads() {
		names = append(names, w.system+"/"+w.name)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("--only %s matches none of the counted workloads", cfg.only)
	}
	for _, name := range names {
		// The prep's run id, which the replay workload's children reuse.
		instrRun = randHex(4)
		row, err := b.instrWorkload(ctx, *b.instrWorkloadNamed(name), shape, valgrind, self, out)
		instrRun = ""
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		rep.Rows = append(rep.Rows, row)
	}
	rep.Seconds = time.Since(began).Seconds()
	return rep, nil
}

// instrWorkload counts one workload: reps repetitions of a run of n1 and a
// run of n2 operations, the order alternating. Every run gets a fresh
// database, prepared as the workload prepares it, so that no run works on
// tables an earlier one grew (with autovacuum off, their dead versions
// would make each run dearer than the one before).
func (b *bench) instrWorkload(ctx context.Context, w workload, shape instrShape, valgrind, self, out string) (instrRow, error) {
	row := instrRow{System: w.system, Workload: w.name}
	for rep := range shape.reps {
		counts := [2]int{shape.n1, shape.n2}
		if rep%2 == 1 {
			counts = [2]int{shape.n2, shape.n1}
		}
		var got [2]instrSample
		for k, n := range counts {
			t0 := time.Now()
			s, err := b.instrFresh(ctx, w, shape.warmup, n, valgrind, self, out)
			if err != nil {
				return row, err
			}
			b.logf("instructions: %s/%s, %d + %d ops: client %.1f M, backend %.1f M (%s)",
				w.system, w.name, shape.warmup, n, s.client/1e6, s.backend/1e6, time.Since(t0).Round(time.Second))
			got[k] = s
		}
		if counts[0] > counts[1] {
			got[0], got[1] = got[1], got[0]
		}
		d := float64(shape.n2 - shape.n1)
		row.Client = append(row.Client, (got[1].client-got[0].client)/d)
		row.Backend = append(row.Backend, (got[1].backend-got[0].backend)/d)
		row.Allocated = append(row.Allocated, (got[1].allocated-got[0].allocated)/d)
	}
	return row, nil
}

// instrFresh is one run on a database of its own.
func (b *bench) instrFresh(ctx context.Context, w workload, warmup, n int, valgrind, self, out string) (instrSample, error) {
	db, err := b.srv.create(ctx, "instr")
	if err != nil {
		return instrSample{}, err
	}
	defer b.drop(db)
	if err := w.prep(ctx, db); err != nil {
		return instrSample{}, fmt.Errorf("prep: %w", err)
	}
	return b.instrOnce(ctx, w, db, instrRun, warmup, n, valgrind, self, out)
}

// instrOnce runs one instrChild under callgrind and returns its count and
// its backends'.
func (b *bench) instrOnce(ctx context.Context, w workload, db *database, run string, warmup, n int, valgrind, self, out string) (instrSample, error) {
	args := []string{"--tool=callgrind", "--callgrind-out-file=" + filepath.Join(out, "client.%p"), self, instrChildCmd,
		"--db", b.srv.url, "--database", db.name, "--workload", w.system + "/" + w.name, "--run", run,
		"--warmup", strconv.Itoa(warmup), "--ops", strconv.Itoa(n)}
	if b.cfg.quick {
		args = append(args, "--quick")
	}
	cmd := exec.CommandContext(ctx, valgrind, args...)
	// One P, and no preemption signals: callgrind asserts on a SIGURG now
	// and then (threads.c, vgCallgrind_post_signal), and a preemption is a
	// clock-driven cost in an instruction count. No RDTSCP either: on CPUs
	// that report it (AMD EPYC hosts here), the runtime's cputicks uses
	// it, and valgrind 3.19 cannot decode it (SIGILL, "unhandled
	// instruction bytes: 0xF 0x1 0xF9"); without it the runtime reads the
	// clock with a fenced RDTSC, which valgrind runs. No collections but
	// the child's own two (instrChildRun): each marks the whole heap, about
	// 12M instructions here, and where the pacer put the others, with the
	// clock's say in it (its background worker's share is time), moved a
	// run's count by whole cycles, which 40 or 300 operations cannot
	// average away (a CI run under load read a first execution's client at
	// -75k instructions per operation). The bytes the operations allocate
	// are reported instead.
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off", "GOGC=off")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return instrSample{}, fmt.Errorf("%s: %w\n%s", instrChildCmd, err, excerpt(stderr.String(), 30, 60))
	}
	var res instrChildResult
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout.String())), &res); err != nil || len(res.Backends) == 0 {
		return instrSample{}, fmt.Errorf("%s printed %q: want its backends' pids (%v)", instrChildCmd, stdout.String(), err)
	}
	client, err := callgrindTotal(filepath.Join(out, fmt.Sprintf("client.%d", cmd.Process.Pid)))
	if err != nil {
		return instrSample{}, err
	}
	s := instrSample{client: client, allocated: float64(res.Allocated)}
	for _, pid := range res.Backends {
		v, err := backendTotal(ctx, out, pid)
		if err != nil {
			return instrSample{}, err
		}
		s.backend += v
	}
	return s, nil
}

// backendTotal waits for backend pid to exit (its pool closed when the
// child ended) and reads the count callgrind wrote then.
func backendTotal(ctx context.Context, dir string, pid int) (float64, error) {
	path := filepath.Join(dir, fmt.Sprintf("pg.%d", pid))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); os.IsNotExist(err) {
			return callgrindTotal(path)
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("backend %d still running 2 minutes after its client ended", pid)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// callgrindTotal reads the instructions a callgrind output file counted
// (its "summary:" line, or "totals:").
func callgrindTotal(path string) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseCallgrindTotal(f)
}

func parseCallgrindTotal(r io.Reader) (float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	total := -1.0
	for sc.Scan() {
		line := sc.Text()
		for _, p := range []string{"summary:", "totals:"} {
			if v, ok := strings.CutPrefix(line, p); ok {
				f := strings.Fields(v)
				if len(f) == 0 {
					continue
				}
				n, err := strconv.ParseFloat(f[0], 64)
				if err != nil {
					return 0, fmt.Errorf("callgrind %s %q: %w", p, v, err)
				}
				if p == "summary:" || total < 0 {
					total = n
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if total < 0 {
		return 0, errors.New("no summary or totals line in callgrind's output")
	}
	return total, nil
}

// excerpt keeps the first head and the last tail lines of s: a crash under
// valgrind says what it is in its first lines (an unhandled instruction,
// say) and Go's traceback where in its last.
func excerpt(s string, head, tail int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) <= head+tail {
		return strings.Join(lines, "\n")
	}
	return strings.Join(lines[:head], "\n") + fmt.Sprintf("\n[... %d lines ...]\n", len(lines)-head-tail) +
		strings.Join(lines[len(lines)-tail:], "\n")
}

// instrChild is one measured run, under callgrind: warm-up operations and
// then ops operations of one workload at one caller, on one connection;
// it prints the pids of the backends that served them, as JSON.
func instrChild(args []string) int {
	fs := flag.NewFlagSet(instrChildCmd, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: bench %s --db URL --database NAME --workload SYSTEM/NAME --run ID --warmup N --ops N\n\n"+
			"One measured run of bench --instructions, which starts it under callgrind; not meant to be run by hand.\n\n", instrChildCmd)
		fs.PrintDefaults()
	}
	adminURL := fs.String("db", "", "administrative URL of the server")
	name := fs.String("database", "", "the prepared database")
	wname := fs.String("workload", "", "system/workload")
	run := fs.String("run", "", "run id of the workload's keys")
	warmup := fs.Int("warmup", 0, "operations before the measured ones")
	ops := fs.Int("ops", 0, "measured operations")
	quick := fs.Bool("quick", false, "the --quick run's workloads (fewer replay keys)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *adminURL == "" || *name == "" || *wname == "" || *run == "" || *ops < 1 || *warmup < 0 {
		fmt.Fprintln(os.Stderr, "bench "+instrChildCmd+": --db, --database, --workload, --run and --ops are required")
		return 2
	}
	res, err := instrChildRun(context.Background(), *adminURL, *name, *wname, *run, *warmup, *ops, *quick)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench "+instrChildCmd+":", err)
		return 1
	}
	js, _ := json.Marshal(res)
	fmt.Println(string(js))
	return 0
}

// instrChildResult is what an instrChild prints: the pids of the backends
// that served it and the bytes its measured operations allocated.
type instrChildResult struct {
	Backends  []int  `json:"backends"`
	Allocated uint64 `json:"allocated_bytes"`
}

func instrChildRun(ctx context.Context, adminURL, name, wname, run string, warmup, ops int, quick bool) (*instrChildResult, error) {
	instrRun = run
	b := &bench{cfg: config{quick: quick}, srv: &server{url: adminURL}, log: io.Discard}
	w := b.instrWorkloadNamed(wname)
	if w == nil {
		return nil, fmt.Errorf("no workload %q", wname)
	}
	db, err := b.srv.existing(name)
	if err != nil {
		return nil, err
	}
	op, stop, err := w.start(ctx, db, 1)
	if err != nil {
		return nil, err
	}
	defer stop()
	// A collection before the measured operations and one after them, in
	// every run, and none other (instrOnce runs the child with GOGC=off):
	// both mark the same live heap, and what differs between two runs is
	// their operations' work, allocation and sweeping included.
	var before, after runtime.MemStats
	for i := range warmup + ops {
		if i == warmup {
			runtime.GC()
			runtime.ReadMemStats(&before)
		}
		if _, err := op(ctx, 0, int64(i)); err != nil {
			return nil, fmt.Errorf("operation %d: %w", i, err)
		}
	}
	runtime.ReadMemStats(&after)
	runtime.GC()
	// Every backend on the database but the probe's own is the workload's.
	probe, err := pgx.Connect(ctx, db.url)
	if err != nil {
		return nil, err
	}
	defer probe.Close(ctx)
	res := &instrChildResult{Allocated: after.TotalAlloc - before.TotalAlloc}
	err = probe.QueryRow(ctx, `SELECT coalesce(array_agg(pid ORDER BY pid), '{}') FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&res.Backends)
	return res, err
}

func (rep *instrReport) markdown() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "## retrysafe instruction counts, %s\n\n", rep.Date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&sb, "`%s`; %s, %d cores; PostgreSQL %s under callgrind; one caller, one connection, GOMAXPROCS=1; per operation: (run of %d − run of %d) / %d, after %d warm-up operations in each run; one value per repetition (the order of the two runs alternating).\n\n",
		rep.Command, rep.Machine.CPU, rep.Machine.Cores, rep.Machine.Postgres["server_version"], rep.Ops[1], rep.Ops[0], rep.Ops[1]-rep.Ops[0], rep.Warmup)
	sb.WriteString("| system | workload | client instructions/op | backend instructions/op | total/op | client bytes allocated/op |\n|---|---|---:|---:|---:|---:|\n")
	for _, r := range rep.Rows {
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s |\n", r.System, r.Workload, kList(r.Client), kList(r.Backend), kList(r.total()), floatList(r.Allocated, "%.0f"))
	}
	sb.WriteString("\n")
	ratios := []struct{ label, num, den string }{
		{"floor / retrysafe first execution (the rate ratio a machine whose CPU runs out allows, user space only)", "floor/" + floorName, "retrysafe/first execution"},
		{"retrysafe first execution / commit + tool + commit", "retrysafe/first execution", "floor/" + floorToolName},
		{"retrysafe first execution, tool in process / two single-row commits", "retrysafe/" + loneNoToolName, "floor/" + floorTwoName},
		{"retrysafe replay / floor", "retrysafe/replay", "floor/" + floorName},
	}
	var lines []string
	for _, q := range ratios {
		a, b := rep.find(q.num), rep.find(q.den)
		if a == nil || b == nil {
			continue
		}
		at, bt := a.total(), b.total()
		var rs []float64
		for i := range min(len(at), len(bt)) {
			rs = append(rs, at[i]/bt[i])
		}
		lines = append(lines, fmt.Sprintf("| %s | %s |", q.label, floatList(rs, "%.2f")))
	}
	if len(lines) > 0 {
		sb.WriteString("| total instructions per operation | per repetition |\n|---|---|\n")
		sb.WriteString(strings.Join(lines, "\n") + "\n\n")
	}
	sb.WriteString("- Counted: user-space instructions of this benchmark's process (caller, pgx, retrysafe, and both ends of the in-process HTTP tool) and of the backend serving its connection. Not counted: the kernel's work (the loopback TCP sends and receives, WAL writes and flushes), PostgreSQL's WAL writer and checkpointer.\n")
	sb.WriteString("- The client runs with its garbage collector off (GOGC=off) but for one collection at the warm-up's end and one after the operations: its count leaves out the marking of collections, which the pacer places partly by the clock and which come whole (about 12M instructions each here); the bytes an operation allocates say what it would cost in them.\n")
	sb.WriteString("- A count barely depends on the machine's load: repetitions differ by what the runs themselves do differently (the runtime's scheduler and its clock-driven background work), not by the machine's speed.\n")
	return sb.String()
}

func (rep *instrReport) find(name string) *instrRow {
	for i := range rep.Rows {
		if rep.Rows[i].System+"/"+rep.Rows[i].Workload == name {
			return &rep.Rows[i]
		}
	}
	return nil
}

func kList(vs []float64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("%.0fk", v/1e3)
	}
	return strings.Join(parts, ", ")
}

func floatList(vs []float64, format string) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf(format, v)
	}
	return strings.Join(parts, ", ")
}

func (rep *instrReport) write(dir, md string) ([]string, error) {
	return writeResults(dir, "instructions", rep.Date, md, rep, false)
}
