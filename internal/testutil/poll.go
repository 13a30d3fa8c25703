package testutil

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PollTrue waits until query, read on q (a pool, a connection, a
// transaction), returns true, and fails the test if that takes longer
// than 10 s or the query fails: a state of the server (a session waiting
// on a lock, a row committed) that the test must see before it goes on.
func PollTrue(tb testing.TB, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, what, query string) {
	tb.Helper()
	FinishWithin(tb, 10*time.Second, what, func() {
		for {
			var ok bool
			if err := q.QueryRow(context.Background(), query).Scan(&ok); err != nil || ok {
				if err != nil {
					tb.Error(err)
				}
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
}
