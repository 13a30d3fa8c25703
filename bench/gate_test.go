package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// slowDB answers every QueryRow after 5 ms with one deleted row.
type slowDB struct{ running atomic.Int32 }

func (d *slowDB) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, nil
}
func (d *slowDB) Query(context.Context, string, ...any) (pgx.Rows, error) { return nil, nil }
func (d *slowDB) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults  { return nil }
func (d *slowDB) QueryRow(context.Context, string, ...any) pgx.Row {
	d.running.Add(1)
	return slowRow{d}
}

type slowRow struct{ d *slowDB }

func (r slowRow) Scan(dest ...any) error {
	time.Sleep(5 * time.Millisecond)
	*dest[0].(*int64), *dest[1].(*int64) = 1, 1
	r.d.running.Add(-1)
	return nil
}

// A closed gate holds the next statement; closing waits for the one in
// flight; only open time counts as the purge's, up to its end.
func TestGate(t *testing.T) {
	db := &slowDB{}
	g := newGate(db)
	var done atomic.Int64
	stop := make(chan struct{})
	go func() {
		defer g.finish()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var a, b int64
			if err := g.QueryRow(context.Background(), "DELETE").Scan(&a, &b); err != nil {
				t.Error(err)
				return
			}
			done.Add(a)
		}
	}()
	time.Sleep(30 * time.Millisecond)
	if done.Load() != 0 {
		t.Fatal("a closed gate let a statement through")
	}
	g.setOpen(true)
	time.Sleep(50 * time.Millisecond)
	g.setOpen(false)
	if db.running.Load() != 0 {
		t.Fatal("closing returned with a statement in flight")
	}
	n := done.Load()
	if n < 3 {
		t.Fatalf("%d statements in 50 ms open", n)
	}
	time.Sleep(30 * time.Millisecond)
	if done.Load() != n {
		t.Fatal("statements ran while the gate was closed")
	}
	if a := g.activeTime(); a < 50*time.Millisecond || a > 80*time.Millisecond {
		t.Fatalf("active %v after 50 ms open", a)
	}
	close(stop)
	g.setOpen(true)
	time.Sleep(20 * time.Millisecond)
	g.setOpen(false)
	if len(g.deleting) != int(done.Load()) || len(g.scanning) != 0 {
		t.Fatalf("%d deleting, %d scanning statements timed, %d ran", len(g.deleting), len(g.scanning), done.Load())
	}
	before := g.activeTime()
	g.setOpen(true)
	time.Sleep(10 * time.Millisecond)
	if g.activeTime() != before {
		t.Fatal("time after the purge's end counted")
	}
}
