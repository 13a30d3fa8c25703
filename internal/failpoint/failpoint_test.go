package failpoint

import (
	"os"
	"os/exec"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

func TestParse(t *testing.T) {
	got := parse(" a , b@3,c@x,,d@0")
	want := map[string]int{"a": 1, "b": 3, "c": 1, "d": 1}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parse = %v, want %v", got, want)
	}
}

func TestUnarmedReturns(t *testing.T) {
	if os.Getenv(Env) != "" {
		t.Skip("failpoints armed in the environment")
	}
	Hit("nothing.armed") // must return
	if Armed("nothing.armed") {
		t.Fatal("armed without the environment")
	}
}

// TestHitKills runs this test binary again with the point armed and checks
// that it died of SIGKILL at the second hit.
func TestHitKills(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		Hit("p")
		os.Stdout.WriteString("first hit passed\n")
		Hit("p")
		os.Stdout.WriteString("second hit passed\n")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHitKills$")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", Env+"=other,p@2")
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok {
		t.Fatalf("child did not die: err=%v output=%s", err, out)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child exit %v, want SIGKILL; output=%s", ws, out)
	}
	if !strings.Contains(string(out), "first hit passed") || strings.Contains(string(out), "second hit passed") {
		t.Fatalf("killed at the wrong hit: %s", out)
	}
}
