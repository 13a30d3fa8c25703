package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// result is one row of the report.
type result struct {
	System   string  `json:"system"`
	Workload string  `json:"workload"`
	Callers  int     `json:"callers"`
	Conns    int     `json:"conns"`
	Rate     float64 `json:"ops_per_sec"`
	// Floor is the floor's commit rate at the same number of callers in
	// this run; Ratio = Rate / Floor.
	Floor    float64 `json:"floor_ops_per_sec"`
	Ratio    float64 `json:"ratio_to_floor"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	AddedP50 float64 `json:"added_p50_ms"` // latency minus time in the tool
	AddedP99 float64 `json:"added_p99_ms"`
	// Around is the latency of the operations that called the tool, split
	// at the call (nil when none did).
	Around *around `json:"around_tool,omitempty"`
	// CommitsPerOp counts the database's commits (pg_stat_database
	// xact_commit, read-only ones included) per operation.
	CommitsPerOp float64 `json:"commits_per_op"`
	// WALPerOp is WAL bytes per operation (server-wide: approximate when
	// something else writes to the same server).
	WALPerOp float64 `json:"wal_bytes_per_op"`
	// FPIPerOp is full-page images per operation (server-wide, likewise):
	// the first change to a page after a checkpoint logs the whole page.
	FPIPerOp float64 `json:"fpi_per_op"`
	Ops      int64   `json:"ops"`
	Seconds  float64 `json:"seconds"`
	// Statements is what pg_stat_statements saw, when the server has it
	// loaded.
	Statements *statements `json:"pg_stat_statements,omitempty"`
	Note       string      `json:"note,omitempty"`
	Err        string      `json:"error,omitempty"`
	// Rounds is how many measurements the row pools (see pool).
	Rounds int `json:"rounds,omitempty"`

	sample *sample // the measurement, for pooling rounds
}

// workload is one benchmark point's life cycle on its own database.
type workload struct {
	system, name string
	// prep builds the database's state with its own connections, closed
	// before it returns (their commits are not counted).
	prep func(ctx context.Context, db *database) error
	// start opens the measured resources and returns the operation and
	// what closes them.
	start func(ctx context.Context, db *database, conns int) (opFunc, func(), error)
	// after, when set, runs after the window with the sample (e.g. to
	// attach a note).
	after func(ctx context.Context, db *database, r *result) error
}

// run creates a database, prepares it, measures, and drops it.
func (b *bench) run(ctx context.Context, w workload, callers int) *result {
	db, err := b.srv.create(ctx, w.system)
	if err != nil {
		return b.failed(w, callers, err)
	}
	defer b.drop(db)
	if w.prep != nil {
		if err := w.prep(ctx, db); err != nil {
			return b.failed(w, callers, fmt.Errorf("prepare: %w", err))
		}
	}
	return b.point(ctx, db, w, callers, nil)
}

func (b *bench) drop(db *database) {
	if err := db.drop(); err != nil {
		b.logf("  drop %s: %v", db.name, err)
	}
}

func (b *bench) failed(w workload, callers int, err error) *result {
	b.logf("  %-10s %-26s callers=%-4d ERROR %v", w.system, w.name, callers, err)
	return &result{System: w.system, Workload: w.name, Callers: callers, Conns: min(callers, b.cfg.maxConns), Err: err.Error()}
}

// point measures w on a prepared database: for b.cfg.duration, or while
// window runs when it is not nil.
func (b *bench) point(ctx context.Context, db *database, w workload, callers int, window func() error) *result {
	conns := min(callers, b.cfg.maxConns)
	r := &result{System: w.system, Workload: w.name, Callers: callers, Conns: conns}
	fail := func(err error) *result { return b.failed(w, callers, err) }
	if err := b.waitIdle(ctx, db); err != nil {
		return fail(err)
	}
	if b.pgss {
		if err := db.pgssReset(ctx); err != nil {
			return fail(err)
		}
	}
	c0, err := db.counters(ctx)
	if err != nil {
		return fail(err)
	}
	op, stop, err := w.start(ctx, db, conns)
	if err != nil {
		return fail(fmt.Errorf("start: %w", err))
	}
	var s *sample
	if window == nil {
		s = measure(ctx, callers, b.cfg.warmup, b.cfg.duration, op)
	} else {
		s = measureWhile(ctx, callers, b.cfg.warmup, op, window)
	}
	stop()
	if s.Err != nil {
		return fail(s.Err)
	}
	if err := b.waitIdle(ctx, db); err != nil {
		return fail(err)
	}
	c1, err := db.counters(ctx)
	if err != nil {
		return fail(err)
	}
	if b.pgss {
		stmts, err := db.pgssRead(ctx)
		if err != nil {
			return fail(err)
		}
		r.Statements = &statements{Ops: s.Total, Stmts: stmts}
	}
	r.fill(s)
	r.sample = s
	if s.Total > 0 {
		r.CommitsPerOp = float64(c1.commits-c0.commits) / float64(s.Total)
		r.WALPerOp = float64(c1.wal-c0.wal) / float64(s.Total)
		r.FPIPerOp = float64(c1.fpi-c0.fpi) / float64(s.Total)
	}
	if w.after != nil {
		if err := w.after(ctx, db, r); err != nil {
			return fail(err)
		}
	}
	var split string
	if a := r.Around; a != nil {
		split = fmt.Sprintf("  p99 before/in/after tool %.2f/%.2f/%.2f ms", a.BeforeP99, a.ToolP99, a.AfterP99)
	}
	b.logf("  %-10s %-26s callers=%-4d %8.0f ops/s  p50 %6.2f ms  p99 %6.2f ms  added p99 %6.2f ms  %.2f commits/op  %5.0f WAL B/op  %.2f FPI/op%s",
		w.system, w.name, callers, r.Rate, r.P50, r.P99, r.AddedP99, r.CommitsPerOp, r.WALPerOp, r.FPIPerOp, split)
	return r
}

// around is p50 and p99 of each part of an operation's latency, in ms:
// before the tool call, in it, after it.
type around struct {
	BeforeP50 float64 `json:"before_p50_ms"`
	BeforeP99 float64 `json:"before_p99_ms"`
	ToolP50   float64 `json:"tool_p50_ms"`
	ToolP99   float64 `json:"tool_p99_ms"`
	AfterP50  float64 `json:"after_p50_ms"`
	AfterP99  float64 `json:"after_p99_ms"`
}

func (r *result) fill(s *sample) {
	r.Rate = s.rate()
	r.P50, r.P99 = pct(s.Lat, 0.50), pct(s.Lat, 0.99)
	r.AddedP50, r.AddedP99 = pct(s.Added, 0.50), pct(s.Added, 0.99)
	r.Around = nil
	if len(s.Before) > 0 {
		r.Around = &around{
			BeforeP50: pct(s.Before, 0.50), BeforeP99: pct(s.Before, 0.99),
			ToolP50: pct(s.Tool, 0.50), ToolP99: pct(s.Tool, 0.99),
			AfterP50: pct(s.After, 0.50), AfterP99: pct(s.After, 0.99),
		}
	}
	r.Ops = s.Ops
	r.Seconds = s.Elapsed.Seconds()
}

// waitIdle waits until no backend is connected to db, so that every
// backend that worked on it has flushed its statistics.
func (b *bench) waitIdle(ctx context.Context, db *database) error {
	c, err := b.srv.admin(ctx)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1`, db.name).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d backends still on %s", n, db.name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pool combines rounds of one point into one row: the rate over their
// summed windows, percentiles over their pooled latencies, per-operation
// counters weighted by operations. A failed round fails the row.
func pool(rounds []*result) *result {
	if len(rounds) == 1 {
		return rounds[0]
	}
	out := *rounds[0]
	s := &sample{}
	var commits, wal, fpi, total float64
	rates := make([]string, len(rounds))
	for i, r := range rounds {
		if r.Err != "" || r.sample == nil {
			return r
		}
		s.Ops += r.sample.Ops
		s.Elapsed += r.sample.Elapsed
		s.Lat = append(s.Lat, r.sample.Lat...)
		s.Added = append(s.Added, r.sample.Added...)
		s.Before = append(s.Before, r.sample.Before...)
		s.Tool = append(s.Tool, r.sample.Tool...)
		s.After = append(s.After, r.sample.After...)
		t := float64(r.sample.Total)
		commits, wal, fpi, total = commits+r.CommitsPerOp*t, wal+r.WALPerOp*t, fpi+r.FPIPerOp*t, total+t
		rates[i] = fmt.Sprintf("%.0f", r.Rate)
	}
	out.fill(s)
	out.sample = s
	if total > 0 {
		out.CommitsPerOp, out.WALPerOp, out.FPIPerOp = commits/total, wal/total, fpi/total
	}
	out.Statements = poolStatements(rounds)
	out.Rounds = len(rounds)
	out.Note = fmt.Sprintf("%d rounds pooled: %s ops/s", len(rounds), strings.Join(rates, ", "))
	return &out
}
