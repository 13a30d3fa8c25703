package lostconn_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/retrysafe/retrysafe/internal/lostconn"
)

// The errors classified here are pgx's own, as pgconn returns them: a
// connection refused by the network, a server's startup refusal and a
// connection broken under a statement come from a real pgconn.Connect or
// Exec against a listener that speaks the protocol through pgx's pgproto3
// (the server side of it), as PostgreSQL would answer.

// server listens on a local port and answers each connection with answer,
// given the startup message's backend.
func server(t *testing.T, answer func(*pgproto3.Backend)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				b := pgproto3.NewBackend(c, c)
				for {
					m, err := b.ReceiveStartupMessage()
					if err != nil {
						return
					}
					if _, ok := m.(*pgproto3.StartupMessage); ok {
						break
					}
					// An SSL or GSS encryption request: refused, as a
					// server without TLS does.
					if _, err := c.Write([]byte{'N'}); err != nil {
						return
					}
				}
				answer(b)
			}()
		}
	}()
	return connString(ln.Addr().(*net.TCPAddr).Port)
}

func connString(port int) string {
	return "postgres://u@127.0.0.1:" + strconv.Itoa(port) + "/db?connect_timeout=5"
}

// fatal answers the startup message with a FATAL error of code.
func fatal(code, msg string) func(*pgproto3.Backend) {
	return func(b *pgproto3.Backend) {
		b.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: msg})
		_ = b.Flush()
	}
}

// closedPort is a local port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

func connect(t *testing.T, url string) (*pgconn.PgConn, error) {
	t.Helper()
	c, err := pgconn.Connect(context.Background(), url)
	if err == nil {
		t.Cleanup(func() { c.Close(context.Background()) })
	}
	return c, err
}

func TestClassify(t *testing.T) {
	t.Parallel()
	// Accepted, then closed under the first statement: a crash, a
	// failover, a cut network.
	breaks := server(t, func(b *pgproto3.Backend) {
		b.Send(&pgproto3.AuthenticationOk{})
		b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
		_ = b.Flush()
		_, _ = b.Receive()
	})
	broken := func() error {
		c, err := connect(t, breaks)
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		return c.Exec(context.Background(), "UPDATE t SET x = 1").Close()
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name                        string
		err                         func() error
		lost, unreachable, starting bool
	}{
		{"refused by the network", func() error {
			_, err := connect(t, connString(closedPort(t)))
			return err
		}, true, true, false},
		{"starting up", func() error {
			_, err := connect(t, server(t, fatal("57P03", "the database system is starting up")))
			return err
		}, true, true, true},
		{"shutting down", func() error {
			_, err := connect(t, server(t, fatal("57P01", "terminating connection due to administrator command")))
			return err
		}, true, true, true},
		{"full", func() error {
			_, err := connect(t, server(t, fatal("53300", "sorry, too many clients already")))
			return err
		}, true, true, true},
		// A login refused would be refused again: not lost.
		{"login refused", func() error {
			_, err := connect(t, server(t, fatal("28000", `role "u" does not exist`)))
			return err
		}, false, false, false},
		{"broken under a statement", broken, true, true, false},
		{"broken, wrapped", func() error { return fmt.Errorf("executor: complete: %w", broken()) }, true, true, false},
		// The server's answer: it rolled back what it refused.
		{"statement refused", func() error {
			return fmt.Errorf("complete: %w", &pgconn.PgError{Severity: "ERROR", Code: "23505"})
		}, false, false, false},
		// Terminated in a statement: the FATAL is the server's answer,
		// and it rolled the statement back. (A backend terminated after
		// its commit is local says nothing: the connection's error, a
		// lost write; executor's TestGroupTerminatedInCommitIsUncertain.)
		{"terminated in a statement", func() error {
			return &pgconn.PgError{Severity: "FATAL", Code: "57P01"}
		}, false, false, false},
		{"context canceled", func() error {
			_, err := pgconn.Connect(canceled, connString(closedPort(t)))
			return err
		}, false, false, false},
		{"deadline", func() error { return fmt.Errorf("x: %w", context.DeadlineExceeded) }, false, false, false},
		{"nil", func() error { return nil }, false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := c.err()
			if got := lostconn.Lost(err); got != c.lost {
				t.Errorf("Lost(%v) = %t, want %t", err, got, c.lost)
			}
			if got := lostconn.Unreachable(err); got != c.unreachable {
				t.Errorf("Unreachable(%v) = %t, want %t", err, got, c.unreachable)
			}
			if got := lostconn.StartingUp(err); got != c.starting {
				t.Errorf("StartingUp(%v) = %t, want %t", err, got, c.starting)
			}
		})
	}
}

func TestSendAgain(t *testing.T) {
	t.Parallel()
	down := connString(closedPort(t))
	unreachable := func() error {
		_, err := pgconn.Connect(context.Background(), down)
		return err
	}
	t.Run("until it gets through", func(t *testing.T) {
		t.Parallel()
		var n atomic.Int32
		err := lostconn.SendAgain(context.Background(), 10*time.Second, func() error {
			if n.Add(1) < 4 {
				return unreachable()
			}
			return nil
		})
		if err != nil || n.Load() != 4 {
			t.Fatalf("%v after %d tries, want nil after 4", err, n.Load())
		}
	})
	t.Run("an answer ends it", func(t *testing.T) {
		t.Parallel()
		refused := &pgconn.PgError{Severity: "ERROR", Code: "40001"}
		var n atomic.Int32
		err := lostconn.SendAgain(context.Background(), 10*time.Second, func() error {
			if n.Add(1) == 1 {
				return unreachable()
			}
			return refused
		})
		if !errors.Is(err, refused) || n.Load() != 2 {
			t.Fatalf("%v after %d tries, want the refusal after 2", err, n.Load())
		}
	})
	t.Run("bound", func(t *testing.T) {
		t.Parallel()
		var n atomic.Int32
		start := time.Now()
		err := lostconn.SendAgain(context.Background(), 300*time.Millisecond, func() error {
			n.Add(1)
			return unreachable()
		})
		if !lostconn.Unreachable(err) || n.Load() < 2 {
			t.Fatalf("%v after %d tries, want the last try's error after at least 2", err, n.Load())
		}
		// No pause starts that would end past the bound.
		if d := time.Since(start); d > 300*time.Millisecond+time.Second {
			t.Fatalf("gave up after %v, bound 300ms", d)
		}
	})
	t.Run("context", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		var n atomic.Int32
		err := lostconn.SendAgain(ctx, time.Hour, func() error {
			if n.Add(1) == 3 {
				cancel()
			}
			return unreachable()
		})
		if !lostconn.Unreachable(err) || n.Load() != 3 {
			t.Fatalf("%v after %d tries, want the last try's error after 3", err, n.Load())
		}
	})
}
