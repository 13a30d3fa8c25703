package freeport

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// A picked port is below the ephemeral range and free: the caller can
// listen on it.
func TestPickBelowTheEphemeralRange(t *testing.T) {
	hi := ephemeralLow()
	if hi == 0 {
		t.Skip("no " + rangeFile + " (not Linux)")
	}
	for range 20 {
		p, err := Pick()
		if err != nil {
			t.Fatal(err)
		}
		if hi-low >= 1000 && (p < low || p >= hi) {
			t.Fatalf("port %d outside [%d, %d)", p, low, hi)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("picked port %d: %v", p, err)
		}
		l.Close()
	}
}

// A range that leaves no room below it, or none readable, falls back to
// the kernel's choice.
func TestPickFallsBack(t *testing.T) {
	kernel := ephemeralLow()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"low range":  "10500\t60999\n",
		"unreadable": "",
		"garbage":    "ports\n",
	} {
		f := filepath.Join(dir, name)
		if content != "" {
			if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		old := rangeFile
		rangeFile = f
		p, err := Pick()
		rangeFile = old
		if err != nil || p == 0 || p < kernel {
			t.Fatalf("%s: port %d (the kernel's range starts at %d), %v", name, p, kernel, err)
		}
	}
}
