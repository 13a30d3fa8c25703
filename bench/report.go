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
	// Commit is the checkout's (gitCommit): what --combine says each run
	// measured.
	Commit  string  `json:"commit,omitempty"`
	Machine machine `json:"machine"`
	// Session is --session-settings: what every benchmark session set.
	Session     map[string]string `json:"session_settings,omitempty"`
	Slice       string            `json:"slice"`        // one workload's measured time per round
	SliceWarmup string            `json:"slice_warmup"` // unmeasured before each slice
	Rounds      int               `json:"rounds"`
	MaxConns    int               `json:"max_conns"`
	Results     []*result         `json:"results"`
	Races       []*raceResult     `json:"races,omitempty"`
	Scale       *scaleResult      `json:"scale,omitempty"`
	Lone        *loneResult       `json:"lone_call,omitempty"`
	Pairs       []pairStat        `json:"paired_ratios,omitempty"`
	Targets     []target          `json:"targets"`
	Seconds     float64           `json:"seconds"`

	floor map[int]float64
}

type target struct {
	Name   string `json:"name"`
	Actual string `json:"actual"`
	Met    bool   `json:"met"`
	// Undecided: the interquartile range the target rests on straddles
	// it, so the run cannot tell; Met is then false and says nothing.
	Undecided bool `json:"undecided,omitempty"`
	// Bound is what, in the same run, limits the target from outside
	// retrysafe (the database's own commit, the least a claim-before-call
	// design does), when the run measured it.
	Bound string `json:"bound,omitempty"`
	// OutOfReach: the bound itself misses the target, so no design that
	// claims before it calls could meet it on this machine in this run.
	OutOfReach bool `json:"out_of_reach,omitempty"`
}

// decision is a target's verdict on an interquartile range: met when all
// of it is on the target's side, missed when all of it is on the other,
// undecided when it straddles the target (or rests on fewer than three
// rounds). A wide spread that lies wholly on one side still decides; a
// narrow one across the target does not.
type decision struct{ met, decided bool }

// decide is the decision on the range [q1, q3] for a target ok meets on
// one side of a threshold: the two ends then tell for all of it.
func decide(q1, q3 float64, rounds int, ok func(float64) bool) decision {
	switch {
	case rounds < 3:
		return decision{}
	case ok(q1) && ok(q3):
		return decision{met: true, decided: true}
	case !ok(q1) && !ok(q3):
		return decision{decided: true}
	}
	return decision{}
}

func atLeast(q1, q3, min float64, rounds int) decision {
	return decide(q1, q3, rounds, func(x float64) bool { return x >= min })
}

func atMost(q1, q3, max float64, rounds int) decision {
	return decide(q1, q3, rounds, func(x float64) bool { return x <= max })
}

func below(q1, q3, max float64, rounds int) decision {
	return decide(q1, q3, rounds, func(x float64) bool { return x < max })
}

// all is the decision of a target that holds at every level: missed when
// one level missed, met when every level met, else undecided.
func all(ds []decision) decision {
	met := len(ds) > 0
	for _, d := range ds {
		if d.decided && !d.met {
			return decision{decided: true}
		}
		met = met && d.met
	}
	return decision{met: met, decided: met}
}

func newReport(cfg config, pg map[string]string) *report {
	cmd := "./scripts/bench"
	if len(os.Args) > 1 {
		cmd += " " + strings.Join(os.Args[1:], " ")
	}
	return &report{
		Date: time.Now().UTC(), Command: cmd, Commit: gitCommit(),
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

// checkTargets evaluates issue 24's targets on this run's figures. Each
// rests on an interquartile range (paired.go's paired ratios, or the
// per-round p99s) and is decided by where that range lies (decision);
// where the run measured what bounds a target from outside retrysafe, the
// target says so, and whether the bound itself misses it.
func (rep *report) checkTargets() {
	rep.Targets = nil
	add := func(name, actual string, d decision, bound string, outOfReach bool) {
		rep.Targets = append(rep.Targets, target{Name: name, Actual: actual, Met: d.met && d.decided,
			Undecided: !d.decided, Bound: bound, OutOfReach: outOfReach})
	}
	// What the least claim-before-call shape and the naive handler (one
	// durable commit, no claim) reach of the floor at the same callers:
	// context for a floor target, not a bound (group commit lets a runtime
	// pass both once calls overlap).
	shapes := func(callers int) string {
		var parts []string
		if f := rep.find("floor", floorToolName, callers); f != nil && f.Ratio > 0 {
			parts = append(parts, fmt.Sprintf("commit + tool + commit reaches %.2f of the floor here", f.Ratio))
		}
		if f := rep.find("naive", firstName, callers); f != nil && f.Ratio > 0 {
			parts = append(parts, fmt.Sprintf("naive %.2f", f.Ratio))
		}
		if p, ok := rep.findPair(cpuPairName, callers); ok {
			parts = append(parts, "on a machine whose CPU runs out retrysafe's CPU per execution allows "+p.text(""))
		}
		if p, ok := rep.findPair(inProcPairName, callers); ok {
			s := "with the tool answered in process (no HTTP provider on these cores) retrysafe reaches " + p.text("")
			if c, ok := rep.findPair(cpuInProcPairName, callers); ok {
				s += fmt.Sprintf(", its CPU allows %.2f", c.Median)
			}
			// What the stand-in provider's HTTP exchange, its client and
			// its server both in this process, costs per execution beside
			// retrysafe's own client work: a deployment pays the client's
			// side on its cores, not the server's.
			viaHTTP, own := rep.find("retrysafe", firstName, callers), rep.find("retrysafe", loneNoToolName, callers)
			if viaHTTP != nil && own != nil && viaHTTP.ClientCPUPerOp > own.ClientCPUPerOp && own.ClientCPUPerOp > 0 {
				s += fmt.Sprintf(" (the provider's HTTP exchange, both ends in this process, took about %.0f of the client's %.0f µs of CPU per execution)",
					viaHTTP.ClientCPUPerOp-own.ClientCPUPerOp, viaHTTP.ClientCPUPerOp)
			}
			parts = append(parts, s)
		}
		if f := rep.find("floor", floorName, callers); f != nil && f.ServerCPUPerOp > 0 {
			parts = append(parts, fmt.Sprintf("the floor kept about %.1f of %d cores busy", f.Rate*(f.ClientCPUPerOp+f.ServerCPUPerOp)/1e6, rep.Machine.Cores))
		}
		return strings.Join(parts, ", ")
	}
	floorAt := func(name string, callers int, min float64) {
		if p, ok := rep.findPair("retrysafe first execution / floor", callers); ok {
			add(name, p.text(""), atLeast(p.Q1, p.Q3, min, len(p.Ratios)), shapes(callers), false)
		}
	}
	floorAt("first executions >= 0.60 x floor at 32 callers", 32, 0.60)
	floorAt("first executions >= 0.50 x floor at 8 callers", 8, 0.50)
	every := func(name, pair string, min float64, unit string, bound func(callers int) (string, bool)) {
		var parts, bounds []string
		var ds []decision
		out := false
		for _, p := range rep.Pairs {
			if p.Name != pair {
				continue
			}
			parts = append(parts, fmt.Sprintf("%d: %s", p.Callers, p.text(unit)))
			ds = append(ds, atLeast(p.Q1, p.Q3, min, len(p.Ratios)))
			if bound != nil {
				if b, o := bound(p.Callers); b != "" {
					bounds = append(bounds, fmt.Sprintf("%d: %s", p.Callers, b))
					out = out || o
				}
			}
		}
		if len(ds) > 0 {
			add(name, strings.Join(parts, "; "), all(ds), strings.Join(bounds, "; "), out)
		}
	}
	every("replays >= 1.0 x floor at every level", "retrysafe replay / floor", 1.0, "", nil)
	// At one caller nothing overlaps and nothing groups, and the naive
	// handler (a read, the tool, one durable commit) does no more than a
	// design that must commit a claim before the call and write the
	// outcome after it: its ratio to DBOS bounds retrysafe's.
	every("first executions >= 5 x DBOS at every level", "retrysafe first execution / DBOS first execution", 5, "x",
		func(callers int) (string, bool) {
			p, ok := rep.findPair("naive first execution / DBOS first execution", callers)
			if !ok || callers != 1 {
				return "", false
			}
			d := atLeast(p.Q1, p.Q3, 5, len(p.Ratios))
			return fmt.Sprintf("naive reaches %s of DBOS: no claim-before-call design does less work at one caller", p.text("x")), d.decided && !d.met
		})
	lone, ok := rep.findPair(lonePairName, 1)
	if !ok {
		lone, ok = rep.findPair("p50 latency: retrysafe first execution / commit + tool + commit", 1)
	}
	if ok {
		add("a lone call's p50 <= 1.25 x commit + tool + commit's", lone.Name+": "+lone.text("x"),
			atMost(lone.Q1, lone.Q3, 1.25, len(lone.Ratios)), rep.loneSplit(), false)
	}
	// A call that must commit before its side effect adds at least one
	// commit's latency: the floor's own p99 at the same callers bounds
	// every p99 target from below.
	commitP99 := func(callers int) (string, bool) {
		f := rep.find("floor", floorName, callers)
		if f == nil {
			return "", false
		}
		return fmt.Sprintf("a single-row commit's own p99 at %d callers is %.2f ms", callers, f.P99), f.P99 >= 3
	}
	if r := rep.find("retrysafe", "first execution", 8); r != nil {
		got := fmt.Sprintf("%.2f ms (rounds' p99 IQR %.2f–%.2f, %d rounds)", r.AddedP99, r.AddedP99Q1, r.AddedP99Q3, r.Rounds)
		if f := rep.find("floor", floorToolName, 8); f != nil {
			got += fmt.Sprintf("; commit + tool + commit added p99 %.2f ms", f.AddedP99)
		}
		b, out := commitP99(8)
		add("p99 added latency < 3 ms at 8 callers", got, below(r.AddedP99Q1, r.AddedP99Q3, 3, r.Rounds), b, out)
	}
	if sc := rep.Scale; sc != nil && sc.Pair != nil {
		p := *sc.Pair
		// Both sides' rows, when the run has them, say what each bound
		// cost per execution.
		full, empty := rep.find("retrysafe", scaleName(sc.Rows), sc.Callers), rep.find("retrysafe", scaleName(0), sc.Callers)
		var bounds []string
		if ck := sc.Checkpoint; ck != nil && ck.InRounds > 0 {
			// The first change to each page of the preloaded side's
			// random-key indexes after it logged the whole page.
			b := fmt.Sprintf("%d checkpoint(s) began during the rounds", ck.InRounds)
			if full != nil && empty != nil {
				b += fmt.Sprintf(": full-page images per execution %.2f on the preloaded tables, %.2f on empty ones", full.FPIPerOp, empty.FPIPerOp)
			}
			bounds = append(bounds, b)
		}
		if b := rep.buffersBound(sc, full, empty); b != "" {
			bounds = append(bounds, b)
		}
		if b := cpuBound(sc.Rounds); b != "" {
			bounds = append(bounds, b)
		}
		add(fmt.Sprintf("%s-row first executions within 10%% of empty at %d callers", count(sc.Rows), sc.Callers),
			p.text(" of empty"), atLeast(p.Q1, p.Q3, 0.90, len(p.Ratios)), strings.Join(bounds, "; "), false)
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
			b, out := commitP99(pr.Callers)
			add(fmt.Sprintf("p99 added latency < 3 ms at %d callers while purging (%s)", pr.Callers, pr.setting()), got,
				below(pr.WithQ1, pr.WithQ3, 3, pr.Rounds), b, out)
		}
	}
}

// cpuBound is the scale pair's ratio a machine whose CPU runs out allows:
// the empty side's CPU per execution (this process's and its backends')
// over the preloaded side's, round by round, as the levels give theirs
// (cpuPairName). Where it is as low as the ratio itself, what the
// preloaded tables cost is CPU, whatever else the rounds held. Empty
// without per-round CPU (a remote server, a report from before the rounds
// were kept).
func cpuBound(rs []scaleRound) string {
	var ratios, full, empty, fullSys, emptySys []float64
	for _, r := range rs {
		if r.EmptyCPU <= 0 || r.PreloadedCPU <= 0 {
			return ""
		}
		ratios = append(ratios, r.EmptyCPU/r.PreloadedCPU)
		full, empty = append(full, r.PreloadedCPU), append(empty, r.EmptyCPU)
		fullSys, emptySys = append(fullSys, r.PreloadedSys), append(emptySys, r.EmptySys)
	}
	if len(ratios) == 0 {
		return ""
	}
	med := func(v []float64) float64 { _, m, _ := quartiles(v); return m }
	p := newPair("", 0, ratios)
	return fmt.Sprintf("on a machine whose CPU runs out the preloaded side's CPU per execution allows %s (a round's median: %.0f µs against %.0f, its backends' kernel part %.0f against %.0f)",
		p.text(""), med(full), med(empty), med(fullSys), med(emptySys))
}

// buffersBound says, when the preloaded side's key indexes are larger
// than the server's shared buffers, by how much, and what each side read
// from outside them per execution: every first execution inserts into
// each of them at a random place, so that side's backends then read
// leaves through the kernel's page cache where the empty side's few pages
// stay in shared buffers (the twenty-ninth host's 1M point: 1.5 blocks
// read per execution against 0.2 to 0.3, on 128 MB). Empty when the
// server's shared_buffers or the preload's sizes are unknown, or the
// indexes fit. full and empty are the two sides' rows (nil when missing).
func (rep *report) buffersBound(sc *scaleResult, full, empty *result) string {
	if sc.Sizes == nil {
		return ""
	}
	idx, ok := sc.Sizes.keyIndexBytes()
	sb, known := pgBytes(rep.Machine.Postgres["shared_buffers"])
	if !ok || !known || sb == 0 || idx <= sb {
		return ""
	}
	out := fmt.Sprintf("the preloaded side's key indexes (%d MB) are %.1f times shared_buffers (%d MB)", idx>>20, float64(idx)/float64(sb), sb>>20)
	if full != nil && empty != nil {
		out += fmt.Sprintf(": blocks read from outside them per execution %.1f on the preloaded tables, %.1f on empty ones", full.BlocksReadPerOp, empty.BlocksReadPerOp)
	}
	return out
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
	at := ""
	if rep.Commit != "" {
		at = " at " + rep.Commit
	}
	fmt.Fprintf(&sb, "- command: `%s`%s (slices of %s after %s warm-up, %d rounds per level; pool = min(callers, %d); %.0fs in all)\n\n",
		rep.Command, at, rep.Slice, rep.SliceWarmup, rep.Rounds, rep.MaxConns, rep.Seconds)
	sb.WriteString("| system | workload | callers | ops/s | × floor (IQR) | p50 ms | p99 ms | added p99 ms | commits/op | WAL B/op | CPU µs/op client / server | note |\n")
	sb.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rep.Results {
		if r.Err != "" {
			fmt.Fprintf(&sb, "| %s | %s | %d | error | | | | | | | | %s |\n", r.System, r.Workload, r.Callers, cell(r.Err))
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
	rep.loneSection(&sb)
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
		sb.WriteString("\nPaired ratios: the median of the ratios of slices of the same round (of blocks of the same round, for the lone call), with their interquartile range (unstable: a spread over 20 % of the median):\n\n")
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
		sb.WriteString("\nTargets (issue 24): met when the whole interquartile range they rest on is on the target's side, not met when all of it is on the other, no verdict when it straddles the target or rests on fewer than three rounds. \"Out of reach\": what bounds the target in this run (the database's own commit, or the least a claim-before-call design does) misses it too.\n\n")
		sb.WriteString("| target | this run | met | bound in this run |\n|---|---|---|---|\n")
		for _, t := range rep.Targets {
			mark := "no"
			switch {
			case t.Undecided:
				mark = "no verdict (the IQR straddles the target, or rests on under 3 rounds)"
			case t.Met:
				mark = "yes"
			}
			bound := t.Bound
			if t.OutOfReach {
				mark += "; out of reach here"
			}
			if bound == "" {
				bound = "–"
			}
			fmt.Fprintf(&sb, "| %s | %s | %s | %s |\n", t.Name, t.Actual, mark, bound)
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
- A lone call: at one caller, retrysafe's first execution and commit + tool + commit (and the same two without the provider's HTTP round trip: retrysafe with the tool answered in process, and two single-row commits) also run interleaved in blocks of 16 calls, one workload's block after another's in a new order each cycle, 6 blocks of each per round (3 with --quick), 12 rounds (4); a block's first call is not recorded, since it pays for what the block before it left (retrysafe's completion leaves its WAL flush to the next commit, whichever workload's). Blocks milliseconds apart see the same machine, where slices a second long and seconds apart do not; the lone-call target rests on these blocks' per-round p50 ratio. The interleave then runs again with a pause before every call (--lone-pause, default 20 ms; one block of each workload per round): an agent's calls come after the model's turn, not back to back, and after a pause the machine's cores are idle and its caches cold; that ratio is reported beside the target, not judged.
- Targets: each rests on an interquartile range (of paired ratios, or of per-round p99s) and is met when all of it is on the target's side, not met when all of it is on the other side, and gets no verdict when it straddles the target. Where the run measured what bounds a target from outside retrysafe, the table gives it: a single-row commit's own p99 (a call that commits before its side effect adds at least one commit) and, at one caller, the naive handler's ratio to DBOS (a read, the tool and one durable commit: no claim-before-call design does less work there). "Out of reach" marks a target that its bound misses too.
- CPU per operation: floor / retrysafe first execution: the floor's CPU time per operation (this process's, getrusage, and its backends', /proc) over retrysafe's, slice by slice: the rate ratio a machine whose CPU runs out allows. Where the host's WAL flush is fast, the floor runs out of CPU before it waits for flushes and the rate ratio falls to this one; where the flush is slow the floor waits and group commit lets retrysafe pass it. The floor target rows say how many of the machine's cores the floor kept busy.
- retrysafe first execution, tool in process: the same Execute with a tool answered in this process (no HTTP round trip): the benchmark's provider is a local HTTP server on the same cores as the database, whose CPU counts against first executions and not against the floor, where a deployment's provider runs on other machines. Its ratio to the floor is what retrysafe's own work allows; the targets rest on the first execution with the HTTP tool.
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
	return writeResults(dir, "bench", rep.Date, md, rep, true)
}

// writeResults writes the Markdown and the JSON of a run to dir as
// PREFIX-STAMP.md and .json (and, when latest, as latest.md and .json)
// and returns the first two paths.
func writeResults(dir, prefix string, date time.Time, md string, v any, latest bool) ([]string, error) {
	d, err := resultsDir(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, err
	}
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	stamp := date.Format("20060102-150405")
	files := []struct {
		name string
		data []byte
	}{{prefix + "-" + stamp + ".md", []byte(md)}, {prefix + "-" + stamp + ".json", js}}
	if latest {
		files = append(files, files[0], files[1])
		files[2].name, files[3].name = "latest.md", "latest.json"
	}
	var paths []string
	for _, f := range files {
		p := filepath.Join(d, f.name)
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths[:2], nil
}
