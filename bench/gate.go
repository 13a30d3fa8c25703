package main

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrysafe/retrysafe/executor"
)

// gate is the DBTX the benchmark hands executor.Purge: it lets the purge's
// statements through while it is open and holds the next one while it is
// closed, so that the benchmark can pause a purge between its batches
// without changing it, and measure executions with and without it in
// slices of the same minute. It also times the statements.
type gate struct {
	db executor.DBTX

	mu       sync.Mutex
	cond     *sync.Cond
	open     bool
	busy     int // statements in flight
	openedAt time.Time
	active   time.Duration // time open, up to the purge's end
	finished bool
	// deleting and scanning are the durations of the purge's statements
	// that deleted rows and of those that found none; deleted is the rows
	// they deleted.
	deleting, scanning []time.Duration
	deleted            int64
}

var _ executor.DBTX = (*gate)(nil)

func newGate(db executor.DBTX) *gate {
	g := &gate{db: db}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// setOpen opens or closes the gate. Closing waits for the statement in
// flight, so that nothing of the purge runs once it returns.
func (g *gate) setOpen(open bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if open == g.open {
		return
	}
	g.open = open
	if open {
		g.openedAt = time.Now()
		g.cond.Broadcast()
		return
	}
	for g.busy > 0 {
		g.cond.Wait()
	}
	if !g.finished {
		g.active += time.Since(g.openedAt)
	}
}

// finish records the end of the purge: its active time stops here.
func (g *gate) finish() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open && !g.finished {
		g.active += time.Since(g.openedAt)
	}
	g.finished = true
}

// activeTime is how long the gate was open until the purge finished.
func (g *gate) activeTime() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.active
}

// progress is the rows deleted and the active time so far (the gate
// closed).
func (g *gate) progress() (int64, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.deleted, g.active
}

func (g *gate) enter() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	for !g.open {
		g.cond.Wait()
	}
	g.busy++
	return time.Now()
}

// leave ends a statement that started at t0; deleted is how many rows it
// deleted, when known (-1 when not).
func (g *gate) leave(t0 time.Time, deleted int64) {
	d := time.Since(t0)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.busy--
	switch {
	case deleted > 0:
		g.deleting = append(g.deleting, d)
		g.deleted += deleted
	case deleted == 0:
		g.scanning = append(g.scanning, d)
	}
	g.cond.Broadcast()
}

func (g *gate) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	t0 := g.enter()
	tag, err := g.db.Exec(ctx, sql, args...)
	deleted := int64(-1)
	if err == nil && tag.Delete() {
		deleted = tag.RowsAffected()
	}
	g.leave(t0, deleted)
	return tag, err
}

func (g *gate) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	t0 := g.enter()
	rows, err := g.db.Query(ctx, sql, args...)
	if err != nil {
		g.leave(t0, -1)
		return nil, err
	}
	return &gatedRows{Rows: rows, leave: sync.OnceFunc(func() { g.leave(t0, -1) })}, nil
}

func (g *gate) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	t0 := g.enter()
	return &gatedRow{row: g.db.QueryRow(ctx, sql, args...), g: g, t0: t0, deletes: strings.Contains(sql, "DELETE")}
}

func (g *gate) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	t0 := g.enter()
	br := g.db.SendBatch(ctx, b)
	return &gatedBatch{BatchResults: br, leave: sync.OnceFunc(func() { g.leave(t0, -1) })}
}

type gatedRow struct {
	row     pgx.Row
	g       *gate
	t0      time.Time
	deletes bool // the statement deletes
}

// Scan ends the statement. Purge scans the rows a batch deleted into its
// first destination: when that is an *int64 the gate counts it.
func (r *gatedRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	deleted := int64(-1)
	if err == nil && r.deletes && len(dest) > 0 {
		if n, ok := dest[0].(*int64); ok {
			deleted = *n
		}
	}
	r.g.leave(r.t0, deleted)
	return err
}

type gatedRows struct {
	pgx.Rows
	leave func()
}

func (r *gatedRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.leave()
	return false
}

func (r *gatedRows) Close() {
	r.Rows.Close()
	r.leave()
}

type gatedBatch struct {
	pgx.BatchResults
	leave func()
}

func (b *gatedBatch) Close() error {
	err := b.BatchResults.Close()
	b.leave()
	return err
}
