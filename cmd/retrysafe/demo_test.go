package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// The demo, as a user runs it, against the test database: it must tell a
// story of one charge, one reply and one key, and exit 0.
func TestDemoEndToEnd(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--json")
	cmd.Env = append(cmd.Environ(), "DATABASE_URL="+pgtest.URL(t))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var rep demoReport
	if jerr := json.Unmarshal(stdout.Bytes(), &rep); jerr != nil {
		t.Fatalf("demo --json: %v (run error %v)\nstdout:\n%s\nstderr:\n%s", jerr, err, stdout.String(), stderr.String())
	}
	if err != nil || !rep.OK {
		t.Fatalf("demo failed: %v\n%+v\nstderr:\n%s", err, rep, stderr.String())
	}
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
