package main

import (
	"regexp"
	"strconv"
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
	checkScriptCLI(t, "pgbench/run", "pgbench/run [CLIENTS] [SECONDS] [SCRIPT...]", []string{"0"}, []string{"2", "1s"}, []string{"2", "1", "no-such-script"})
	out := runScript(t, "pgbench/run", "2", "1")
	row := regexp.MustCompile(`(?m)^(\S+) +(\d+) (?:commits|executions)/s.*\((\d+) (?:rows|finished)\)$`)
	got := map[string]bool{}
	for _, r := range row.FindAllStringSubmatch(out, -1) {
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
