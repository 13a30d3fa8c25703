package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// --combine reads the reports written by runs and puts each run's own
// verdicts and IQRs side by side, in the order given.
func TestCombine(t *testing.T) {
	dir := t.TempDir()
	day := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	mk := func(i int, r *report) string {
		r.Date, r.Command, r.Seconds = day.Add(time.Duration(i)*10*time.Minute), "./scripts/bench --only 'a|b'", 540
		r.Machine = machine{CPU: "AMD EPYC", Cores: 2}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "run"+string(rune('1'+i))+".json")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const floorPair = "retrysafe first execution / floor"
	paths := []string{
		mk(0, &report{Commit: "abc1234",
			Pairs: []pairStat{newPair(floorPair, 32, []float64{0.61, 0.62, 0.64, 0.65}), newPair(floorPair, 8, []float64{0.30, 0.33, 0.34})},
			Targets: []target{
				{Name: "first executions >= 0.60 x floor at 32 callers", Actual: "0.63 (IQR 0.62–0.64, 4 rounds)", Met: true},
				{Name: "added p99 < 3 ms", Actual: "8.07 ms", OutOfReach: true},
			}}),
		mk(1, &report{Commit: "abc1234",
			Pairs: []pairStat{newPair(floorPair, 32, []float64{0.40, 0.60, 0.80})},
			Targets: []target{
				{Name: "first executions >= 0.60 x floor at 32 callers", Actual: "0.60 (IQR 0.50–0.70, 3 rounds), unstable | wide", Undecided: true},
			}}),
		mk(2, &report{
			Pairs:   []pairStat{newPair(floorPair, 32, []float64{0.50, 0.51, 0.52}), newPair("lone call", 1, []float64{1.06, 1.08, 1.10})},
			Targets: []target{{Name: "first executions >= 0.60 x floor at 32 callers", Actual: "0.51 (IQR 0.50–0.52, 3 rounds)"}},
		}),
	}
	reps, err := loadReports(paths)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	if err := combined(&sb, reps); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	lines := strings.Split(out, "\n")
	row := func(prefix string) string {
		t.Helper()
		i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
		if i < 0 {
			t.Fatalf("no row %q in\n%s", prefix, out)
		}
		return lines[i]
	}
	for _, want := range []string{
		"| 1 | 2026-12-07 00:00 | abc1234 | AMD EPYC, 2 cores | `./scripts/bench --only 'a\\|b'` | 9m0s |",
		"| 3 | 2026-12-07 00:20 | – |",
	} {
		row(want)
	}
	if got, want := row("| first executions >= 0.60"), "| first executions >= 0.60 x floor at 32 callers | 0.63 (IQR 0.62–0.64, 4 rounds): **met** | 0.60 (IQR 0.50–0.70, 3 rounds), unstable \\| wide: no verdict | 0.51 (IQR 0.50–0.52, 3 rounds): not met | 1 / 1 / 1 |"; got != want {
		t.Errorf("target row\n got %s\nwant %s", got, want)
	}
	if got, want := row("| added p99"), "| added p99 < 3 ms | 8.07 ms: not met, out of reach | – | – | 0 / 0 / 1 |"; got != want {
		t.Errorf("target missing from later runs\n got %s\nwant %s", got, want)
	}
	if got, want := row("| comparison |"), "| comparison | 1 caller | 8 callers | 32 callers |"; got != want {
		t.Errorf("header\n got %s\nwant %s", got, want)
	}
	if got, want := row("| "+floorPair), "| "+floorPair+" | – | 0.33 (0.32–0.34)<br>–<br>– | 0.63 (0.62–0.64)<br>0.60 (0.50–0.70)\\*<br>0.51 (0.51–0.52) |"; got != want {
		t.Errorf("pair row\n got %s\nwant %s", got, want)
	}
	if got, want := row("| lone call"), "| lone call | –<br>–<br>1.08 (1.07–1.09) | – | – |"; got != want {
		t.Errorf("pair only in the last run\n got %s\nwant %s", got, want)
	}

	// Relative paths are the caller's, from where scripts/bench ran.
	t.Setenv(workDirEnv, dir)
	if reps, err := loadReports([]string{"run1.json"}); err != nil || reps[0].Commit != "abc1234" {
		t.Fatalf("relative to %s: %v", workDirEnv, err)
	}

	// Anything but a report says which file it was, and nothing is printed.
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"date":"2026-12-07T00:00:00Z"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ps := range [][]string{nil, {paths[0], bad}, {filepath.Join(dir, "missing.json")}, {filepath.Join(dir, "run1.json"), dir}} {
		if _, err := loadReports(ps); err == nil {
			t.Errorf("%v: no error", ps)
		} else if len(ps) > 1 && !strings.Contains(err.Error(), ps[len(ps)-1]) {
			t.Errorf("%v: %v does not name the file", ps, err)
		}
	}
}

func TestCombineFlag(t *testing.T) {
	c, err := parseFlags([]string{"--combine", "a.json", "b.json"}, io.Discard)
	if err != nil || !slices.Equal(c.combine, []string{"a.json", "b.json"}) {
		t.Fatalf("%q %v", c.combine, err)
	}
	for _, bad := range [][]string{{"--combine"}, {"--instructions", "--combine", "a.json"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// A report names the checkout it measured, where there is one.
func TestGitCommit(t *testing.T) {
	out, err := exec.Command("git", "rev-parse", "--short=7", "HEAD").Output()
	if err != nil {
		// Not a git checkout: the report leaves its commit out.
		if got := gitCommit(); got != "" {
			t.Fatalf("gitCommit() = %q outside a checkout (%v)", got, err)
		}
		return
	}
	if got, head := gitCommit(), strings.TrimSpace(string(out)); !strings.HasPrefix(got, head) {
		t.Fatalf("gitCommit() = %q, HEAD is %s", got, head)
	}
}

// Text the report did not write itself (an error, a statement's text) goes
// into its tables through cell: a pipe kept as an escaped pipe, not turned
// into another character, and a line break not ending the row.
func TestReportTablesEscapeCells(t *testing.T) {
	t.Parallel()
	rep := &report{Results: []*result{
		{System: "retrysafe", Workload: "first execution", Callers: 8, Err: "dial: a|b\nc"},
		{System: "retrysafe", Workload: "first execution", Callers: 1, Rate: 100, P50: 1,
			Statements: &statements{Ops: 10, Stmts: []stmtStat{{Query: "SELECT a || b FROM t", Calls: 10}}}},
	}}
	md := rep.markdown()
	for _, want := range []string{
		"| retrysafe | first execution | 8 | error | | | | | | | | dial: a\\|b c |\n",
		"`SELECT a \\|\\| b FROM t` |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
