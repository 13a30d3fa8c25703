package labcli

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// The API Pix demo, as a user runs it: one cob under the key's txid, found
// by the second worker instead of created again, one reply, one receipt,
// one refund made once and notified once.
func TestDemoAPIPix(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--psp", "apipix", "--json")
	cmd.Env = append(cmd.Environ(), "DATABASE_URL="+pgtest.URL(t))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var rep apipixReport
	if jerr := json.Unmarshal(stdout.Bytes(), &rep); jerr != nil {
		t.Fatalf("demo --psp apipix --json: %v (run error %v)\nstdout:\n%s\nstderr:\n%s", jerr, err, stdout.String(), stderr.String())
	}
	if err != nil || !rep.OK {
		t.Fatalf("demo failed: %v\n%+v\nstderr:\n%s", err, rep, stderr.String())
	}
	if len(rep.Cobs) != 1 || rep.PSP["cob_puts"] != 1 || rep.PSP["cob_reads"] < 1 || rep.Attempts < 2 || rep.Key[:35] != rep.TxID {
		t.Fatalf("report: %+v", rep)
	}
	if rep.Callbacks["duplicate"] < 1 || rep.Callbacks["processed"] != 2 {
		t.Fatalf("callback verdicts %v, want 2 processed (payment, partial refund) and a duplicate", rep.Callbacks)
	}
}
