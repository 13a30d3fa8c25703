package labcli

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/cli"
	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// The demo, as a user runs it, against the test database: it must tell a
// story of one charge, one reply and one key, and exit 0.
func TestDemoEndToEnd(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	rep := runDemoJSON(t, bin, "on")
	if len(rep.Charges) != 1 || len(rep.Replies) != 1 || !rep.KeysEqual || rep.ActionStatus != "completed" || rep.Attempts < 2 {
		t.Fatalf("report: %+v", rep)
	}
	// The crash came after the charge: the second attempt must have asked
	// the PSP by key, not charged again.
	posts := 0
	for _, r := range rep.PSPRequests {
		if r.Method == "POST" {
			posts++
		}
	}
	if posts != 1 {
		t.Fatalf("the PSP saw %d charge requests, want 1: %+v", posts, rep.PSPRequests)
	}
	if rep.ModelReplayed == 0 {
		t.Errorf("the journal replayed no model answer: %+v", rep)
	}
	if rep.Sidecar == nil || !rep.Sidecar.Replayed || len(rep.Sidecar.Divergent) == 0 {
		t.Errorf("sidecar re-execution: %+v", rep.Sidecar)
	}
}

func runDemoJSON(t *testing.T, bin, journal string, extra ...string) demoReport {
	t.Helper()
	var rep demoReport
	runDemoCmd(t, bin, &rep, append([]string{"--psp", "v1", "--journal", journal}, extra...)...)
	return rep
}

// runDemoCmd runs `retrysafe demo --json args...` against the test
// database and decodes its report into rep; the test fails unless the
// demo passed.
func runDemoCmd(t *testing.T, bin string, rep any, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args = append([]string{"demo", "--json"}, args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(cmd.Environ(), "DATABASE_URL="+pgtest.URL(t))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ok struct {
		OK bool `json:"ok"`
	}
	if jerr := json.Unmarshal(stdout.Bytes(), rep); jerr != nil {
		t.Fatalf("%s: %v (run error %v)\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), jerr, err, stdout.String(), stderr.String())
	}
	json.Unmarshal(stdout.Bytes(), &ok) //nolint:errcheck // rep decoded the same bytes
	if err != nil || !ok.OK {
		t.Fatalf("demo failed: %v\n%+v\nstderr:\n%s", err, rep, stderr.String())
	}
}

// tokens measure, read against the ledger the demo leaves behind: with the
// journal on, the redelivered first step is a journal hit; with it off, it
// is a duplicate call paid twice.
func TestTokensMeasureOnDemoLedger(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, journal := range []string{"on", "off"} {
		t.Run("journal-"+journal, func(t *testing.T) {
			t.Parallel()
			rep := runDemoJSON(t, bin, journal, "--keep")
			pool := pgtest.Pool(t, nil)
			t.Cleanup(func() {
				for _, s := range []string{rep.Schema, rep.Schema + "_psp"} {
					pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+s+" CASCADE") //nolint:errcheck
				}
			})
			e, out, errb := testEnv(bytes.NewReader(nil), map[string]string{"DATABASE_URL": pgtest.URL(t)})
			args := []string{"tokens", "measure", "--schema", rep.Schema, "--tenant", rep.Tenant, "--format", "json",
				"--since", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "--until", time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
				"--price", "gpt-4o-mini=0.015/0.075"}
			if code := cli.Run(context.Background(), e, args); code != 0 {
				t.Fatalf("measure: exit %d: %s", code, errb)
			}
			var m struct {
				Total struct {
					Made, Duplicate, Avoided struct{ Calls int }
				}
			}
			if err := json.Unmarshal(out.Bytes(), &m); err != nil {
				t.Fatal(err)
			}
			if m.Total.Made.Calls != rep.ModelMade || m.Total.Avoided.Calls != rep.ModelReplayed {
				t.Fatalf("measure says %+v; the demo counted %d made, %d replayed", m.Total, rep.ModelMade, rep.ModelReplayed)
			}
			switch journal {
			case "on":
				if m.Total.Duplicate.Calls != 0 || m.Total.Avoided.Calls == 0 {
					t.Fatalf("journal on: %+v", m.Total)
				}
			case "off":
				if m.Total.Duplicate.Calls == 0 || m.Total.Avoided.Calls != 0 {
					t.Fatalf("journal off: %+v", m.Total)
				}
			}
		})
	}
}
