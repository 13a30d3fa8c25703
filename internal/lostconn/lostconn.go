package lostconn

import (
	"context"
	"errors"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrysafe/retrysafe/internal/backoff"
)

// Lost reports whether err leaves a write's outcome unknown because its
// connection failed: neither the server's answer (a *pgconn.PgError: what
// it refused, it rolled back) nor the end of the caller's context. A
// server that refuses a new connection only for now (StartingUp) counts
// too.
func Lost(err error) bool {
	if err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var pgErr *pgconn.PgError
	return !errors.As(err, &pgErr) || StartingUp(err)
}

// StartingUp reports whether err is a connection refused by a server that
// will take it soon: one starting up or recovering from a crash (57P03
// cannot_connect_now: "the database system is starting up", "... is in
// recovery mode"), shutting down (57P01), or at max_connections (53300).
// Each is a fatal error in answer to a startup message, before any
// statement, so it comes inside a *pgconn.ConnectError.
func StartingUp(err error) bool {
	var connect *pgconn.ConnectError
	var pgErr *pgconn.PgError
	if !errors.As(err, &connect) || !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "57P03", "57P01", "53300":
		return true
	}
	return false
}

// Unreachable reports whether err is the network's or that of a server not
// taking connections yet: no connection could be made (StartingUp
// included), or the one a try had broke. Another try may get through; a
// server's refusal of the statement or the login, a closed pool or
// transaction, or the end of a context would only come back.
func Unreachable(err error) bool {
	if !Lost(err) {
		return false
	}
	var connect *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connect) || errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// The pauses between the tries of SendAgain: from Pause, doubling to
// PauseMax, the upper half random.
const (
	Pause    = 50 * time.Millisecond
	PauseMax = time.Second
)

// SendAgain sends a write whose connection was lost (send), and sends it
// once more after a pause whenever that try is Unreachable too, for up to
// bound from now or until ctx ends; it returns the last try's error. send
// must be safe to repeat, and must bound each try itself (its own context):
// ctx only ends the pauses.
func SendAgain(ctx context.Context, bound time.Duration, send func() error) error {
	deadline := time.Now().Add(bound)
	for n := 1; ; n++ {
		err := send()
		if err == nil || !Unreachable(err) {
			return err
		}
		d := backoff.UpperHalf(backoff.Exponential(Pause, PauseMax, n))
		if time.Until(deadline) < d || backoff.Sleep(ctx, d) != nil {
			return err
		}
	}
}
