// Package stripetest runs stripe-mock, Stripe's own stand-in for its API
// (github.com/stripe/stripe-mock), for tests of code that calls Stripe.
// stripe-mock validates every request against Stripe's OpenAPI
// specification and answers with Stripe's fixtures; it keeps no state (each
// create answers a new id, and an Idempotency-Key is not deduplicated).
package stripetest

import (
	"bufio"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Start starts stripe-mock (installed by scripts/stripe-mock.sh) on a free
// port for the rest of the test and returns its base URL. It fails the
// test, never skips it, when the binary is missing. STRIPE_MOCK names the
// binary; else it is looked for in GOBIN, GOPATH/bin and PATH.
func Start(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("STRIPE_MOCK")
	if bin == "" {
		var dirs []string
		if gobin := os.Getenv("GOBIN"); gobin != "" {
			dirs = append(dirs, gobin)
		}
		for _, p := range filepath.SplitList(build.Default.GOPATH) {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, "stripe-mock")); err == nil {
				bin = filepath.Join(d, "stripe-mock")
				break
			}
		}
	}
	if bin == "" {
		if p, err := exec.LookPath("stripe-mock"); err == nil {
			bin = p
		}
	}
	if bin == "" {
		t.Fatal("stripe-mock is not installed: run scripts/stripe-mock.sh (or set STRIPE_MOCK to its path)")
	}
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "Listening for HTTP at address: "); ok {
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatal("stripe-mock did not say where it listens within 30s")
	}
	return ""
}
