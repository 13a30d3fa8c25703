package outbox

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/retrysafe/retrysafe/executor"
)

type fakeExecutor struct {
	out *executor.Outcome
	err error
}

func (f fakeExecutor) ExecuteKey(context.Context, string, string, *executor.Opts) (*executor.Outcome, error) {
	return f.out, f.err
}

func TestRelaySettles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		status executor.Status
		want   string
	}{
		{executor.StatusCompleted, Sent},
		{executor.StatusFailed, Failed},
		{executor.StatusReview, Review},
	} {
		out, got, err := Relay(ctx, fakeExecutor{out: &executor.Outcome{Status: c.status}}, "t", "k", "x")
		if err != nil || got != c.want || out == nil {
			t.Errorf("%s: %q, %v; want %q", c.status, got, err, c.want)
		}
	}
}

func TestRelayBusyAndMissing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var busy *BusyError
	out, _, err := Relay(ctx, fakeExecutor{out: &executor.Outcome{Status: executor.StatusInFlight, RetryAfter: time.Millisecond}}, "t", "k", "whatsapp.send_text")
	if !errors.As(err, &busy) || busy.RetryAfter != minSnooze || busy.What != "whatsapp.send_text" || out == nil || !errors.Is(err, ErrBusy) {
		t.Errorf("in flight: %v (%+v), want a BusyError of %s with the outcome", err, busy, minSnooze)
	}
	// A database that answered with a transient error (serialization
	// failure) is busy too.
	_, _, err = Relay(ctx, fakeExecutor{err: &pgconn.PgError{Code: "40001"}}, "t", "k", "x")
	if !errors.As(err, &busy) || busy.RetryAfter != time.Second {
		t.Errorf("transient database error: %v, want a BusyError of 1s", err)
	}
	_, _, err = Relay(ctx, fakeExecutor{err: fmt.Errorf("wrapped: %w", executor.ErrNotFound)}, "t", "k", "x")
	if !errors.Is(err, executor.ErrNotFound) || errors.As(err, &busy) {
		t.Errorf("no intent: %v, want executor.ErrNotFound", err)
	}
	_, _, err = Relay(ctx, fakeExecutor{out: &executor.Outcome{Status: "odd"}}, "t", "k", "x")
	if err == nil {
		t.Error("an unknown status passed")
	}
}

type args struct{}

func (args) Kind() string { return "outbox_test" }

func TestWorkerMapsErrors(t *testing.T) {
	t.Parallel()
	errFinal := errors.New("final")
	errOther := errors.New("other")
	var exhausted int
	for _, c := range []struct {
		err      error
		attempt  int
		want     func(error) bool
		exhausts bool
	}{
		{nil, 1, func(err error) bool { return err == nil }, false},
		{&BusyError{RetryAfter: time.Millisecond}, 25, func(err error) bool {
			var s *river.JobSnoozeError
			return errors.As(err, &s) && s.Duration == minSnooze
		}, false},
		{fmt.Errorf("x: %w", errFinal), 25, func(err error) bool {
			var c *river.JobCancelError
			return errors.As(err, &c) && errors.Is(err, errFinal)
		}, false},
		{errOther, 1, func(err error) bool { return err == errOther }, false},
		{errOther, 25, func(err error) bool { return err == errOther }, true},
		{river.JobSnooze(time.Second), 25, func(err error) bool {
			var s *river.JobSnoozeError
			return errors.As(err, &s)
		}, false},
	} {
		exhausted = 0
		w := &worker[args]{w: Work[args]{
			Do:        func(context.Context, *river.Job[args]) error { return c.err },
			Final:     []error{errFinal},
			Exhausted: func(context.Context, args) { exhausted++ },
		}}
		got := w.Work(context.Background(), &river.Job[args]{JobRow: &rivertype.JobRow{Attempt: c.attempt, MaxAttempts: 25}})
		if !c.want(got) || (exhausted == 1) != c.exhausts {
			t.Errorf("%v at attempt %d: %v, exhausted %d", c.err, c.attempt, got, exhausted)
		}
	}
}
