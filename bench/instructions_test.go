package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary be --instructions' child, as the bench
// binary is: instructions() runs os.Executable() under callgrind.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == instrChildCmd {
		os.Exit(instrChild(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func TestParseCallgrindTotal(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		bad  bool
	}{
		{in: "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nsummary: 52466744\n\nfl=(1)\ntotals: 52466744\n", want: 52466744},
		{in: "events: Ir\ntotals: 1234\n", want: 1234},
		{in: "events: Ir\ntotals: 99\nsummary: 100\n", want: 100}, // summary wins
		{in: "events: Ir\nfn=(1) main\n0 12\n", bad: true},
		{in: "summary: many\n", bad: true},
	} {
		got, err := parseCallgrindTotal(strings.NewReader(tc.in))
		if tc.bad != (err != nil) || (!tc.bad && got != tc.want) {
			t.Errorf("%q: %v, %v (want %v, error %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

// TestInstructions counts the floor's single-row commit and retrysafe's
// first execution for real (valgrind, a private cluster under callgrind,
// this test binary as the child), at the smallest size, and checks that
// the counts are there and plausible. The backend's counts repeat closely,
// so each repetition is checked; the client's include the Go runtime's
// collections and background work, which at 40 operations' difference can
// outweigh a single-row commit's client side (a CI run measured -10k per
// operation for the floor once), so only their averages are compared.
func TestInstructions(t *testing.T) {
	if testing.Short() {
		t.Skip("needs valgrind and PostgreSQL's server binaries; -short skips it")
	}
	cfg, err := parseFlags([]string{"--instructions", "--quick", "--only", `^floor/single-row commit$|^retrysafe/first execution$`}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	rep, err := instructions(ctx, cfg, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Logf("counts (shown with -v, or when a check fails):\n%+v", rep.Rows)
	floor, rs := rep.find("floor/single-row commit"), rep.find("retrysafe/first execution")
	if floor == nil || rs == nil || len(rep.Rows) != 2 {
		t.Fatalf("rows %+v", rep.Rows)
	}
	for _, r := range []*instrRow{floor, rs} {
		if len(r.Client) != 2 || len(r.Backend) != 2 {
			t.Fatalf("%s/%s: %d and %d repetitions, want 2", r.System, r.Workload, len(r.Client), len(r.Backend))
		}
		for i, b := range r.Backend {
			// Far below what one statement executes would mean the
			// difference of the two runs lost the operations.
			if b < 5e3 {
				t.Errorf("%s/%s repetition %d: backend %.0f instructions per operation", r.System, r.Workload, i, b)
			}
		}
		if a, b := r.Backend[0], r.Backend[1]; a/b > 1.1 || b/a > 1.1 {
			t.Errorf("%s/%s: backend repetitions %.0f and %.0f differ by more than a tenth", r.System, r.Workload, a, b)
		}
	}
	for i := range 2 {
		if rs.Backend[i] <= floor.Backend[i] {
			t.Errorf("repetition %d: a first execution's backend (%.0f) no dearer than a single-row commit's (%.0f)", i, rs.Backend[i], floor.Backend[i])
		}
	}
	if c, f := mean(rs.Client), mean(floor.Client); c < 5e4 || c <= f {
		t.Errorf("client: a first execution %.0f instructions per operation, a single-row commit %.0f", c, f)
	}
	// With the collector's marking out of the count (GOGC=off in the
	// child), each repetition stands on its own; one CI run, with it in,
	// read -73k and -77k.
	for i, c := range rs.Client {
		if c < 5e4 {
			t.Errorf("client, repetition %d: a first execution %.0f instructions per operation", i, c)
		}
	}
	for i := range 2 {
		if len(rs.Allocated) != 2 || len(floor.Allocated) != 2 || floor.Allocated[i] <= 0 || rs.Allocated[i] <= floor.Allocated[i] {
			t.Errorf("bytes allocated per operation: a first execution %v, a single-row commit %v", rs.Allocated, floor.Allocated)
			break
		}
	}
	md := rep.markdown()
	if !strings.Contains(md, "client bytes allocated/op") {
		t.Errorf("no allocation column in the report:\n%s", md)
	}
	if !strings.Contains(md, "| floor / retrysafe first execution") {
		t.Errorf("no ratio in the report:\n%s", md)
	}
}

func mean(vs []float64) float64 {
	var sum float64
	for _, v := range vs {
		sum += v
	}
	return sum / float64(len(vs))
}

func TestExcerpt(t *testing.T) {
	t.Parallel()
	s := "a\nb\nc\nd\ne\n"
	if got := excerpt(s, 1, 1); got != "a\n[... 3 lines ...]\ne" {
		t.Errorf("excerpt(s, 1, 1) = %q", got)
	}
	if got := excerpt(s, 3, 2); got != "a\nb\nc\nd\ne" {
		t.Errorf("excerpt(s, 3, 2) = %q", got)
	}
}
