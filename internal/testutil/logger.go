package testutil

import (
	"log/slog"
	"strings"
	"testing"
)

// Logger sends warnings and errors to tb's log, so that a failing test
// shows what the code under test complained about and a passing one stays
// quiet.
func Logger(tb testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
