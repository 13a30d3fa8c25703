package harness

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// The test binary re-runs itself as the child: HARNESS_CHILD selects what
// the child does.
func TestMain(m *testing.M) {
	switch os.Getenv("HARNESS_CHILD") {
	case "ready":
		os.Stdout.WriteString("booting\nchild: listening on http://127.0.0.1:1\n")
		time.Sleep(time.Hour)
	case "exit":
		os.Stderr.WriteString("bad config\n")
		os.Exit(3)
	}
	os.Exit(m.Run())
}

func TestStartKill(t *testing.T) {
	t.Parallel()
	p, err := Start(context.Background(), Spec{Name: "child", Args: []string{"-test.run=XXX"}, Env: []string{"HARNESS_CHILD=ready"}, Ready: "child: listening on "})
	if err != nil {
		t.Fatal(err)
	}
	if p.Ready != "http://127.0.0.1:1" {
		t.Fatalf("Ready = %q", p.Ready)
	}
	start := time.Now()
	p.Kill()
	if !p.Exited() || time.Since(start) > 5*time.Second {
		t.Fatal("Kill did not end the child promptly")
	}
}

func TestExitBeforeReady(t *testing.T) {
	t.Parallel()
	p, err := Start(context.Background(), Spec{Name: "child", Args: []string{"-test.run=XXX"}, Env: []string{"HARNESS_CHILD=exit"}, Ready: "never", Timeout: 30 * time.Second})
	if !errors.Is(err, ErrExited) {
		t.Fatalf("error %v for a child that exited, want ErrExited", err)
	}
	if want := "bad config"; !contains(err.Error(), want) {
		t.Fatalf("error %q lacks the child's stderr %q", err, want)
	}
	// The ended process comes back with the error, for its caller to read.
	if p == nil || !p.Exited() || !contains(p.Tail(), "bad config") {
		t.Fatalf("Start returned %v with ErrExited, want the ended process with its tail", p)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
