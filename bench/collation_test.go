package main

import (
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCollationScript runs bench/collation/run as README documents it, on
// small tables and one round (C.UTF-8, which every Debian machine has, so
// that nothing needs generating first): it must make its cluster, migrate
// both schemas, find every key of the latest one "C", and print a count
// for each statement and schema. What it measures is in README; this
// keeps it running as the migrations change.
func TestCollationScript(t *testing.T) {
	if testing.Short() {
		t.Skip("makes a PostgreSQL cluster and runs it under callgrind")
	}
	t.Parallel()
	checkScriptCLI(t, "collation/run", "collation/run [LOCALE] [ROWS] [ROUNDS]", []string{"C.UTF-8", "many"})
	s := runScript(t, "collation/run", "C.UTF-8", "2000", "1")
	if !strings.Contains(s, `key columns not "C": 0`) {
		t.Errorf("the latest schema has keys not collated \"C\":\n%s", s)
	}
	row := regexp.MustCompile(`(?m)^\| (first execution|webhook effect|Idempotency-Key) \| (before|after) \| (\d+)k \|$`)
	rows := row.FindAllStringSubmatch(s, -1)
	if len(rows) != 6 {
		t.Fatalf("%d result rows, want 6:\n%s", len(rows), s)
	}
	for _, r := range rows {
		// A statement that inserts a row and its index entries costs the
		// backend tens of thousands of instructions at least; a count
		// near zero means the wrong backend's file was read.
		if n, _ := strconv.Atoi(r[3]); n < 50 {
			t.Errorf("%s, %s: %sk instructions per statement", r[1], r[2], r[3])
		}
	}
}

// runScript runs a benchmark script and returns its output; a failure
// ends the test with that output.
func runScript(t *testing.T, script string, args ...string) string {
	t.Helper()
	out, err := exec.Command(script, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return string(out)
}

// checkScriptCLI checks a benchmark script's command line: --help succeeds
// and prints its usage line, and each of bad fails and prints it too.
func checkScriptCLI(t *testing.T, script, usage string, bad ...[]string) {
	t.Helper()
	if out, err := exec.Command(script, "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), usage) {
		t.Errorf("%s --help: %v\n%s", script, err, out)
	}
	for _, args := range bad {
		if out, err := exec.Command(script, args...).CombinedOutput(); err == nil || !strings.Contains(string(out), usage) {
			t.Errorf("%s %v: %v, want a failure with the usage\n%s", script, args, err, out)
		}
	}
}
