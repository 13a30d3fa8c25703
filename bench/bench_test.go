package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestFlags(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.scaleRows != 1_000_000 || len(c.concurrency) != 4 || c.scaleCallers != 32 || c.rounds != 6 || c.slice != time.Second || c.scaleWarmup != 2*time.Minute || c.lonePause != 20*time.Millisecond {
		t.Fatalf("defaults: %+v", c)
	}
	q, err := parseFlags([]string{"--quick", "--slice", "2s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if q.slice != 2*time.Second || q.sliceWarmup != 100*time.Millisecond || q.scaleRows != 20_000 || len(q.concurrency) != 2 || q.scaleCallers != 8 || q.rounds != 3 || q.scaleWarmup != 0 {
		t.Fatalf("quick: %+v", q)
	}
	for _, bad := range [][]string{{"--concurrency", "0"}, {"--concurrency", "a"}, {"--only", "("}, {"extra"},
		{"--private-server", "shared_buffers"}, {"--private-server", "-", "--db", "postgres://x"}, {"--private-server", "-", "--scale-db", "kept"}, {"--scale-warmup", "-1s"}, {"--duration", "5s"}, {"--lone-pause", "-1ms"}, {"--lone-pause", "11s"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Fatalf("%v: no error", bad)
		}
	}
}

// --private-server reads its settings sorted, and - for none.
func TestPrivateServerFlag(t *testing.T) {
	c, err := parseFlags([]string{"--private-server", "shared_buffers=4GB, max_wal_size=16GB"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.privateServer, ","); got != "max_wal_size=16GB,shared_buffers=4GB" {
		t.Fatalf("settings %q", got)
	}
	if c, err = parseFlags([]string{"--private-server", "-"}, io.Discard); err != nil || c.privateServer == nil || len(c.privateServer) != 0 {
		t.Fatalf("-: %q %v", c.privateServer, err)
	}
	if c, err = parseFlags(nil, io.Discard); err != nil || c.privateServer != nil {
		t.Fatalf("unset: %q %v", c.privateServer, err)
	}
	// --private-server-env: repeatable, the value kept whole (GLIBC_TUNABLES
	// holds '=' and ':'), only with a private cluster.
	const tun = "GLIBC_TUNABLES=glibc.malloc.trim_threshold=67108864:glibc.malloc.mmap_threshold=8388608"
	c, err = parseFlags([]string{"--private-server", "-", "--private-server-env", tun, "--private-server-env", "A=1"}, io.Discard)
	if err != nil || strings.Join(c.privateServerEnv, " ") != tun+" A=1" {
		t.Fatalf("env: %q %v", c.privateServerEnv, err)
	}
	if _, err = parseFlags([]string{"--instructions", "--private-server-env", "A=1"}, io.Discard); err != nil {
		t.Fatalf("with --instructions: %v", err)
	}
	for _, bad := range [][]string{{"--private-server-env", "A=1"}, {"--private-server", "-", "--private-server-env", "=1"}, {"--private-server", "-", "--private-server-env", "A"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Fatalf("%v: no error", bad)
		}
	}
}

func TestPct(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if p := pct(ds, 0.5); p != 50 {
		t.Fatalf("p50 %v", p)
	}
	if p := pct(ds, 0.99); p != 99 {
		t.Fatalf("p99 %v", p)
	}
	if count(1_000_000) != "1M" || count(20_000) != "20k" || count(1234) != "1234" {
		t.Fatal("count")
	}
}

// TestTinyRun runs every benchmark for a fraction of a second against the
// server in $BENCH_DATABASE_URL / $TEST_DATABASE_URL (default: the local
// one), as ./scripts/bench --quick does at a smaller size, and checks the
// report.
func TestTinyRun(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL; -short skips it")
	}
	rep, cfg, _ := runOrFail(t, 5*time.Minute, "--quick", "--concurrency", "1,2",
		"--scale-rows", "2000", "--scale-callers", "2", "--rounds", "3", "--slice", "200ms",
		"--purge-rows", "2000", "--purge-settings", "20/10ms", "--purge-callers", "2", "--purge-rounds", "3")
	ctx := t.Context()
	want := map[string]bool{}
	for _, r := range rep.Results {
		want[r.System+"/"+r.Workload] = true
		if r.Rate <= 0 || r.Ratio <= 0 || r.P99 < r.P50 {
			t.Errorf("%s/%s at %d: %+v", r.System, r.Workload, r.Callers, r)
		}
		if !readMachineTicks().unknown && (r.StealPct == nil || *r.StealPct < 0 || *r.StealPct > 100) {
			t.Errorf("%s/%s at %d: steal %v", r.System, r.Workload, r.Callers, r.StealPct)
		}
	}
	for _, w := range []string{"floor/single-row commit", "floor/commit + tool + commit", "retrysafe/first execution",
		"retrysafe/replay", "retrysafe/" + cobName, "retrysafe/" + loneNoToolName, "dbos/first execution", "dbos/replay (re-run)", "naive/first execution",
		"retrysafe/first execution, 0 rows", "retrysafe/first execution, 2k rows",
		"retrysafe/first execution while purging (batch 20, pause 10ms)", "retrysafe/first execution, purge held (batch 20, pause 10ms)"} {
		if !want[w] {
			t.Errorf("no result for %s", w)
		}
	}
	if r := rep.find("retrysafe", "first execution", 2); r == nil || r.Rounds != 3 || r.RatioQ3 <= 0 || r.ClientCPUPerOp <= 0 || r.ServerCPUPerOp <= 0 {
		t.Errorf("first execution at 2 callers: %+v, want 3 slices pooled, a paired ratio and CPU per operation", r)
	}
	if p, ok := rep.findPair("retrysafe first execution / floor", 2); !ok || len(p.Ratios) != 3 {
		t.Errorf("paired ratio of first executions to the floor at 2 callers: %+v", p)
	}
	for _, name := range []string{cpuPairName, inProcPairName, cpuInProcPairName} {
		if p, ok := rep.findPair(name, 2); !ok || len(p.Ratios) != 3 || p.Median <= 0 {
			t.Errorf("%s at 2 callers: %+v", name, p)
		}
	}
	if p, ok := rep.findPair("retrysafe first execution, pix.cob / floor", 2); !ok || len(p.Ratios) != 3 || p.Median <= 0 {
		t.Errorf("paired ratio of pix.cob first executions to the floor at 2 callers: %+v", p)
	}
	if l := rep.Lone; l == nil || l.Err != "" || len(l.Rows) != 4 {
		t.Errorf("lone call: %+v", rep.Lone)
	} else {
		for _, r := range l.Rows {
			if r.Ops != l.Rounds*l.Cycles*(loneBlock-1) || r.P50 <= 0 || r.P99 < r.P50 {
				t.Errorf("lone call row %+v: want %d calls", r, l.Rounds*l.Cycles*(loneBlock-1))
			}
			if (r.Workload != floorTwoName) != (r.Around != nil && r.Around.BeforeP50 > 0) {
				t.Errorf("lone call row %s: split %+v", r.Workload, r.Around)
			}
		}
	}
	if l := rep.Lone; l != nil && (l.PauseMS != 20 || l.PausedCycles != lonePausedCycles || len(l.Paused) != 4) {
		t.Errorf("lone call after a pause: %+v", l)
	} else if l != nil {
		for _, r := range l.Paused {
			if r.Ops != l.Rounds*l.PausedCycles*(loneBlock-1) || r.P50 <= 0 || r.P99 < r.P50 {
				t.Errorf("lone call row after a pause %+v: want %d calls", r, l.Rounds*l.PausedCycles*(loneBlock-1))
			}
		}
	}
	for _, name := range []string{lonePairName, loneNoToolPairName, lonePausedPairName, lonePausedNoToolPairName} {
		if p, ok := rep.findPair(name, 1); !ok || len(p.Ratios) != 4 || p.Median <= 0 {
			t.Errorf("%s: %+v", name, p)
		}
	}
	for _, r := range rep.Races {
		if r.System == "retrysafe" && (r.ExtraCalls != 0 || r.ExtraRows != 0) {
			t.Errorf("retrysafe duplicated under a race: %+v", r)
		}
	}
	if sc := rep.Scale; sc == nil || sc.Pair == nil || len(sc.Pair.Ratios) != 3 || sc.Sizes == nil || sc.Sizes.Intents < 2000 ||
		sc.LiveSizes == nil || sc.LiveSizes.Intents == 0 || len(sc.Purges) != 1 {
		t.Errorf("scale: %+v", rep.Scale)
	} else if p := sc.Purges[0]; p.Actions != 2000 || p.Intents != 2000 || p.Rounds < 1 || p.Deleting < 100 || p.ActiveSeconds < 1 || p.WithP99 <= 0 {
		t.Errorf("purge under load: %+v", p)
	}
	for _, w := range [][2]string{{"retrysafe", "first execution"}, {"retrysafe", cobName}, {"floor", floorToolName}, {"dbos", "first execution"}, {"naive", "first execution"}} {
		if r := rep.find(w[0], w[1], 2); r == nil || r.Around == nil || r.Around.ToolP50 <= 0 {
			t.Errorf("%s/%s: no split around the tool call: %+v", w[0], w[1], r)
		}
	}
	// Statements are recorded only when the server has pg_stat_statements
	// loaded (CI's does not; ./scripts/bench's README section says how).
	if on, err := (&server{url: cfg.dbURL}).pgssAvailable(ctx); err != nil {
		t.Fatal(err)
	} else if r := rep.find("retrysafe", "first execution", 2); on && (r == nil || r.Statements == nil || r.Statements.execMsPerOp() <= 0) {
		t.Errorf("pg_stat_statements is loaded, but first execution has no statements: %+v", r)
	}
	for _, w := range [][2]string{{"retrysafe", "replay"}, {"floor", floorName}} {
		if r := rep.find(w[0], w[1], 2); r == nil || r.Around != nil {
			t.Errorf("%s/%s never calls the tool, yet: %+v", w[0], w[1], r)
		}
	}
	md := rep.markdown()
	for _, s := range []string{"| floor | single-row commit | 1 |", "| retrysafe | replay | 2 |", "Targets (issue 24)", "× floor", "Paired ratios",
		"Latency around the tool call", "| retrysafe | first execution | 2 |", "| retrysafe first execution, pix.cob / floor | 2 |",
		"Scale: 2,000 intents", "| actions | `actions_pkey` |", "Purges of the expired rows", "| 20 | 10ms | 2 | 2,000 + 2,000 |",
		"2k-row first executions within 10% of empty at 2 callers", "A lone call, interleaved", "| retrysafe | first execution, tool in process |", "The same after a pause of 20 ms before every call", "p99 added latency < 3 ms at 2 callers while purging (batch 20, pause 10ms)"} {
		if !strings.Contains(md, s) {
			t.Errorf("markdown lacks %q:\n%s", s, md)
		}
	}
	dir := t.TempDir()
	paths, err := rep.write(dir, md)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "latest.json"))
	if err != nil || len(paths) != 2 {
		t.Fatal(paths, err)
	}
	var back report
	if err := json.Unmarshal(raw, &back); err != nil || len(back.Results) != len(rep.Results) {
		t.Fatalf("json: %v", err)
	}
}

// The scale targets rest on the paired ratio of the preloaded tables to the
// empty ones, and on each purge's p99 while it ran.
// A floor target says what the minimal claim-before-call shape reaches in
// the same run, the bound a runtime cannot pass with the same tool.
func TestFloorTargetsNameTheMinimalShape(t *testing.T) {
	rep := &report{
		Machine: machine{Cores: 2},
		Pairs: []pairStat{newPair("retrysafe first execution / floor", 32, []float64{0.40, 0.41, 0.42, 0.39}),
			newPair(cpuPairName, 32, []float64{0.38, 0.40, 0.39, 0.41}),
			newPair(inProcPairName, 32, []float64{0.55, 0.56, 0.57, 0.58}), newPair(cpuInProcPairName, 32, []float64{0.54, 0.55, 0.56})},
		Results: []*result{{System: "floor", Workload: floorToolName, Callers: 32, Ratio: 0.37},
			{System: "floor", Workload: floorName, Callers: 32, Rate: 10000, ClientCPUPerOp: 40, ServerCPUPerOp: 90},
			{System: "retrysafe", Workload: firstName, Callers: 32, ClientCPUPerOp: 160},
			{System: "retrysafe", Workload: loneNoToolName, Callers: 32, ClientCPUPerOp: 70}},
	}
	rep.checkTargets()
	if len(rep.Targets) != 1 || rep.Targets[0].Met || rep.Targets[0].Undecided || rep.Targets[0].OutOfReach {
		t.Fatalf("targets: %+v", rep.Targets)
	}
	for _, want := range []string{"commit + tool + commit reaches 0.37 of the floor here",
		"on a machine whose CPU runs out retrysafe's CPU per execution allows 0.40 (IQR 0.39–0.40, 4 rounds)",
		"the floor kept about 1.3 of 2 cores busy",
		"with the tool answered in process (no HTTP provider on these cores) retrysafe reaches 0.56 (IQR 0.56–0.57, 4 rounds), its CPU allows 0.55 " +
			"(the provider's HTTP exchange, both ends in this process, took about 90 of the client's 160 µs of CPU per execution)"} {
		if !strings.Contains(rep.Targets[0].Bound, want) {
			t.Errorf("bound %q lacks %q", rep.Targets[0].Bound, want)
		}
	}
}

// With --keep-pools every workload of a level opens its pools once: the
// level's rows are still one per workload, and each workload's pools are
// closed by the level's end (its database can be dropped).
func TestKeepPools(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL; -short skips it")
	}
	rep, _, log := runOrFail(t, 2*time.Minute, "--quick", "--keep-pools", "--concurrency", "2", "--skip-scale", "--skip-dbos",
		"--rounds", "3", "--slice", "150ms", "--only", "retrysafe/first execution$")
	r := rep.find("retrysafe", firstName, 2)
	if r == nil || r.Rounds != 3 || r.ServerCPUPerOp <= 0 {
		t.Fatalf("first execution on kept pools: %+v\n%s", r, log)
	}
	if p, ok := rep.findPair(cpuPairName, 2); !ok || len(p.Ratios) != 3 {
		t.Errorf("CPU pair on kept pools: %+v", p)
	}
}

// A target is decided by where the interquartile range it rests on lies:
// wholly on its side (however wide), wholly on the other, or across it.
func TestVerdictsFromTheIQR(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		q1, q3, min  float64
		rounds       int
		met, decided bool
	}{
		{3.08, 4.76, 1, 6, true, true},      // a 39 % spread, all of it above: met
		{0.58, 0.86, 0.60, 6, false, false}, // across the target
		{0.35, 0.42, 0.50, 6, false, true},  // all of it below
		{0.60, 0.61, 0.60, 6, true, true},
		{0.61, 0.70, 0.60, 2, false, false}, // too few rounds
	} {
		if d := atLeast(c.q1, c.q3, c.min, c.rounds); d.met != c.met || d.decided != c.decided {
			t.Errorf("atLeast(%v, %v, %v, %d) = %+v", c.q1, c.q3, c.min, c.rounds, d)
		}
	}
	if d := atMost(0.92, 1.24, 1.25, 6); !d.met || !d.decided {
		t.Errorf("a range under 1.25: %+v", d)
	}
	if d := atMost(1.11, 1.29, 1.25, 6); d.decided {
		t.Errorf("a range across 1.25: %+v", d)
	}
	if d := below(3.0, 4.1, 3, 6); d.met || !d.decided {
		t.Errorf("p99s from 3 ms up: %+v", d)
	}
	if d := all([]decision{{true, true}, {false, false}}); d.decided {
		t.Errorf("one level undecided: %+v", d)
	}
	if d := all([]decision{{true, true}, {false, false}, {false, true}}); !d.decided || d.met {
		t.Errorf("one level missed: %+v", d)
	}

	pair := func(name string, callers int, rs ...float64) pairStat { return newPair(name, callers, rs) }
	rep := &report{
		Pairs: []pairStat{
			pair("retrysafe replay / floor", 1, 3.0, 4.3, 4.8, 5.0, 3.1, 4.9),
			pair("retrysafe replay / floor", 8, 2.9, 3.3, 3.9, 3.0, 3.5, 2.9),
			pair("retrysafe first execution / DBOS first execution", 1, 2.8, 2.8, 2.9, 2.7),
			pair("retrysafe first execution / DBOS first execution", 8, 4.4, 4.6, 4.2, 4.5),
			pair("naive first execution / DBOS first execution", 1, 3.6, 3.7, 3.5, 3.6),
			pair(lonePairName, 1, 1.10, 1.12, 1.15, 1.11, 1.13),
			pair("p50 latency: retrysafe first execution / commit + tool + commit", 1, 0.9, 1.3, 1.2, 1.4),
		},
		Results: []*result{
			{System: "retrysafe", Workload: "first execution", Callers: 8, AddedP99: 9.0, AddedP99Q1: 8.1, AddedP99Q3: 10.2, Rounds: 6},
			{System: "floor", Workload: floorName, Callers: 8, P99: 4.8},
		},
	}
	rep.checkTargets()
	got := map[string]target{}
	for _, tg := range rep.Targets {
		got[tg.Name] = tg
	}
	if tg := got["replays >= 1.0 x floor at every level"]; !tg.Met || tg.Undecided {
		t.Errorf("replays, every quartile above 1: %+v", tg)
	}
	if tg := got["first executions >= 5 x DBOS at every level"]; tg.Met || tg.Undecided || !tg.OutOfReach || !strings.Contains(tg.Bound, "1: naive reaches 3.60x") {
		t.Errorf("DBOS, naive's own ratio under 5 at one caller: %+v", tg)
	}
	if tg := got["a lone call's p50 <= 1.25 x commit + tool + commit's"]; !tg.Met || !strings.HasPrefix(tg.Actual, lonePairName) {
		t.Errorf("the lone call rests on the interleave: %+v", tg)
	}
	if tg := got["p99 added latency < 3 ms at 8 callers"]; tg.Met || tg.Undecided || !tg.OutOfReach || !strings.Contains(tg.Bound, "4.80 ms") {
		t.Errorf("p99 over a single commit's: %+v", tg)
	}
	if tg := got["a lone call's p50 <= 1.25 x commit + tool + commit's"]; tg.Bound != "" {
		t.Errorf("a split without the interleave's rows: %q", tg.Bound)
	}
}

// The lone-call target's row says, part by part, where retrysafe's time
// went against commit + tool + commit's, and what is left without the
// provider's HTTP exchange.
func TestLoneTargetSplitsTheCall(t *testing.T) {
	rep := &report{
		Pairs: []pairStat{
			newPair(lonePairName, 1, []float64{1.27, 1.31, 1.29, 1.30}),
			newPair(loneNoToolPairName, 1, []float64{1.20, 1.22, 1.26, 1.24}),
			newPair(lonePausedPairName, 1, []float64{1.18, 1.21, 1.19, 1.22}),
		},
		Lone: &loneResult{Rounds: 4, Cycles: 6, Block: loneBlock, Rows: []loneRow{
			{System: "floor", Workload: floorToolName, Ops: 90, P50: 0.637, Around: &around{BeforeP50: 0.233, ToolP50: 0.117, AfterP50: 0.277}},
			{System: "retrysafe", Workload: firstName, Ops: 90, P50: 0.838, Around: &around{BeforeP50: 0.442, ToolP50: 0.151, AfterP50: 0.229}},
			{System: "floor", Workload: floorTwoName, Ops: 90, P50: 0.435},
			{System: "retrysafe", Workload: loneNoToolName, Ops: 90, P50: 0.533, Around: &around{BeforeP50: 0.365, AfterP50: 0.165}},
		}, PauseMS: 20, PausedCycles: 1, Paused: []loneRow{
			{System: "floor", Workload: floorToolName, Ops: 60, P50: 1.201},
			{System: "retrysafe", Workload: firstName, Ops: 60, P50: 1.432},
		}},
	}
	rep.checkTargets()
	var tg *target
	for i := range rep.Targets {
		if strings.HasPrefix(rep.Targets[i].Name, "a lone call's p50") {
			tg = &rep.Targets[i]
		}
	}
	if tg == nil {
		t.Fatal("no lone-call target")
	}
	for _, want := range []string{
		"the claim took 0.209 ms more than commit + tool + commit's first commit",
		"the tool call 0.034 ms more",
		"the completion 0.048 ms less than its second commit",
		"with the tool in process (no HTTP provider on these cores), retrysafe / two single-row commits 1.23x (IQR 1.21",
		"; after a 20 ms pause before every call, retrysafe / commit + tool + commit 1.20x (IQR 1.19",
		"(p50 1.432 ms against 0.838 back to back)",
	} {
		if !strings.Contains(tg.Bound, want) {
			t.Errorf("bound %q lacks %q", tg.Bound, want)
		}
	}
	if tg.Met || tg.Undecided {
		t.Errorf("1.27 to 1.31 met 1.25: %+v", tg)
	}

	// A failed interleave, or one without commit + tool + commit's split,
	// gives no split.
	for _, l := range []*loneResult{{Err: "boom"}, {Rows: rep.Lone.Rows[1:]}} {
		rep.Lone = l
		rep.checkTargets()
		for _, tg := range rep.Targets {
			if strings.HasPrefix(tg.Name, "a lone call's p50") && tg.Bound != "" {
				t.Errorf("split from %+v: %q", l, tg.Bound)
			}
		}
	}
}

// The scale target names the server's shared buffers when the preloaded
// side's key indexes do not fit in them, with both sides' reads, and says
// nothing of them when they fit or the setting is unknown.
func TestScaleTargetNamesSharedBuffers(t *testing.T) {
	pair := newPair("x", 32, []float64{0.80, 0.82, 0.86, 0.90})
	sizes := &ledgerSizes{Intents: 1_000_000, Rels: []relSize{
		{Table: "intents", Name: "intents", Kind: "heap", Bytes: 237 << 20},
		{Table: "intents", Name: "intents_pkey", Kind: "index", Bytes: 85 << 20},
		{Table: "intents", Name: "intents_idem_key_tenant_id_key", Kind: "index", Bytes: 118 << 20},
		{Table: "actions", Name: "actions_pkey", Kind: "index", Bytes: 184 << 20},
		{Table: "actions", Name: "actions_started_lease_idx", Kind: "index", Bytes: 900 << 20}, // not a key index
	}}
	var ck *checkpointRoom
	bound := func(sharedBuffers string, sz *ledgerSizes) string {
		rep := &report{
			Machine: machine{Postgres: map[string]string{"shared_buffers": sharedBuffers}},
			Scale:   &scaleResult{Rows: 1_000_000, Callers: 32, Pair: &pair, Sizes: sz, Checkpoint: ck},
			Results: []*result{{System: "retrysafe", Workload: scaleName(1_000_000), Callers: 32, BlocksReadPerOp: 1.5, FPIPerOp: 0.66},
				{System: "retrysafe", Workload: scaleName(0), Callers: 32, BlocksReadPerOp: 0.3, FPIPerOp: 0.04}},
		}
		rep.checkTargets()
		if len(rep.Targets) != 1 {
			t.Fatalf("targets: %+v", rep.Targets)
		}
		return rep.Targets[0].Bound
	}
	want := "the preloaded side's key indexes (387 MB) are 3.0 times shared_buffers (128 MB): " +
		"blocks read from outside them per execution 1.5 on the preloaded tables, 0.3 on empty ones"
	if got := bound("128MB", sizes); got != want {
		t.Errorf("128MB: bound %q, want %q", got, want)
	}
	if got := bound("131072kB", sizes); got != want {
		t.Errorf("131072kB: bound %q, want %q", got, want)
	}
	for _, sb := range []string{"1GB", "", "16384", "0MB"} {
		if got := bound(sb, sizes); got != "" {
			t.Errorf("shared_buffers %q: bound %q, want none", sb, got)
		}
	}
	if got := bound("128MB", &ledgerSizes{Intents: 1, Rels: sizes.Rels[:3]}); got != "" {
		t.Errorf("without actions_pkey's size: bound %q, want none", got)
	}
	// Beside a checkpoint in the rounds, both bounds, the checkpoint's first.
	ck = &checkpointRoom{InRounds: 1}
	both := "1 checkpoint(s) began during the rounds: full-page images per execution 0.66 on the preloaded tables, 0.04 on empty ones; " + want
	if got := bound("128MB", sizes); got != both {
		t.Errorf("with a checkpoint: bound %q, want %q", got, both)
	}
	if got, want := bound("1GB", sizes), both[:strings.Index(both, "; ")]; got != want {
		t.Errorf("with a checkpoint, the indexes fitting: bound %q, want %q", got, want)
	}
}

func TestPGBytes(t *testing.T) {
	for in, want := range map[string]int64{"128MB": 128 << 20, "16384kB": 16 << 20, "4GB": 4 << 30, "1TB": 1 << 40, "8192B": 8192} {
		if got, ok := pgBytes(in); !ok || got != want {
			t.Errorf("pgBytes(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "MB", "16384", "128 MB", "128mb", "-1MB", "1.5GB", "9999999999999TB"} {
		if got, ok := pgBytes(in); ok {
			t.Errorf("pgBytes(%q) = %d, read; want refused", in, got)
		}
	}
}

// FuzzPGBytes: whatever the setting's text, pgBytes does not panic, and a
// value it reads is not negative (no overflow) and is a whole number of
// its unit.
func FuzzPGBytes(f *testing.F) {
	for _, s := range []string{"128MB", "16384kB", "4GB", "9223372036854775807B", "8589934592GB", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := pgBytes(s)
		if !ok {
			return
		}
		if n < 0 {
			t.Fatalf("pgBytes(%q) = %d", s, n)
		}
		unit := s[strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }):]
		if again, ok := pgBytes(fmt.Sprint(n) + "B"); !ok || again != n || unit == "" {
			t.Fatalf("pgBytes(%q) = %d, not %d bytes again", s, n, n)
		}
	})
}

func TestScaleTargets(t *testing.T) {
	pair := newPair("x", 32, []float64{0.88, 0.91, 0.92, 0.93})
	rep := &report{Scale: &scaleResult{Rows: 10_000_000, Callers: 32, Pair: &pair, Purges: []*purgeRun{
		{Batch: 1000, Callers: 8, Rounds: 6, WithP99: 3.4, WithoutP99: 2.5, WithQ1: 3.1, WithQ3: 3.7},
		{Batch: 200, PauseMs: 5, Callers: 8, Rounds: 6, WithP99: 2.9, WithoutP99: 2.5, WithQ1: 2.6, WithQ3: 2.95},
		{Batch: 100, PauseMs: 20, Callers: 8, Rounds: 2, WithP99: 2.0, WithoutP99: 2.0, WithQ1: 1.9, WithQ3: 2.1},
	}}}
	rep.checkTargets()
	want := map[string]bool{
		"10M-row first executions within 10% of empty at 32 callers":                  true,
		"p99 added latency < 3 ms at 8 callers while purging (batch 1000, pause 0s)":  false,
		"p99 added latency < 3 ms at 8 callers while purging (batch 200, pause 5ms)":  true,
		"p99 added latency < 3 ms at 8 callers while purging (batch 100, pause 20ms)": false, // two rounds: no verdict
	}
	for _, tg := range rep.Targets {
		met, ok := want[tg.Name]
		if !ok {
			t.Errorf("unexpected target %+v", tg)
			continue
		}
		delete(want, tg.Name)
		if tg.Met != met {
			t.Errorf("%s: met %v, want %v (%s)", tg.Name, tg.Met, met, tg.Actual)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing targets: %v", want)
	}
}

func TestPurgeSettings(t *testing.T) {
	got, err := parsePurgeSettings("1000/0, 500/5ms,200")
	if err != nil || len(got) != 3 || got[0] != (purgeSetting{Batch: 1000}) || got[1] != (purgeSetting{500, 5 * time.Millisecond}) || got[2] != (purgeSetting{Batch: 200}) {
		t.Fatalf("%v %v", got, err)
	}
	if none, err := parsePurgeSettings("none"); err != nil || len(none) != 0 {
		t.Fatalf("none: %v %v", none, err)
	}
	for _, bad := range []string{"", "0/1ms", "x", "100/-1ms", "100/abc"} {
		if _, err := parsePurgeSettings(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := parseFlags([]string{"--scale-drop"}, io.Discard); err == nil {
		t.Error("--scale-drop without --scale-db: no error")
	}
	if _, err := parseFlags([]string{"--scale-rows", "100", "--purge-rows", "200"}, io.Discard); err == nil {
		t.Error("--purge-rows over --scale-rows: no error")
	}
}

// Pooled rounds: the rate over the summed windows, percentiles over all
// latencies, per-operation counters weighted by operations.
func TestQuartilesAndPairs(t *testing.T) {
	q1, med, q3 := quartiles([]float64{5, 1, 3, 2, 4})
	if q1 != 2 || med != 3 || q3 != 4 {
		t.Fatalf("quartiles: %v %v %v", q1, med, q3)
	}
	if p := newPair("x", 8, []float64{0.60, 0.61, 0.62, 0.63}); !p.Stable || p.Median != 0.615 {
		t.Fatalf("tight pair: %+v", p)
	}
	if p := newPair("x", 8, []float64{0.3, 0.6, 0.9, 1.2}); p.Stable {
		t.Fatalf("a spread of %.0f %% passed as stable: %+v", 100*p.spread(), p)
	}
	if p := newPair("x", 8, []float64{0.6, 0.6}); p.Stable {
		t.Fatal("two rounds are too few for a verdict")
	}
	num := &slot{rates: []float64{50, 60, 70}, p50s: []float64{2, 2, 2}}
	den := &slot{rates: []float64{100, 100, 0}, p50s: []float64{1, 4, 2}}
	if got := ratios(num, den, false); len(got) != 2 || got[0] != 0.5 || got[1] != 0.6 {
		t.Fatalf("rate ratios: %v", got)
	}
	if got := ratios(num, den, true); len(got) != 3 || got[0] != 2 || got[1] != 0.5 {
		t.Fatalf("latency ratios: %v", got)
	}
	// Every round has its own order, and each holds every workload once.
	seen := map[string]bool{}
	for r := range 6 {
		o := roundOrder(5, r, 42)
		sorted := slices.Clone(o)
		slices.Sort(sorted)
		if !slices.Equal(sorted, []int{0, 1, 2, 3, 4}) {
			t.Fatalf("round %d: %v", r, o)
		}
		seen[fmt.Sprint(o)] = true
	}
	if len(seen) < 3 {
		t.Fatalf("6 rounds had %d orders", len(seen))
	}
	// Two alternate, whichever the seed puts first.
	for _, seed := range []uint64{42, 43} {
		var firsts []int
		for r := range 6 {
			firsts = append(firsts, roundOrder(2, r, seed)[0])
		}
		if a := firsts[0]; !slices.Equal(firsts, []int{a, 1 - a, a, 1 - a, a, 1 - a}) {
			t.Errorf("seed %d: first of each round %v, want them alternating", seed, firsts)
		}
	}
}

func TestSelfCPUAdvances(t *testing.T) {
	c0 := selfCPU()
	for x := 0; selfCPU()-c0 < 10*time.Millisecond; x++ {
		_ = fmt.Sprint(x)
	}
	if _, ok := cpuOf([]int{os.Getpid()}); !ok {
		t.Fatal("cannot read this process's CPU time from /proc")
	}
}

// procOf reads what it reads of the right fields: a process that touches
// new memory takes minor faults, its system time is a part of its CPU
// time, and a pid that is gone makes the whole set unknown.
func TestProcOf(t *testing.T) {
	p0, ok := procOf([]int{os.Getpid()})
	if !ok {
		t.Fatal("cannot read this process from /proc")
	}
	// 64 MiB of pages this process has never touched (a new mapping, not
	// the Go heap, which reuses pages): a fault per page at least every
	// 2 MiB, whatever transparent huge pages do.
	buf, err := syscall.Mmap(-1, 0, 64<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(buf)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	c0 := selfCPU()
	for x := 0; selfCPU()-c0 < 20*time.Millisecond; x++ {
		_ = fmt.Sprint(x)
	}
	p1, ok := procOf([]int{os.Getpid()})
	if !ok {
		t.Fatal("cannot read this process from /proc")
	}
	d := p1.sub(p0)
	if d.minflt < 32 || d.cpu <= 0 || d.sys < 0 || d.sys > d.cpu || p1.sys > p1.cpu {
		t.Fatalf("%+v", d)
	}
	if got := p0.add(d); got != p1 {
		t.Fatalf("add: %+v, want %+v", got, p1)
	}
	if _, ok := procOf([]int{os.Getpid(), 1 << 30}); ok {
		t.Fatal("a pid that does not exist was read")
	}
	if _, ok := procOf(nil); ok {
		t.Fatal("no pids read as known")
	}
}

// The machine's ticks come from /proc/stat's aggregate line: steal is its
// eighth figure, the total the first eight (guest time is inside user).
func TestMachineTicks(t *testing.T) {
	t.Parallel()
	const stat = "cpu  100 5 40 800 10 1 2 42 7 0\ncpu0 50 2 20 400 5 0 1 21 3 0\n"
	m := parseMachineTicks(stat)
	if m.unknown || m.total != 1000 || m.steal != 42 {
		t.Fatalf("%+v", m)
	}
	later := parseMachineTicks("cpu  200 5 40 1700 10 1 2 142 7 0\n")
	d := later.since(m)
	if d.unknown || d.total != 1100 || d.steal != 100 {
		t.Fatalf("since: %+v", d)
	}
	if p := d.stealPct(); p < 9.09 || p > 9.10 {
		t.Fatalf("steal %v %%", p)
	}
	if sum := d.add(d); sum.unknown || sum.total != 2200 || sum.steal != 200 {
		t.Fatalf("add: %+v", sum)
	}
	if sum := (machineTicks{}).add(d); sum != d {
		t.Fatalf("the zero interval plus %+v: %+v", d, sum)
	}
	for _, bad := range []string{"", "intr 1 2 3\n", "cpu 1 2 3\n", "cpu a 2 3 4 5 6 7 8\n", "cpu -1 2 3 4 5 6 7 8\n"} {
		if !parseMachineTicks(bad).unknown {
			t.Errorf("%q parsed", bad)
		}
	}
	unread := machineTicks{unknown: true}
	if !m.since(later).unknown || !unread.since(m).unknown || !later.since(unread).unknown ||
		!d.add(unread).unknown || unread.stealPct() != -1 || (machineTicks{}).stealPct() != -1 {
		t.Error("an interval backwards, from an unread stat or empty is known")
	}
	if !strings.Contains(legend, fmt.Sprintf("saw %d %% or more", stealNoted)) {
		t.Error("the legend does not give stealNoted")
	}
	if readMachineTicks().unknown {
		t.Log("no /proc/stat here")
	}
}

// A stall that outlasts the window at one caller still yields a rate: the
// window stays open until an operation that started in it completes. The
// stall here ends with the window: the second operation (the first one the
// window can count) is held until the window function is returning.
func TestMeasureWindowOutlastedByStall(t *testing.T) {
	t.Parallel()
	windowDone := make(chan struct{})
	started := make(chan struct{})
	op := func(ctx context.Context, _ int, i int64) (toolSpan, error) {
		switch i {
		case 0:
			<-started // the window opens while operation 0 runs
		case 1:
			<-windowDone
		}
		return toolSpan{}, nil
	}
	s := measureWhile(context.Background(), 1, 0, op, func() error {
		close(started)
		close(windowDone)
		return nil
	})
	if s.Err != nil {
		t.Fatal(s.Err)
	}
	if s.Ops < 1 || s.Extended < 0 || s.Extended > s.Elapsed {
		t.Fatalf("ops %d, extended %v of %v", s.Ops, s.Extended, s.Elapsed)
	}
}

// measure splits each operation that calls the tool at the call: the three
// parts add up to its latency, added latency leaves the call out, and
// operations that do not call it are not split.
func TestMeasureSplitsAroundTool(t *testing.T) {
	op := func(ctx context.Context, _ int, i int64) (toolSpan, error) {
		time.Sleep(2 * time.Millisecond)
		if i%2 == 1 {
			return toolSpan{}, nil
		}
		t0 := time.Now()
		time.Sleep(3 * time.Millisecond)
		tool := span(t0)
		time.Sleep(time.Millisecond)
		return tool, nil
	}
	s := measure(context.Background(), 1, 20*time.Millisecond, 300*time.Millisecond, op)
	if s.Err != nil {
		t.Fatal(s.Err)
	}
	if len(s.Before) == 0 || len(s.Before) == len(s.Lat) || len(s.Tool) != len(s.Before) || len(s.After) != len(s.Before) {
		t.Fatalf("%d ops, %d split", len(s.Lat), len(s.Before))
	}
	// One caller: the split operations are every other one, in order.
	j := 0
	for i, d := range s.Lat {
		if d-s.Added[i] == 0 {
			continue // did not call the tool
		}
		if s.Tool[j] != d-s.Added[i] || s.Before[j]+s.Tool[j]+s.After[j] != d {
			t.Fatalf("op %d: %v = %v + %v + %v? added %v", i, d, s.Before[j], s.Tool[j], s.After[j], s.Added[i])
		}
		if s.Before[j] < 2*time.Millisecond || s.Tool[j] < 3*time.Millisecond || s.After[j] < time.Millisecond {
			t.Fatalf("op %d: before %v, tool %v, after %v", i, s.Before[j], s.Tool[j], s.After[j])
		}
		j++
	}
	if j != len(s.Before) {
		t.Fatalf("matched %d of %d splits", j, len(s.Before))
	}
	var r result
	r.fill(s)
	if r.Around == nil || r.Around.ToolP50 < 3 || r.Around.BeforeP50 < 2 || r.Around.AfterP50 < 1 {
		t.Fatalf("around: %+v", r.Around)
	}
}

// Rounds' statements merge by query text, the largest total first, and the
// table gives them per operation.
func TestStatementsSince(t *testing.T) {
	before := map[string]stmtStat{
		"claim":    {Query: "claim", Calls: 50, TotalMs: 10, Rows: 50},
		"complete": {Query: "complete", Calls: 50, TotalMs: 5, Rows: 50},
		"idle":     {Query: "idle", Calls: 7, TotalMs: 3},
	}
	now := map[string]stmtStat{
		"claim":    {Query: "claim", Calls: 150, TotalMs: 30, PlanMs: 8, Rows: 150},
		"complete": {Query: "complete", Calls: 450, TotalMs: 105, Rows: 450},
		"idle":     {Query: "idle", Calls: 7, TotalMs: 3},
		"plans":    {Query: "plans", Calls: 300, TotalMs: 1},
	}
	p := statementsSince(before, now, 400)
	if p.Ops != 400 || len(p.Stmts) != 3 || p.Stmts[0] != (stmtStat{Query: "complete", Calls: 400, TotalMs: 100, Rows: 400}) ||
		p.Stmts[1].Query != "claim" || p.Stmts[2].Query != "plans" {
		t.Fatalf("since: %+v", p)
	}
	if got := p.execMsPerOp(); got != 121.0/400 {
		t.Fatalf("exec ms/op %v", got)
	}
	if got := p.planMsPerOp(); got != 8.0/400 {
		t.Fatalf("plan ms/op %v", got)
	}
	if empty := statementsSince(now, now, 10); len(empty.Stmts) != 0 {
		t.Fatalf("statements that did not run again: %+v", empty)
	}
	a := &result{System: "retrysafe", Workload: "first execution", Callers: 8, Statements: p}
	p.Stmts[1].Query = "WITH ins AS (\n\tINSERT"
	var sb strings.Builder
	(&report{Results: []*result{a}}).statementsTable(&sb)
	if !strings.Contains(sb.String(), "| retrysafe | first execution | 8 | 0.302 | 0.020 |") || !strings.Contains(sb.String(), "`complete` | 1.00 | 0.250 | 1.0 |") ||
		!strings.Contains(sb.String(), "`WITH ins AS ( INSERT` |") {
		t.Fatalf("table:\n%s", sb.String())
	}
}

// --keep-pools is refused before anything runs when the server cannot hold
// a level's pools at once, and says what to change.
func TestKeepPoolsNeedsConnections(t *testing.T) {
	cfg, err := parseFlags([]string{"--keep-pools", "--concurrency", "1,32", "--skip-dbos"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b := &bench{cfg: cfg}
	n := len(b.levelWorkloads())
	need := n*33 + keepPoolsSpare
	if err := b.checkKeepPools(map[string]string{"max_connections": strconv.Itoa(need - 1)}); err == nil ||
		!strings.Contains(err.Error(), fmt.Sprintf("needs about %d connections", need)) || !strings.Contains(err.Error(), "max_connections=") {
		t.Errorf("%d allowed: %v", need-1, err)
	}
	if err := b.checkKeepPools(map[string]string{"max_connections": strconv.Itoa(need)}); err != nil {
		t.Errorf("%d allowed: %v", need, err)
	}
	b.cfg.keepPools = false
	if err := b.checkKeepPools(map[string]string{"max_connections": "1"}); err != nil {
		t.Errorf("without --keep-pools: %v", err)
	}
}

// runOrFail runs the benchmark with args (within timeout) and fails the
// test, with the run's log, when it errs or any point failed.
func runOrFail(t *testing.T, timeout time.Duration, args ...string) (*report, config, string) {
	t.Helper()
	cfg, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	rep, err := run(ctx, cfg, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if n := rep.failures(); n > 0 {
		t.Fatalf("%d points failed:\n%s", n, log.String())
	}
	return rep, cfg, log.String()
}
