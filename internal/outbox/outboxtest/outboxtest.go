// Package outboxtest runs a job's work in tests the way River would: again
// and again while it answers busy (*outbox.BusyError), without River.
//
// It is for tests only (the lab layer of internal/importrule). It imports
// internal/outbox and internal/testutil.
package outboxtest

import (
	"errors"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/outbox"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

// Tries bounds UntilDone's runs.
const Tries = 200

// UntilDone runs work, each time in its own goroutine as a queue worker
// would (testutil.RunCrashable), until it answers anything but a
// *outbox.BusyError, and returns that answer. Between runs it waits the
// busy answer's RetryAfter, at most 50 ms (River's snooze, sooner). A run
// that dies at a failpoint, or work still busy after Tries runs, fails tb
// (with Errorf: UntilDone may run in a goroutine of the test's) and
// returns nil.
func UntilDone(tb testing.TB, what string, work func() error) error {
	tb.Helper()
	for range Tries {
		err, crashed := testutil.RunCrashable(work)
		if crashed {
			tb.Errorf("%s: crashed at a failpoint nobody armed", what)
			return nil
		}
		var busy *outbox.BusyError
		if !errors.As(err, &busy) {
			return err
		}
		time.Sleep(min(busy.RetryAfter, 50*time.Millisecond) + 10*time.Millisecond)
	}
	tb.Errorf("%s: still busy after %d runs", what, Tries)
	return nil
}
