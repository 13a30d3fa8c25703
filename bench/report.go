package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

type machine struct {
	CPU      string            `json:"cpu"`
	Cores    int               `json:"cores"`
	Kernel   string            `json:"kernel"`
	Go       string            `json:"go"`
	Postgres map[string]string `json:"postgres"`
}

type report struct {
	Date    time.Time `json:"date"`
	Command string    `json:"command"`
	Machine machine   `json:"machine"`
	// Session is --session-settings: what every benchmark session set.
	Session     map[string]string `json:"session_settings,omitempty"`
	Slice       string            `json:"slice"`        // one workload's measured time per round
	SliceWarmup string            `json:"slice_warmup"` // unmeasured before each slice
	Rounds      int               `json:"rounds"`
	MaxConns    int               `json:"max_conns"`
	Results     []*result         `json:"results"`
	Races       []*raceResult     `json:"races,omitempty"`
	Scale       *scaleResult      `json:"scale,omitempty"`
	Pairs       []pairStat        `json:"paired_ratios,omitempty"`
	Targets     []target          `json:"targets"`
	Seconds     float64           `json:"seconds"`

	floor map[int]float64
}

type target struct {
	Name   string `json:"name"`
	Actual string `json:"actual"`
	Met    bool   `json:"met"`
	// Unstable: a ratio the target rests on spread too widely for a
	// verdict; Met is then false and says nothing.
	Unstable bool `json:"unstable,omitempty"`
}

func newReport(cfg config, pg map[string]string) *report {
	cmd := "./scripts/bench"
	if len(os.Args) > 1 {
		cmd += " " + strings.Join(os.Args[1:], " ")
	}
	return &report{
		Date: time.Now().UTC(), Command: cmd,
		Machine: machine{CPU: cpuModel(), Cores: runtime.NumCPU(), Kernel: kernel(), Go: runtime.Version(), Postgres: pg},
		Slice:   cfg.slice.String(), SliceWarmup: cfg.sliceWarmup.String(), Rounds: cfg.rounds, MaxConns: cfg.maxConns,
		Session: cfg.session,
		floor:   map[int]float64{},
	}
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return runtime.GOOS
	}
	return runtime.GOOS + " " + strings.TrimSpace(string(b))
}

// stealNoted is the CPU steal (per cent of the machine's time over a
// row's slices) from which the row's note names it: below it, steal moves
// rates less than the slices' own spread.
const stealNoted = 2

// add records r with its ratio to the floor at the same callers.
func (rep *report) add(r *result) {
	if f := rep.floor[r.Callers]; f > 0 {
		r.Floor = f
		r.Ratio = r.Rate / f
	}
	switch {
	case r.System == "floor" && r.Workload == floorName && r.Rate > 0:
		r.addNote("two-commit ceiling %.0f/s (0.50)", r.Rate/2)
	case strings.HasPrefix(r.Workload, "first execution") && !strings.Contains(r.Workload, " rows") && !strings.Contains(r.Workload, "purg") && r.System != "floor":
		if m := rep.find("floor", floorToolName, r.Callers); m != nil && m.Rate > 0 {
			r.addNote("%.2f of commit + tool + commit", r.Rate/m.Rate)
		}
	}
	if r.StealPct != nil && *r.StealPct >= stealNoted {
		r.addNote("CPU steal %.0f %% during its slices", *r.StealPct)
	}
	rep.Results = append(rep.Results, r)
}

func (rep *report) failures() int {
	n := 0
	for _, r := range rep.Results {
		if r.Err != "" {
			n++
		}
	}
	for _, r := range rep.Races {
		if r.Err != "" {
			n++
		}
	}
	if rep.Scale != nil {
		if rep.Scale.Err != "" {
			n++
		}
		for _, p := range rep.Scale.Purges {
			if p.Err != "" {
				n++
			}
		}
	}
	return n
}

func (rep *report) find(system, workload string, callers int) *result {
	for _, r := range rep.Results {
		if r.System == system && r.Workload == workload && r.Callers == callers && r.Err == "" {
			return r
		}
	}
	return nil
}

// checkTargets evaluates issue 24's targets on this run's figures: each
// comparison is a paired ratio (paired.go), met when its median is, and
// without a verdict when its spread is too wide.
func (rep *report) checkTargets() {
	rep.Targets = nil
	addT := func(name, actual string, met, unstable bool) {
		rep.Targets = append(rep.Targets, target{Name: name, Actual: actual, Met: met && !unstable, Unstable: unstable})
	}
	atLeast := func(name, pair string, callers int, min float64, unit string) {
		if p, ok := rep.findPair(pair, callers); ok {
			got := p.text(unit)
			// The least any claim-before-call design does, on the same
			// machine: a target above it is bound by the tool's and the
			// commits' own cost, not by the runtime.
			if f := rep.find("floor", floorToolName, callers); f != nil && f.Ratio > 0 {
				got += fmt.Sprintf("; commit + tool + commit reaches %.2f of the floor here", f.Ratio)
			}
			addT(name, got, p.Median >= min, !p.Stable)
		}
	}
	atLeast("first executions >= 0.60 x floor at 32 callers", "retrysafe first execution / floor", 32, 0.60, "")
	atLeast("first executions >= 0.50 x floor at 8 callers", "retrysafe first execution / floor", 8, 0.50, "")
	every := func(name, pair string, min float64, unit string) {
		var parts []string
		met, unstable, any := true, false, false
		for _, p := range rep.Pairs {
			if p.Name != pair {
				continue
			}
			any = true
			parts = append(parts, fmt.Sprintf("%d: %s", p.Callers, p.text(unit)))
			met = met && p.Median >= min
			unstable = unstable || !p.Stable
		}
		if any {
			addT(name, strings.Join(parts, "; "), met, unstable)
		}
	}
	every("replays >= 1.0 x floor at every level", "retrysafe replay / floor", 1.0, "")
	every("first executions >= 5 x DBOS at every level", "retrysafe first execution / DBOS first execution", 5, "x")
	if p, ok := rep.findPair("p50 latency: retrysafe first execution / commit + tool + commit", 1); ok {
		addT("a lone call's p50 <= 1.25 x commit + tool + commit's", p.text("x"), p.Median <= 1.25, !p.Stable)
	}
	if r := rep.find("retrysafe", "first execution", 8); r != nil {
		got := fmt.Sprintf("%.2f ms", r.AddedP99)
		// What the database alone gives at the same callers: the least a
		// call that must commit before the side effect can add.
		var ctx []string
		if f := rep.find("floor", floorName, 8); f != nil {
			ctx = append(ctx, fmt.Sprintf("a single-row commit's p99 %.2f ms", f.P99))
		}
		if f := rep.find("floor", floorToolName, 8); f != nil {
			ctx = append(ctx, fmt.Sprintf("commit + tool + commit added p99 %.2f ms", f.AddedP99))
		}
		if len(ctx) > 0 {
			got += " (" + strings.Join(ctx, "; ") + ")"
		}
		addT("p99 added latency < 3 ms at 8 callers", got, r.AddedP99 < 3, false)
	}
	if sc := rep.Scale; sc != nil && sc.Pair != nil {
		p := *sc.Pair
		addT(fmt.Sprintf("%s-row first executions within 10%% of empty at %d callers", count(sc.Rows), sc.Callers),
			p.text(" of empty"), p.Median >= 0.90, !p.Stable)
	}
	if sc := rep.Scale; sc != nil {
		for _, pr := range sc.Purges {
			if pr.Err != "" {
				continue
			}
			got := fmt.Sprintf("%.2f ms while purging, %.2f ms held (rounds' p99 %.2f, IQR %.2f–%.2f, %d rounds); purge %.0f actions/s, %.1fs",
				pr.WithP99, pr.WithoutP99, pr.WithMedian, pr.WithQ1, pr.WithQ3, pr.Rounds, pr.RowsPerSec, pr.ActiveSeconds)
			if pr.Stopped {
				got += fmt.Sprintf(" (stopped after the rounds: %s of %s rows)", groupDigits(pr.Actions), groupDigits(pr.Expired))
			}
			addT(fmt.Sprintf("p99 added latency < 3 ms at %d callers while purging (%s)", pr.Callers, pr.setting()), got,
				pr.WithP99 < 3, pr.Rounds < 3)
		}
	}
}

func ms(v float64) string {
	switch {
	case v == 0:
		return "–"
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func (rep *report) markdown() string {
	rep.checkTargets()
	var sb strings.Builder
	m := rep.Machine
	pg := m.Postgres
	fmt.Fprintf(&sb, "## retrysafe benchmarks, %s\n\n", rep.Date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&sb, "- machine: %s, %d cores, %s; %s\n", m.CPU, m.Cores, m.Kernel, m.Go)
	fmt.Fprintf(&sb, "- PostgreSQL %s: fsync=%s, synchronous_commit=%s, wal_sync_method=%s, shared_buffers=%s, max_wal_size=%s, checkpoint_timeout=%s, wal_compression=%s\n",
		pg["server_version"], pg["fsync"], pg["synchronous_commit"], pg["wal_sync_method"], pg["shared_buffers"],
		pg["max_wal_size"], pg["checkpoint_timeout"], pg["wal_compression"])
	if len(rep.Session) > 0 {
		var kv []string
		for k, v := range rep.Session {
			kv = append(kv, k+"="+v)
		}
		slices.Sort(kv)
		fmt.Fprintf(&sb, "- every benchmark session set %s (session-level; the server's configuration unchanged)\n", strings.Join(kv, ", "))
	}
	fmt.Fprintf(&sb, "- command: `%s` (slices of %s after %s warm-up, %d rounds per level; pool = min(callers, %d); %.0fs in all)\n\n",
		rep.Command, rep.Slice, rep.SliceWarmup, rep.Rounds, rep.MaxConns, rep.Seconds)
	sb.WriteString("| system | workload | callers | ops/s | × floor (IQR) | p50 ms | p99 ms | added p99 ms | commits/op | WAL B/op | CPU µs/op client / server | note |\n")
	sb.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rep.Results {
		if r.Err != "" {
			fmt.Fprintf(&sb, "| %s | %s | %d | error | | | | | | | | %s |\n", r.System, r.Workload, r.Callers, strings.ReplaceAll(r.Err, "|", "/"))
			continue
		}
		ratio := "–"
		switch {
		case r.RatioQ3 > 0:
			ratio = fmt.Sprintf("%.2f (%.2f–%.2f)", r.Ratio, r.RatioQ1, r.RatioQ3)
		case r.Floor > 0 && !(r.System == "floor" && r.Workload == floorName):
			ratio = fmt.Sprintf("%.2f", r.Ratio)
		}
		cpu := "–"
		if r.ClientCPUPerOp > 0 {
			cpu = fmt.Sprintf("%.0f / %s", r.ClientCPUPerOp, strings.TrimSuffix(cpuText(r.ServerCPUPerOp), " µs"))
		}
		added := "–"
		if r.AddedP99 != r.P99 {
			added = ms(r.AddedP99)
		}
		fmt.Fprintf(&sb, "| %s | %s | %d | %.0f | %s | %s | %s | %s | %.2f | %.0f | %s | %s |\n",
			r.System, r.Workload, r.Callers, r.Rate, ratio, ms(r.P50), ms(r.P99), added, r.CommitsPerOp, r.WALPerOp, cpu, r.Note)
	}
	rep.aroundTable(&sb)
	rep.statementsTable(&sb)
	rep.scaleSection(&sb)
	if len(rep.Races) > 0 {
		sb.WriteString("\nCallers racing on one key (each round releases every caller at once on a new key):\n\n")
		sb.WriteString("| handler | callers per key | keys | extra tool calls | keys called twice or more | extra rows |\n")
		sb.WriteString("|---|---:|---:|---:|---:|---:|\n")
		for _, r := range rep.Races {
			if r.Err != "" {
				fmt.Fprintf(&sb, "| %s | %d | %d | error: %s | | |\n", r.System, r.Callers, r.Rounds, r.Err)
				continue
			}
			fmt.Fprintf(&sb, "| %s | %d | %d | %d | %d | %d |\n", r.System, r.Callers, r.Rounds, r.ExtraCalls, r.KeysHit, r.ExtraRows)
		}
	}
	if len(rep.Pairs) > 0 {
		sb.WriteString("\nPaired ratios: the median of the ratios of slices of the same round, with their interquartile range (spread over 20 % of the median: no verdict):\n\n")
		sb.WriteString("| comparison | callers | median | IQR | rounds |\n|---|---:|---:|---:|---:|\n")
		for _, p := range rep.Pairs {
			note := ""
			if !p.Stable {
				note = " (unstable)"
			}
			fmt.Fprintf(&sb, "| %s | %d | %.2f%s | %.2f–%.2f | %d |\n", p.Name, p.Callers, p.Median, note, p.Q1, p.Q3, len(p.Ratios))
		}
	}
	if len(rep.Targets) > 0 {
		sb.WriteString("\nTargets (issue 24):\n\n| target | this run | met |\n|---|---|---|\n")
		for _, t := range rep.Targets {
			mark := "no"
			switch {
			case t.Unstable:
				mark = "no verdict (unstable)"
			case t.Met:
				mark = "yes"
			}
			fmt.Fprintf(&sb, "| %s | %s | %s |\n", t.Name, t.Actual, mark)
		}
	}
	sb.WriteString(legend)
	return sb.String()
}

// rowsWhere returns the rows without an error for which keep is true.
func (rep *report) rowsWhere(keep func(*result) bool) []*result {
	var rows []*result
	for _, r := range rep.Results {
		if r.Err == "" && keep(r) {
			rows = append(rows, r)
		}
	}
	return rows
}

// aroundTable writes where the latency of the rows that call the tool goes:
// before the call (for a runtime, its claim), in it, after it (recording
// the outcome).
func (rep *report) aroundTable(sb *strings.Builder) {
	rows := rep.rowsWhere(func(r *result) bool { return r.Around != nil })
	if len(rows) == 0 {
		return
	}
	sb.WriteString("\nLatency around the tool call, p50 / p99 ms (operations that called it):\n\n")
	sb.WriteString("| system | workload | callers | before the call | in the tool | after the call |\n")
	sb.WriteString("|---|---|---:|---:|---:|---:|\n")
	for _, r := range rows {
		a := r.Around
		fmt.Fprintf(sb, "| %s | %s | %d | %s / %s | %s / %s | %s / %s |\n", r.System, r.Workload, r.Callers,
			ms(a.BeforeP50), ms(a.BeforeP99), ms(a.ToolP50), ms(a.ToolP99), ms(a.AfterP50), ms(a.AfterP99))
	}
}

const legend = `
- Every level's workloads run in slices (--slice, after --slice warm-up of a quarter of it at most), one workload at a time, each once per round, in a new random order every round (--rounds). A slice in which no operation that started in it has completed by its end stays open until one does (the log says so), so that a stall longer than a slice counts in the rate instead of failing the point. CPU steal (/proc/stat: time the hypervisor gave other guests while this one wanted to run) is logged for each level and noted on rows whose slices saw 2 % or more: it moves rates without any change in the code. Rates and latencies pool a workload's slices; × floor is the median of its per-round ratios to the floor, with their quartiles. CPU µs/op: the benchmark process's CPU time (getrusage: callers, driver and the in-process tool) and the database backends' (from /proc, when the server is local) per operation issued, over the workload's slices: figures that a loaded machine's clock does not move the way it moves rates.
- floor: one INSERT ... ON CONFLICT DO NOTHING of a new key per transaction, through pgx, on the same server, callers and pool: the most commits per second this database gives. An execution that needs two commits can reach at most half of it.
- floor commit + tool + commit: the same minimal commit, the same tool call, a second minimal commit: the least any design that commits a claim before calling and records the outcome after can do. First-execution rows note their ratio to it.
- retrysafe first execution: Executor.Execute of a new intent: freeze + claim (one round trip, one statement, one commit that waits for the WAL flush), the tool call (a local HTTP no-op honouring Idempotency-Key), the fenced completion (one round trip, one commit that does not wait for the flush: a success lost in a crash is learned again from the provider by the key). Concurrent calls share those round trips and commits (group commit: Config.GroupCommit), so commits/op falls below 2 as callers rise. "sync completion": the same with Config.SyncCompletion, both commits waiting for the flush. "no group commit": GroupCommit 1, every call's round trips and commits its own.
- retrysafe first execution, pix.cob: the same Execute with tools/apipix's pix.cob as the tool, against a local no-op API Pix server (the OAuth2 token endpoint, PUT /api/cob/{txid} answering 201 with the charge, GET 200/404, in the specification's shapes): the txid derived from the key, the token fetched once and cached, the cob body built from the frozen payload. Its ratio to the floor is paired like the others; its ratio to "first execution" is what a real API Pix call's client costs beyond the benchmark tool's.
- retrysafe replay: Execute of an intent that already completed (a redelivery): nothing written, the stored response; the tool is not called. After the first 32 replays (in the warm-up) the executor reads first: one round trip, one statement per group of replays.
- dbos: DBOS Transact Go, a workflow with one step calling the same tool, workflow id = the intent's key; re-run = RunWorkflow with the id of a finished workflow (the recorded result, the step not run).
- naive: SELECT the key, and if absent call the tool and INSERT (check-then-act, no unique guard): the cost of doing it wrong; its duplicates are in the race table.
- × floor: ops/s divided by the floor's ops/s at the same callers in this run. added p99: latency minus the time spent in the tool call. Latency around the tool call: each operation that called the tool, split at the call; before it is a runtime's claim (retrysafe: normalize, key, freeze + claim, waiting for a group; DBOS: starting the workflow), after it the recording of the outcome and the return to the caller. commits/op: pg_stat_database.xact_commit per operation (read-only transactions included). WAL B/op: server-wide WAL per operation (approximate when something else writes to the server).
`

// write saves the Markdown and the JSON under dir (and as latest.*).
func (rep *report) write(dir, md string) ([]string, error) {
	d, err := resultsDir(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, err
	}
	stamp := rep.Date.Format("20060102-150405")
	var paths []string
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"bench-" + stamp + ".md", []byte(md)}, {"bench-" + stamp + ".json", js},
		{"latest.md", []byte(md)}, {"latest.json", js},
	} {
		p := filepath.Join(d, f.name)
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths[:2], nil
}
