package main

import (
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestPgbenchScript runs bench/pgbench/run as README documents it, for a
// second per script at two clients: it must build the whole schema, run
// every script, and find that each finished the rows it counts (the
// script fails otherwise). What it measures is in README and
// docs/benchmarks.md; this keeps it running as the migrations and the
// ledger's statements change.
func TestPgbenchScript(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pgbench against the local server")
	}
	t.Parallel()
	if out, err := exec.Command("pgbench/run", "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "bench/pgbench/run [CLIENTS] [SECONDS] [SCRIPT...]") {
		t.Errorf("pgbench/run --help: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"0"}, {"2", "1s"}, {"2", "1", "no-such-script"}} {
		if out, err := exec.Command("pgbench/run", args...).CombinedOutput(); err == nil || !strings.Contains(string(out), "bench/pgbench/run [CLIENTS]") {
			t.Errorf("pgbench/run %v: %v\n%s", args, err, out)
		}
	}
	out, err := exec.Command("pgbench/run", "2", "1").CombinedOutput()
	if err != nil {
		t.Fatalf("pgbench/run: %v\n%s", err, out)
	}
	row := regexp.MustCompile(`(?m)^(\S+) +(\d+) (?:commits|executions)/s.*\((\d+) (?:rows|finished)\)$`)
	got := map[string]bool{}
	for _, r := range row.FindAllStringSubmatch(string(out), -1) {
		got[r[1]] = true
		if n, _ := strconv.Atoi(r[3]); n == 0 {
			t.Errorf("%s finished no rows:\n%s", r[1], out)
		}
	}
	for _, s := range []string{"floor", "minimal", "minimal-update", "fresh", "retrysafe", "one-table", "retrysafe-group8"} {
		if !got[s] {
			t.Errorf("no result for %s:\n%s", s, out)
		}
	}
}
