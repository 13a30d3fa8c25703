package main

import (
	"context"
	"fmt"
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
	// AddedP99Q1 and AddedP99Q3 are the quartiles of the per-round p99s
	// of added latency (rows of the rotation only).
	AddedP99Q1 float64 `json:"added_p99_q1_ms,omitempty"`
	AddedP99Q3 float64 `json:"added_p99_q3_ms,omitempty"`
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
	// StealPct is the share of the machine's CPU time over the row's
	// slices that the hypervisor gave to other guests (/proc/stat's
	// steal), in per cent; nil where it could not be read.
	StealPct *float64 `json:"steal_pct,omitempty"`
	Note     string   `json:"note,omitempty"`
	Err      string   `json:"error,omitempty"`
	// Rounds is how many measurements the row pools (see pool, rotate).
	Rounds int `json:"rounds,omitempty"`
	// RateQ1 and RateQ3 are the quartiles of the row's per-slice rates.
	RateQ1 float64 `json:"rate_q1,omitempty"`
	RateQ3 float64 `json:"rate_q3,omitempty"`
	// RatioQ1 and RatioQ3 are the quartiles of the row's paired ratios to
	// the floor (Ratio is then their median; see paired.go).
	RatioQ1 float64 `json:"ratio_q1,omitempty"`
	RatioQ3 float64 `json:"ratio_q3,omitempty"`
	// ClientCPUPerOp is the benchmark process's CPU time per operation
	// (the callers, the driver and the in-process tool), in µs;
	// ServerCPUPerOp the CPU time of the database's backends, in µs (0
	// when the server is not on this machine). Neither depends on the
	// clock of a loaded machine the way a rate does.
	ClientCPUPerOp float64 `json:"client_cpu_us_per_op,omitempty"`
	ServerCPUPerOp float64 `json:"server_cpu_us_per_op,omitempty"`
	// ServerSysCPUPerOp is the system (kernel) part of ServerCPUPerOp, µs;
	// ServerMinFltPerOp the backends' minor page faults per operation;
	// ServerRunWaitPerOp the time they waited on a run queue for a core,
	// µs (/proc/<pid>/schedstat). They tell apart two sides whose
	// statements cost different CPU: kernel work (wake-ups, faults, a
	// guest's page tables) or PostgreSQL's own.
	ServerSysCPUPerOp  float64 `json:"server_sys_cpu_us_per_op,omitempty"`
	ServerMinFltPerOp  float64 `json:"server_minflt_per_op,omitempty"`
	ServerRunWaitPerOp float64 `json:"server_run_wait_us_per_op,omitempty"`
	// BlocksReadPerOp and BlocksHitPerOp are the database's blocks read
	// from outside shared buffers (the OS cache or the disk) and found in
	// them, per operation (rows of the rotation only).
	BlocksReadPerOp float64 `json:"blocks_read_per_op,omitempty"`
	BlocksHitPerOp  float64 `json:"blocks_hit_per_op,omitempty"`

	sample *sample // the measurement, for pooling rounds
}

// addNote appends a clause to r's note, after a "; " when it has one.
func (r *result) addNote(format string, args ...any) {
	if r.Note != "" {
		r.Note += "; "
	}
	r.Note += fmt.Sprintf(format, args...)
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

func (b *bench) drop(db *database) {
	if err := db.drop(); err != nil {
		b.logf("  drop %s: %v", db.name, err)
	}
}

func (b *bench) failed(w workload, callers int, err error) *result {
	b.logf("  %-10s %-26s callers=%-4d ERROR %v", w.system, w.name, callers, err)
	return &result{System: w.system, Workload: w.name, Callers: callers, Conns: min(callers, b.cfg.maxConns), Err: err.Error()}
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

// waitIdle waits until no client backend is connected to db, so that
// every backend that worked on it has flushed its statistics. Other
// backends (autovacuum's workers) are not waited for: at 10M on a private
// server, where autovacuum is on, one backend was still on the scale
// database 10 s after the purge of a day's rows had deleted 1.3 million
// rows from each table, with the benchmark's pools closed, and the wait
// failed both purge points (2026-12-02; the count did not say which kind
// it was; the error now shows what the client backends left were doing).
func (b *bench) waitIdle(ctx context.Context, db *database) error {
	c, err := b.srv.admin(ctx)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var (
			n     int
			doing string
		)
		if err := c.QueryRow(ctx, `SELECT count(*), coalesce(string_agg(left(query, 60), '; '), '')
			FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'`, db.name).Scan(&n, &doing); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d client backends still on %s (last statements: %s)", n, db.name, doing)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// statsIdleFlush is how long after a backend goes idle it has flushed
// the statistics of what it ran: PostgreSQL flushes a backend's pending
// statistics at most once a second (PGSTAT_MIN_INTERVAL) without waiting
// for locks, and one that goes idle with some still pending flushes them,
// waiting for the locks this time, on a timer of PGSTAT_IDLE_INTERVAL
// (10 s); plus a second to spare.
const statsIdleFlush = 11 * time.Second

// waitStatsFlushed waits until db's open but idle client backends (a kept
// pool's, after its warm-up) have flushed the statistics of what they
// ran: until the last of them has been idle for statsIdleFlush, by the
// server's clock (pg_stat_activity's state_change). It does not wait for
// the database's counters to stand still: an autovacuum worker moves them
// whenever it likes (on the empty side's tables, filled a little by its
// warm-up, it kept them moving for two minutes, 2026-12-03).
func (b *bench) waitStatsFlushed(ctx context.Context, db *database) error {
	c, err := b.srv.admin(ctx)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	deadline := time.Now().Add(3 * statsIdleFlush)
	for {
		var busy int
		var idleFor float64 // seconds since the last of them went idle
		if err := c.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state <> 'idle'),
			coalesce(extract(epoch FROM clock_timestamp() - max(state_change)), 0)
			FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'`, db.name).Scan(&busy, &idleFor); err != nil {
			return err
		}
		left := statsIdleFlush - time.Duration(idleFor*float64(time.Second))
		if busy == 0 && left <= 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d client backends still busy, the last idle for %.1f s, %s after the wait began", db.name, busy, idleFor, 3*statsIdleFlush)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(max(left, 20*time.Millisecond), time.Second)):
		}
	}
}
