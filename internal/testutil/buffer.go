package testutil

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// LockedBuffer is a bytes.Buffer safe for concurrent use: a logger or a
// child process writes while the test reads. The zero value is ready.
type LockedBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{} // closed by the next Write; nil until a WaitFor
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wrote != nil {
		close(l.wrote)
		l.wrote = nil
	}
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// WaitFor returns once s has been written (a log line the test waits for,
// say), woken by each write, and fails the test, showing what was
// written, if that takes longer than d.
func (l *LockedBuffer) WaitFor(tb testing.TB, d time.Duration, s string) {
	tb.Helper()
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		l.mu.Lock()
		if strings.Contains(l.b.String(), s) {
			l.mu.Unlock()
			return
		}
		if l.wrote == nil {
			l.wrote = make(chan struct{})
		}
		wrote := l.wrote
		l.mu.Unlock()
		select {
		case <-wrote:
		case <-timeout.C:
			tb.Fatalf("%q not written within %v; written:\n%s", s, d, l.String())
		}
	}
}
