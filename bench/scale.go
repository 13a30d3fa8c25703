package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// scaleResult is the scale section: the preloaded database, its sizes, the
// paired comparison of first executions on it with an empty one, and the
// purges of its expired rows under load.
type scaleResult struct {
	Rows    int   `json:"rows"`         // intents (each with its action) preloaded
	Expired int64 `json:"expired_rows"` // of them expired, for the purge
	Callers int   `json:"callers"`
	// Database is the kept database's name (--scale-db); Reused says it
	// held the preload already.
	Database string `json:"database,omitempty"`
	Reused   bool   `json:"reused"`
	// The preload's steps, in seconds: the rows, their key indexes, the
	// vacuum, analyze and checkpoint after them. RestoreSeconds is the
	// time spent inserting again expired rows a purge had deleted.
	LoadSeconds    float64 `json:"load_seconds,omitempty"`
	IndexSeconds   float64 `json:"index_seconds,omitempty"`
	SettleSeconds  float64 `json:"settle_seconds,omitempty"`
	RestoreSeconds float64 `json:"restore_seconds,omitempty"`
	// Sizes are the ledger's sizes after the preload; LiveSizes those of
	// the empty database after its slices (rows Executor.Execute wrote).
	Sizes     *ledgerSizes `json:"sizes,omitempty"`
	LiveSizes *ledgerSizes `json:"live_sizes,omitempty"`
	// Warmup is the warm-up of the preloaded tables (--scale-warmup)
	// before the paired rounds, part by part; EmptyWarmup the empty
	// side's (warmSides).
	Warmup      []warmStep `json:"warmup,omitempty"`
	EmptyWarmup []warmStep `json:"empty_warmup,omitempty"`
	// WarmupExecutions are the first executions the preloaded side ran
	// before its rounds (the warm-up's and those after a forced
	// checkpoint): each added an intent and its action, so the rounds
	// begin on Rows plus as many. At 4,000 to 5,000 a second the 120 s
	// warm-up grows a 1M-row point's tables by two thirds (2026-12-07),
	// and its key indexes, whose every page a checkpoint's burst logs
	// whole, with them.
	WarmupExecutions int64 `json:"warmup_executions,omitempty"`
	// Checkpoint is the server's next checkpoint against the rounds:
	// whether one was forced before them, and how many began during them.
	Checkpoint *checkpointRoom `json:"checkpoint,omitempty"`
	// Pair is the preloaded tables' rate over the empty ones', per round.
	Pair *pairStat `json:"pair,omitempty"`
	// Rounds are the pair's rounds one by one: which side ran first, each
	// side's rate and CPU. Order tells whether the ratio's spread comes
	// from which side follows which (byOrder).
	Rounds []scaleRound `json:"rounds,omitempty"`
	Purges []*purgeRun  `json:"purges,omitempty"`
	Err    string       `json:"error,omitempty"`
}

// runScale measures first executions on tables holding cfg.scaleRows
// intents and actions against empty ones, in paired slices at
// cfg.scaleCallers, then purges the expired rows under load once per
// purge setting (purgeload.go).
func (b *bench) runScale(ctx context.Context) ([]*result, *scaleResult) {
	sr := &scaleResult{Rows: b.cfg.scaleRows, Callers: b.cfg.scaleCallers}
	var out []*result
	fail := func(err error) ([]*result, *scaleResult) {
		sr.Err = err.Error()
		b.logf("  scale: ERROR %v", err)
		return out, sr
	}
	db, m, err := b.scaleDatabase(ctx, sr)
	if err != nil {
		return fail(err)
	}
	if b.cfg.scaleDB == "" || b.cfg.scaleDrop {
		defer b.drop(db)
	} else {
		defer b.logf("  kept database %s (%s rows): --scale-db %s reuses it; add --scale-drop to drop it after the run, or DROP DATABASE %s",
			db.name, count(sr.Rows), db.name, db.name)
	}
	sr.Expired = m.Expired
	ready := func() error {
		t, err := restoreExpired(ctx, db, m, b.logf)
		sr.RestoreSeconds += t
		if err != nil {
			return err
		}
		return settle(ctx, db)
	}
	if err := ready(); err != nil {
		return fail(err)
	}
	if sr.Sizes, err = measureSizes(ctx, db); err != nil {
		return fail(err)
	}
	if sr.Reused {
		b.logSizes("of the reused scale database", sr.Sizes)
	} else {
		b.logSizes("after the preload", sr.Sizes)
	}
	rows, err := b.scalePair(ctx, db, sr)
	out = append(out, rows...)
	if err != nil {
		return fail(err)
	}
	for _, set := range b.cfg.purgeSettings {
		if ctx.Err() != nil {
			break
		}
		if err := ready(); err != nil {
			return fail(err)
		}
		run, rows := b.purgePoint(ctx, db, m, set)
		sr.Purges = append(sr.Purges, run)
		out = append(out, rows...)
	}
	return out, sr
}

// scaleDatabase opens the kept database (--scale-db) when it holds a
// preload of cfg.scaleRows rows, or creates a database and preloads it.
func (b *bench) scaleDatabase(ctx context.Context, sr *scaleResult) (*database, *preloadMeta, error) {
	rows, name := b.cfg.scaleRows, b.cfg.scaleDB
	if name != "" {
		sr.Database = name
		ok, err := b.srv.exists(ctx, name)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			db, err := b.srv.existing(name)
			if err != nil {
				return nil, nil, err
			}
			m, err := readMeta(ctx, db)
			switch {
			case err != nil:
				return nil, nil, err
			case m == nil:
				return nil, nil, fmt.Errorf("database %s holds no finished preload: drop it (DROP DATABASE %s) or name another", name, name)
			case m.Rows != int64(rows):
				return nil, nil, fmt.Errorf("database %s holds a preload of %d rows, not %d: run with --scale-rows %d, drop it, or name another", name, m.Rows, rows, m.Rows)
			}
			sr.Reused = true
			b.logf("  reusing %s: %s intents and actions preloaded %s ago, %s of them expired",
				name, count(rows), time.Since(m.LoadedAt).Round(time.Minute), count(int(m.Expired)))
			return db, m, nil
		}
	}
	var db *database
	var err error
	if name != "" {
		db, err = b.srv.createNamed(ctx, name)
	} else {
		db, err = b.srv.create(ctx, "scale")
	}
	if err != nil {
		return nil, nil, err
	}
	expired := b.cfg.purgeRows
	if expired < 0 {
		expired = int(dayShare * float64(rows))
	}
	b.logf("  preloading %s intents and actions (%s expired) into %s", count(rows), count(expired), db.name)
	start := time.Now()
	m, tm, err := preload(ctx, db, rows, expired, b.logf)
	if err != nil {
		b.drop(db)
		return nil, nil, fmt.Errorf("preload: %w", err)
	}
	sr.LoadSeconds, sr.IndexSeconds, sr.SettleSeconds = tm.Load, tm.Index, tm.Settle
	b.logf("  preloaded in %.1fs: rows %.1fs, key indexes %.1fs, vacuum + analyze + checkpoint %.1fs",
		time.Since(start).Seconds(), tm.Load, tm.Index, tm.Settle)
	return db, m, nil
}

// scalePair measures first executions on the preloaded tables and on
// empty ones in paired slices, and the sizes of the empty database's
// tables once the executor has filled them a little.
func (b *bench) scalePair(ctx context.Context, db *database, sr *scaleResult) ([]*result, error) {
	callers := b.cfg.scaleCallers
	conns := min(callers, b.cfg.maxConns)
	empty, full := b.scaleSlots(ctx, db, sr.Rows)
	slots := []*slot{empty, full}
	defer b.dropSlots(slots)
	if b.cfg.scaleWarmup > 0 {
		sr.EmptyWarmup, sr.Warmup, sr.Checkpoint = b.warmSides(ctx, empty, full, callers, conns, b.cfg.scaleWarmup)
	}
	if full.err == nil {
		sr.WarmupExecutions = full.issued
		if full.issued > 0 {
			b.logf("  the preloaded tables hold about %s intents before the rounds: %s preloaded, %s first executions in the warm-up",
				groupDigits(int64(sr.Rows)+full.issued), groupDigits(int64(sr.Rows)), groupDigits(full.issued))
		}
	}
	// Both counts once the checkpointer has reported a checkpoint under
	// way, so that none is missed or put in the wrong place.
	ck0, waited0, ckErr := db.srv.settledCheckpointState(ctx)
	if waited0 >= time.Second {
		b.logf("  before the rounds: waited %.1f s for the checkpointer to report the checkpoint under way", waited0.Seconds())
	}
	b.rounds(ctx, slots, callers)
	if ck1, waited, err := db.srv.settledCheckpointState(ctx); err == nil && ckErr == nil {
		if sr.Checkpoint == nil {
			sr.Checkpoint = &checkpointRoom{}
		}
		sr.Checkpoint.InRounds = ck1.Begun - ck0.Begun
		sr.Checkpoint.SettledAfter = waited.Seconds()
		if waited >= time.Second {
			b.logf("  after the rounds: waited %.1f s for the checkpointer to report the checkpoint under way", waited.Seconds())
		}
		b.logf("  checkpoints begun during the rounds: %d", sr.Checkpoint.InRounds)
	}
	closeKept(slots)
	rows := []*result{b.pooled(ctx, empty, callers, conns), b.pooled(ctx, full, callers, conns)}
	for _, r := range rows {
		if r.Err == "" {
			r.Note = fmt.Sprintf("%.2f full-page images/op, %.1f blocks read/op", r.FPIPerOp, r.BlocksReadPerOp)
			if r.ServerCPUPerOp > 0 {
				// Which of the two sides' backends spent more, and where.
				r.Note += fmt.Sprintf("; backends per op: %.0f µs in the kernel, %.2f minor faults, %.0f µs waiting for a core",
					r.ServerSysCPUPerOp, r.ServerMinFltPerOp, r.ServerRunWaitPerOp)
			}
		}
	}
	if empty.err != nil || full.err != nil {
		return rows, fmt.Errorf("%s vs empty tables: %w", scaleName(sr.Rows), errors.Join(empty.err, full.err))
	}
	p := newPair(scaleName(sr.Rows)+" / 0 rows", callers, ratios(full, empty, false))
	sr.Pair = &p
	b.logf("  %s / 0 rows at %d callers: %s", scaleName(sr.Rows), callers, p.text(""))
	sr.Rounds = scaleRounds(empty, full)
	for i, r := range sr.Rounds {
		b.logf("  round %d: %s", i+1, r.text())
	}
	if t := byOrder(sr.Rounds); t != "" {
		b.logf("  %s", t)
	}
	// As autovacuum would have: the completions' old row versions are
	// dead, their space free for the next rows.
	if err := settle(ctx, empty.db); err != nil {
		return rows, err
	}
	var err error
	if sr.LiveSizes, err = measureSizes(ctx, empty.db); err != nil {
		return rows, err
	}
	b.logSizes("written by the executor", sr.LiveSizes)
	return rows, nil
}

// scaleRound is one round of the scale pair.
type scaleRound struct {
	PreloadedFirst bool    `json:"preloaded_first"`
	EmptyRate      float64 `json:"empty_ops_per_sec"`
	PreloadedRate  float64 `json:"preloaded_ops_per_sec"`
	// CPU per operation, µs: the benchmark process's and the side's
	// backends' (0 when the backends' could not be read).
	EmptyCPU     float64 `json:"empty_cpu_us_per_op"`
	PreloadedCPU float64 `json:"preloaded_cpu_us_per_op"`
	// Per operation, each side's backends' kernel time (µs) and blocks
	// read from outside shared buffers, and the full-page images logged
	// during its slice: what changes from round to round when the rounds
	// drift (after a checkpoint, as shared buffers fill).
	EmptySys       float64 `json:"empty_sys_us_per_op"`
	PreloadedSys   float64 `json:"preloaded_sys_us_per_op"`
	EmptyReads     float64 `json:"empty_reads_per_op"`
	PreloadedReads float64 `json:"preloaded_reads_per_op"`
	EmptyFPI       float64 `json:"empty_fpi_per_op"`
	PreloadedFPI   float64 `json:"preloaded_fpi_per_op"`
}

// scaleRounds pairs the two sides' slices round by round (nil when they
// do not pair up: a side failed).
func scaleRounds(empty, full *slot) []scaleRound {
	n := len(full.rates)
	for _, l := range []int{len(empty.rates), len(full.firsts), len(full.cpus), len(empty.cpus), len(full.figs), len(empty.figs)} {
		if l != n {
			return nil
		}
	}
	rs := make([]scaleRound, n)
	for i := range rs {
		e, f := empty.figs[i], full.figs[i]
		rs[i] = scaleRound{PreloadedFirst: full.firsts[i], EmptyRate: empty.rates[i], PreloadedRate: full.rates[i],
			EmptyCPU: empty.cpus[i], PreloadedCPU: full.cpus[i],
			EmptySys: e.Sys, PreloadedSys: f.Sys, EmptyReads: e.Reads, PreloadedReads: f.Reads, EmptyFPI: e.FPI, PreloadedFPI: f.FPI}
	}
	return rs
}

// ratio is the round's preloaded rate over its empty one; false when the
// empty side measured no rate.
func (r scaleRound) ratio() (float64, bool) {
	if r.EmptyRate <= 0 {
		return 0, false
	}
	return r.PreloadedRate / r.EmptyRate, true
}

// text is the round on one line: the ratio, then each side's rate and
// per-operation figures.
func (r scaleRound) text() string {
	order := "empty side first"
	if r.PreloadedFirst {
		order = "preloaded side first"
	}
	ratio, _ := r.ratio()
	return fmt.Sprintf("%.2f (%s); preloaded %.0f ops/s, %s; empty %.0f ops/s, %s", ratio, order,
		r.PreloadedRate, perOpText(r.PreloadedCPU, r.PreloadedSys, r.PreloadedReads, r.PreloadedFPI),
		r.EmptyRate, perOpText(r.EmptyCPU, r.EmptySys, r.EmptyReads, r.EmptyFPI))
}

func perOpText(cpu, sys, reads, fpi float64) string {
	return fmt.Sprintf("per op %s CPU (backends' kernel %.0f µs), %.2f blocks read, %.2f FPI", cpuText(cpu), sys, reads, fpi)
}

// byOrder splits the rounds' ratios by which side ran first: when the
// two halves' medians lie apart, the spread is the order's, not the
// tables'. Empty when either half has no round.
func byOrder(rs []scaleRound) string {
	var first, second []float64
	for _, r := range rs {
		x, ok := r.ratio()
		switch {
		case !ok:
		case r.PreloadedFirst:
			first = append(first, x)
		default:
			second = append(second, x)
		}
	}
	if len(first) == 0 || len(second) == 0 {
		return ""
	}
	_, m1, _ := quartiles(first)
	_, m2, _ := quartiles(second)
	return fmt.Sprintf("the same ratio by the rounds' order: %.2f (median of %d) when the preloaded side ran first, %.2f (of %d) when it ran second",
		m1, len(first), m2, len(second))
}

// warmChunk is how long each logged part of the warm-up runs.
const warmChunk = 10 * time.Second

// warmStep is one part of a warm-up.
type warmStep struct {
	Seconds  float64 `json:"seconds"` // since the warm-up began, at the step's end
	Rate     float64 `json:"ops_per_sec"`
	FPIPerOp float64 `json:"fpi_per_op"`
	WALPerOp float64 `json:"wal_bytes_per_op"`
	// Past: a part run after --scale-warmup because the one before still
	// logged many whole pages (warmSides).
	Past bool `json:"past_warmup,omitempty"`
}

// scaleSlots returns the scale pair's two sides: first executions on
// empty tables (a database of their own) and on db's preloaded ones.
//
// Each side keeps one pool for all its slices, as a deployment does:
// opened afresh for every slice, 32 new backends a second spent on the
// preloaded tables what a long-lived pool does not (the warm-up, one pool
// for its whole length, ran 2,300 to 2,650 first executions per second on
// 10M rows; slices with fresh pools, 782 to 914, against 1,933 to 1,957
// on empty tables; 2026-12-02), which measured connection churn more than
// table size.
func (b *bench) scaleSlots(ctx context.Context, db *database, rows int) (empty, full *slot) {
	empty = b.newSlot(ctx, b.rsFirstWorkloadOver(scaleName(0), func(ctx context.Context, db *database) error {
		if err := migrated(ctx, db); err != nil {
			return err
		}
		return settle(ctx, db)
	}, nil, preloadTenants), nil)
	full = b.newSlot(ctx, b.rsFirstWorkloadOver(scaleName(rows), migrated, nil, preloadTenants), db)
	empty.keep, full.keep = true, true
	return empty, full
}

// emptyWarmup is the longest the empty side's pool is warmed for.
const emptyWarmup = 5 * time.Second

// warmSides runs first executions on both sides before their paired
// rounds, unmeasured by them, on the pools the rounds then keep, and
// starts both sides' counters after it; it returns each side's steps.
//
// The preloaded side runs for d: the settle before it ends with a
// checkpoint, after which the first change to each page of the
// random-key indexes logs the whole page (a full-page image), and at 10M
// rows the pages those changes find are mostly not in shared buffers.
// Each part's rate and full-page images per operation say how long that
// lasts.
//
// Both sides' rounds run on backends that have already run: a backend
// maps each page of shared memory it touches once, on its first touch.
// On a host where those faults are dear (2026-12-03, a thirteenth host)
// a first execution on 1M rows cost its backends 291 to 304 µs with a
// pool opened after the warm-up and 187 to 195 with the warm-up's,
// against 180 to 205 on empty tables; with only the preloaded side's
// pool warmed, the empty side's new backends were the slow ones (231
// against 168 µs): a pool's age, not the table's size, either way. The
// empty side's tables are small, so its backends map what they touch in
// a few seconds (emptyWarmup, or d when shorter), which keeps them
// nearly empty (about 10,000 rows at 2,000 executions a second; its
// slices add as many).
//
// A warm-up of d is a length, where what the rounds should begin past
// is a state: the preload's checkpoint's burst of whole pages lasts until
// the first executions have touched most of the random-key indexes'
// pages, which takes a slower host longer. On the thirty-third host
// (2026-12-07, about 4,000 first executions a second on 10M rows) the
// 120 s of the 10M command still logged 0.17 full-page images per
// execution in its last part, and the rounds 0.14 on the preloaded side
// (2,058 WAL bytes per execution against 1,573 on the empty one). So
// when the last part logs afterCheckpointFPI or more, the preloaded side
// goes on, in parts of warmChunk, until one logs fewer (at most d more),
// as after a forced checkpoint (roomForRounds): the rounds begin past the
// burst on every host, and the parts past d are reported as such (there,
// 70 and 80 s more, and 0.03 and 0.04 in the rounds).
//
// Then it makes room for the rounds before the server's next checkpoint
// (roomForRounds).
func (b *bench) warmSides(ctx context.Context, empty, full *slot, callers, conns int, d time.Duration) (emptySteps, fullSteps []warmStep, room *checkpointRoom) {
	// The empty side first: its backends' flush timers run out during the
	// longer warm-up of the other.
	for _, w := range []struct {
		s     *slot
		d     time.Duration
		steps *[]warmStep
	}{{empty, min(d, emptyWarmup), &emptySteps}, {full, d, &fullSteps}} {
		if w.s.err != nil {
			continue
		}
		if *w.steps, w.s.err = b.warm(ctx, w.s, callers, conns, w.d, warmChunk, 0, "warming"); w.s.err != nil {
			w.s.err = fmt.Errorf("warm-up: %w", w.s.err)
		}
	}
	if n := len(fullSteps); full.err == nil && n > 0 && fullSteps[n-1].FPIPerOp >= afterCheckpointFPI {
		more, err := b.warm(ctx, full, callers, conns, d, warmChunk, afterCheckpointFPI, "still logging whole pages,")
		for _, m := range more {
			m.Seconds += fullSteps[n-1].Seconds
			m.Past = true
			fullSteps = append(fullSteps, m)
		}
		if err != nil {
			full.err = fmt.Errorf("warm-up: %w", err)
		}
	}
	if empty.err == nil && full.err == nil {
		var err error
		if room, err = b.roomForRounds(ctx, full, callers, conns, d, emptySteps, fullSteps); err != nil {
			full.err = fmt.Errorf("before the rounds: %w", err)
		}
	}
	for _, s := range []*slot{empty, full} {
		if s.err == nil {
			s.err = b.countFrom(ctx, s) // the rounds count from here
		}
	}
	return emptySteps, fullSteps, room
}

// roomForRounds checks that the rounds can run before the server's next
// checkpoint begins (checkpointState), at the rate and WAL per operation
// of the warm-up's last part on either side; when they cannot, it runs a
// CHECKPOINT now and first executions on the preloaded side until they
// log few whole pages again (at most d), so that the rounds begin at
// the same point of the checkpoint cycle in every run, past the
// checkpoint's burst of whole pages, which is reported on its own. With
// the 10M-row point's server settings (checkpoint_timeout 30min,
// max_wal_size 16GB) there is room and nothing is forced. On the shared
// server's 1GB the burst itself takes about 370 MB of the 540 MB that
// trigger the next checkpoint, and the rounds about 190 MB more: in three
// runs on 2026-12-06 the next one began during the rounds all the same
// (full-page images per execution over the rounds: 0.11, 0.08 and 0.25
// on 1M rows against 0.10, 0.10 and 0.03 on empty ones, where two runs of
// three without this read 0.66 and 0.67 against 0.03 and 0.04); in
// three full runs after, in the two whose burst left 161 and 171 MB, and
// not in the one it left 200 (0.01 and 0.03 there). The report counts it.
// Since the warm-up's default became 120 s (1f6608a) its own first
// executions grow 1M preloaded intents to about 1.7M at 4,000 to 5,000
// a second, and the burst, which logs each page of the grown key indexes
// whole once, takes about 480 MB: on the forty-first host (2026-12-07)
// it left 60 to 70 MB where the rounds needed 118 to 142, and a
// checkpoint began in the rounds of all three full runs. The 10M
// command's max_wal_size leaves room.
func (b *bench) roomForRounds(ctx context.Context, full *slot, callers, conns int, d time.Duration, emptySteps, fullSteps []warmStep) (*checkpointRoom, error) {
	need := time.Duration(b.cfg.rounds) * 2 * (b.cfg.slice + b.cfg.sliceWarmup)
	var walPerSec float64
	for _, steps := range [][]warmStep{emptySteps, fullSteps} {
		if n := len(steps); n > 0 {
			walPerSec = max(walPerSec, steps[n-1].Rate*steps[n-1].WALPerOp)
		}
	}
	r := &checkpointRoom{NeedWAL: walPerSec * need.Seconds(), NeedSeconds: need.Seconds()}
	st, err := full.db.srv.checkpointState(ctx)
	if err != nil {
		// A server that will not say (a role without pg_read_all_settings,
		// say) is measured as before, its rounds wherever they fall.
		b.logf("  before the rounds: %v; no room made for the rounds", err)
		return nil, nil
	}
	r.WALLeft, r.TimeLeft = st.WALLeft, st.TimeLeft.Seconds()
	if st.roomFor(r.NeedWAL, need) {
		b.logf("  before the rounds: %s", r.before())
		return r, nil
	}
	r.Forced = true
	if err := full.db.srv.checkpoint(ctx); err != nil {
		return r, fmt.Errorf("CHECKPOINT: %w", err)
	}
	if r.After, err = b.warm(ctx, full, callers, conns, d, afterCheckpointChunk, afterCheckpointFPI, "after a CHECKPOINT,"); err != nil {
		return r, err
	}
	if st, err := full.db.srv.checkpointState(ctx); err == nil {
		r.AfterWALLeft = st.WALLeft
	}
	b.logf("  before the rounds: %s", r.before())
	return r, nil
}

// warm runs first executions on s for d, in parts of warmChunk, each
// logged. A slot that keeps its pools keeps the warm-up's: its rounds run
// on the backends the warm-up ran on.
//
// After a checkpoint it runs in parts of chunk until one logs fewer than
// stopFPI full-page images per operation (0: the whole of d), on the
// pool a kept slot already holds.
func (b *bench) warm(ctx context.Context, s *slot, callers, conns int, d, chunk time.Duration, stopFPI float64, label string) ([]warmStep, error) {
	op := s.op
	if op == nil {
		var stop func()
		var err error
		if op, stop, err = s.w.start(ctx, s.db, conns); err != nil {
			return nil, err
		}
		if s.keep {
			s.op, s.stop = op, stop
		} else {
			defer stop()
		}
	}
	var steps []warmStep
	began := time.Now()
	for left := d; left > 0 && ctx.Err() == nil; left -= chunk {
		k0, err := s.db.counters(ctx)
		if err != nil {
			return steps, err
		}
		base := s.issued
		sm := measure(ctx, callers, 0, min(left, chunk), func(ctx context.Context, w int, i int64) (toolSpan, error) {
			return op(ctx, w, base+i)
		})
		s.issued += sm.Total
		if sm.Err != nil {
			return steps, sm.Err
		}
		k1, err := s.db.counters(ctx)
		if err != nil {
			return steps, err
		}
		n := float64(max(sm.Total, 1))
		st := warmStep{Seconds: time.Since(began).Seconds(), Rate: sm.rate(), FPIPerOp: float64(k1.fpi-k0.fpi) / n, WALPerOp: float64(k1.wal-k0.wal) / n}
		steps = append(steps, st)
		b.logf("  %s %s: %3.0fs, %5.0f ops/s, %.2f full-page images/op, %5.0f WAL B/op", label, s.w.name, st.Seconds, st.Rate, st.FPIPerOp, st.WALPerOp)
		if stopFPI > 0 && st.FPIPerOp < stopFPI {
			break
		}
	}
	return steps, nil
}

func (b *bench) logSizes(what string, s *ledgerSizes) {
	for _, t := range []string{"intents", "actions"} {
		var parts []string
		for _, r := range s.Rels {
			if r.Table == t && (r.Kind != "index" || r.Bytes >= 1<<20) {
				parts = append(parts, fmt.Sprintf("%s %.0f", r.Name, s.perMillion(r.Bytes)))
			}
		}
		b.logf("  sizes %s (%s intents), MB per 1M intents: %s", what, groupDigits(s.Intents), strings.Join(parts, ", "))
	}
}

// count prints 1000000 as 1M, 20000 as 20k.
func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
