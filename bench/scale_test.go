package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A kept scale database is preloaded once, reused by the next run that
// names it (refused when it holds another size), and gets back before
// each measurement the expired rows a purge deleted.
func TestScaleDatabaseKept(t *testing.T) {
	if !strings.Contains(preloadIntentRows, "g % "+strconv.Itoa(preloadTenants)+")") || !strings.Contains(preloadActionRows, "g % "+strconv.Itoa(preloadTenants)+")") {
		t.Fatal("the preload's SQL and preloadTenants disagree")
	}
	if testing.Short() {
		t.Skip("needs PostgreSQL; -short skips it")
	}
	b, log, ctx, db, sr, m := preloadedBench(t, "bench_scale_test_", "--scale-rows", "3000", "--purge-rows", "500",
		"--purge-callers", "2", "--slice", "100ms", "--purge-rounds", "2", "--purge-settings", "50/5ms")
	name, cfg := db.name, b.cfg
	if sr.Reused || m.Rows != 3000 || m.Expired != 500 || m.Present != 500 || sr.LoadSeconds <= 0 {
		t.Fatalf("first open: %+v %+v", sr, m)
	}
	expiredNow := func() (expired, all int64) {
		p, err := db.pool(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		retention, err := purgeRetention(ctx, p, m)
		if err != nil {
			t.Fatal(err)
		}
		err = p.QueryRow(ctx, `SELECT count(*) FILTER (WHERE finished_at < now() - $1::bigint * interval '1 microsecond'), count(*) FROM actions`,
			retention.Microseconds()).Scan(&expired, &all)
		if err != nil {
			t.Fatal(err)
		}
		return expired, all
	}
	if e, n := expiredNow(); e != 500 || n != 3000 {
		t.Fatalf("after the preload: %d expired of %d", e, n)
	}
	// The random-key indexes are built as full as the executor leaves them.
	func() {
		p, err := db.pool(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		for name, fill := range keyFill {
			var opts []string
			if err := p.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = $1::regclass`, name).Scan(&opts); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if want := "fillfactor=" + strconv.Itoa(fill); !slices.Contains(opts, want) {
				t.Errorf("%s built with %v, want %s", name, opts, want)
			}
		}
	}()
	run, rows := b.purgePoint(ctx, db, m, cfg.purgeSettings[0])
	if run.Err != "" || run.Actions != 500 || len(rows) != 2 || m.Present != 0 || m.Dirty {
		t.Fatalf("purge: %+v, meta %+v\n%s", run, m, log.String())
	}
	if e, _ := expiredNow(); e != 0 {
		t.Fatalf("%d expired rows after the purge", e)
	}

	// The next run: the same database, the rows back.
	sr2 := &scaleResult{}
	db2, m2, err := b.scaleDatabase(ctx, sr2)
	if err != nil {
		t.Fatal(err)
	}
	if !sr2.Reused || m2.Present != 0 || db2.name != name {
		t.Fatalf("second open: %+v %+v", sr2, m2)
	}
	took, err := restoreExpired(ctx, db2, m2, b.logf)
	if err != nil || took <= 0 || m2.Present != 500 || m2.Gen != 1 {
		t.Fatalf("restore: %v %v %+v", took, err, m2)
	}
	// The purge point's own executions are gone too.
	if e, n := expiredNow(); e != 500 || n != 3000 {
		t.Fatalf("after the restore: %d expired of %d", e, n)
	}
	if again, _ := readMeta(ctx, db2); again == nil || again.Present != 500 || again.Gen != 1 {
		t.Fatalf("stored meta: %+v", again)
	}

	// Another size is refused, not reloaded.
	b.cfg.scaleRows = 4000
	if _, _, err := b.scaleDatabase(ctx, &scaleResult{}); err == nil || !strings.Contains(err.Error(), "holds a preload of 3000 rows") {
		t.Fatalf("another size: %v", err)
	}
}

// Both sides of the scale pair run their rounds on the backends their
// warm-ups ran on (a new backend maps every page of shared memory it
// touches again, which a long-lived pool does not pay), and count from
// after those backends flushed the warm-ups' statistics.
func TestScaleRoundsKeepTheWarmUpPools(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL; -short skips it")
	}
	b, log, ctx, db, _, _ := preloadedBench(t, "bench_scale_warm_", "--scale-rows", "2000", "--slice", "100ms")
	cfg := b.cfg
	empty, full := scaleSlotsFor(t, b, ctx, db, 2000)
	slots := []*slot{empty, full}
	// An autovacuum worker would move the counters too, whenever it
	// likes: what is checked here is the pools' backends.
	for _, s := range slots {
		p, err := s.db.pool(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Exec(ctx, `ALTER TABLE intents SET (autovacuum_enabled = off); ALTER TABLE actions SET (autovacuum_enabled = off)`)
		p.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Longer than PostgreSQL's shortest flush interval (a second), so that
	// the backends hold statistics they have not flushed when it ends.
	emptySteps, fullSteps, room := b.warmSides(ctx, empty, full, 2, 2, 3*time.Second)
	if empty.err != nil || full.err != nil || len(emptySteps) != 1 || len(fullSteps) == 0 || fullSteps[0].Past || emptySteps[0].Rate <= 0 || fullSteps[0].Rate <= 0 {
		t.Fatalf("warm-up: %+v %+v, %v %v\n%s", emptySteps, fullSteps, empty.err, full.err, log.String())
	}
	if room == nil || room.NeedWAL <= 0 || room.NeedSeconds <= 0 {
		t.Fatalf("no room made for the rounds: %+v\n%s", room, log.String())
	}
	warmed := make([][]int, len(slots))
	for i, s := range slots {
		if warmed[i] = b.backends(ctx, s.db); s.stop == nil || len(warmed[i]) == 0 {
			t.Fatalf("%s: the warm-up closed its pool (%d backends left)", s.w.name, len(warmed[i]))
		}
	}
	// Nothing the warm-ups ran reaches the counters after they started:
	// an idle backend flushes its statistics within statsIdleFlush.
	time.Sleep(statsIdleFlush)
	for _, s := range slots {
		if c, err := s.db.counters(ctx); err != nil || c.commits != -s.commits || c.blksHit != -s.blksHit {
			t.Fatalf("%s: counters moved after the rounds' start: %+v against %d commits, %d hits (%v)", s.w.name, c, -s.commits, -s.blksHit, err)
		}
	}
	b.rounds(ctx, slots, 2)
	for i, s := range slots {
		if s.err != nil || len(s.rates) != cfg.rounds {
			t.Fatalf("%s: rounds: %v, %d rates", s.w.name, s.err, len(s.rates))
		}
		after := b.backends(ctx, s.db)
		for _, pid := range warmed[i] {
			if !slices.Contains(after, pid) {
				t.Errorf("%s: backend %d of the warm-up is gone after the rounds (warm-up %v, after %v)", s.w.name, pid, warmed[i], after)
			}
		}
	}
}

// A warm-up that ends inside a checkpoint's burst of whole pages goes on
// past its length, at most as long again, until a part logs few; the
// parts past it say so.
func TestWarmUpGoesPastTheBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL; -short skips it")
	}
	b, log, ctx, db, _, _ := preloadedBench(t, "bench_scale_burst_", "--scale-rows", "50000", "--slice", "100ms")
	empty, full := scaleSlotsFor(t, b, ctx, db, 50000)
	// First executions after a checkpoint on the key indexes of 50,000
	// rows (thousands of pages) log a whole page for most of them for a
	// few seconds. The parts are longer than PostgreSQL's shortest flush
	// interval of its WAL statistics (a second), which count the whole
	// pages.
	if err := db.srv.checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	const d = 3 * time.Second
	_, steps, _ := b.warmSides(ctx, empty, full, 2, 2, d)
	if full.err != nil || len(steps) < 2 || steps[0].Past || steps[0].FPIPerOp < afterCheckpointFPI {
		t.Fatalf("warm-up %+v, %v\n%s", steps, full.err, log.String())
	}
	for i, st := range steps[1:] {
		if !st.Past || st.Seconds <= steps[i].Seconds || st.Rate <= 0 {
			t.Fatalf("part %d past the warm-up: %+v after %+v", i+1, st, steps[i])
		}
		if i+1 < len(steps)-1 && st.FPIPerOp < afterCheckpointFPI {
			t.Errorf("went on after a part under %.2f FPI/op: %+v", afterCheckpointFPI, steps)
		}
	}
	if last := steps[len(steps)-1]; last.Seconds-steps[0].Seconds > (d + d/2).Seconds() {
		t.Errorf("went on for %.1f s past a warm-up of %s", last.Seconds-steps[0].Seconds, d)
	}
	if txt := warmText(steps); strings.Count(txt, "past --scale-warmup") != 1 || !strings.Contains(log.String(), "still logging whole pages,") {
		t.Errorf("report: %s\nlog:\n%s", txt, log.String())
	}
}

// Rounds that would outlast the server's next checkpoint get a CHECKPOINT
// before them, and the preloaded side runs on the pool the rounds keep
// until it logs few whole pages again.
func TestRoomForRoundsForcesACheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL; -short skips it")
	}
	b, log, ctx, db, _, _ := preloadedBench(t, "bench_scale_ckpt_", "--scale-rows", "2000", "--slice", "100ms")
	_, full := scaleSlotsFor(t, b, ctx, db, 2000)
	before, err := db.srv.checkpointState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before.TimeLeft <= 0 || before.TimeLeft > time.Hour || before.WALLeft > 1<<40 {
		t.Fatalf("checkpoint state: %+v", before)
	}
	// More rounds than the time left before checkpoint_timeout holds.
	b.cfg.rounds = int(before.TimeLeft/(2*(b.cfg.slice+b.cfg.sliceWarmup))) + 1
	room, err := b.roomForRounds(ctx, full, 2, 2, 10*time.Second, nil, nil)
	if err != nil || room == nil || !room.Forced || len(room.After) == 0 || room.After[0].Rate <= 0 {
		t.Fatalf("room %+v, %v\n%s", room, err, log.String())
	}
	if last := room.After[len(room.After)-1]; last.FPIPerOp >= afterCheckpointFPI && last.Seconds < 10 {
		t.Errorf("stopped at %+v, before the full-page images fell under %.2f/op or the time ran out", last, afterCheckpointFPI)
	}
	after, err := db.srv.checkpointState(ctx)
	if err != nil || after.Begun <= before.Begun {
		t.Fatalf("no checkpoint began: %+v then %+v (%v)", before, after, err)
	}
	if full.op == nil || full.stop == nil {
		t.Error("the preloaded side's pool was not kept for the rounds")
	}
	if !strings.Contains(room.text(), "so a CHECKPOINT ran before them") {
		t.Errorf("report line: %s", room.text())
	}
}

// The counts of checkpoints begun are read once the checkpointer is idle
// or napping: on a server where nothing else is running one, at once.
func TestSettledCheckpointState(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL; -short skips it")
	}
	t.Parallel()
	cfg, err := parseFlags([]string{"--quick"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	srv := &server{url: cfg.dbURL}
	ctx, cancel := context.WithTimeout(context.Background(), 2*checkpointSettle)
	defer cancel()
	if err := srv.checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	st, waited, err := srv.settledCheckpointState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if waited >= checkpointSettle {
		t.Errorf("waited the whole %s after a CHECKPOINT: the checkpointer never looked idle", checkpointSettle)
	}
	if st.Begun <= 0 || st.TimeLeft <= 0 {
		t.Errorf("state %+v", st)
	}
	c, err := srv.admin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var events []string
	rows, err := c.Query(ctx, `SELECT coalesce(wait_event, 'none') FROM pg_stat_activity WHERE backend_type = 'checkpointer'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var e string
		if err := rows.Scan(&e); err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	if rows.Err() != nil || len(events) != 1 {
		t.Fatalf("checkpointer's wait events %v, %v: the quiet test reads no process", events, rows.Err())
	}
}

func TestWaitUntil(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	calls := 0
	waited, err := waitUntil(ctx, time.Minute, time.Millisecond, func(context.Context) (bool, error) {
		calls++
		return calls == 3, nil
	})
	if err != nil || calls != 3 || waited >= time.Minute {
		t.Errorf("quiet at the third ask: %d asks, waited %s, %v", calls, waited, err)
	}
	calls = 0
	waited, err = waitUntil(ctx, 20*time.Millisecond, time.Millisecond, func(context.Context) (bool, error) {
		calls++
		return false, nil
	})
	if err != nil || waited < 20*time.Millisecond || calls < 2 {
		t.Errorf("never quiet: %d asks, waited %s, %v; want the bound reached without an error", calls, waited, err)
	}
	boom := errors.New("boom")
	if _, err := waitUntil(ctx, time.Minute, time.Millisecond, func(context.Context) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("error %v, want %v", err, boom)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := waitUntil(cctx, time.Minute, time.Millisecond, func(context.Context) (bool, error) { return false, nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	r := checkpointRoom{NeedWAL: 142e6, NeedSeconds: 15, WALLeft: 17e6, TimeLeft: 263, InRounds: 1, SettledAfter: 7.8}
	if txt := r.text(); !strings.Contains(txt, "1 checkpoint(s) began during the rounds all the same (counted 8 s after them, once the checkpointer reported it)") {
		t.Errorf("report line: %s", txt)
	}
	// The log's line before the rounds cannot know what they will meet.
	if txt := r.before(); strings.Contains(txt, "during the rounds") || !strings.HasPrefix(r.text(), txt) {
		t.Errorf("before the rounds: %s", txt)
	}
}

func TestCheckpointRoomFor(t *testing.T) {
	t.Parallel()
	st := checkpointState{WALLeft: 300e6, TimeLeft: 60 * time.Second}
	for _, c := range []struct {
		wal  float64
		d    time.Duration
		want bool
	}{
		{100e6, 20 * time.Second, true},
		{250e6, 20 * time.Second, false}, // 1.5 x 250 MB > 300 MB
		{100e6, 45 * time.Second, false}, // 1.5 x 45 s > 60 s
		{0, 0, true},
	} {
		if got := st.roomFor(c.wal, c.d); got != c.want {
			t.Errorf("roomFor(%.0f, %v) = %v, want %v", c.wal, c.d, got, c.want)
		}
	}
	if got := (checkpointState{WALLeft: -5e6, TimeLeft: -time.Second}).roomFor(0, 0); got {
		t.Error("a checkpoint overdue leaves room")
	}
}

// scaleSlotsFor is b.scaleSlots, closed and dropped when the test ends.
func scaleSlotsFor(t *testing.T, b *bench, ctx context.Context, db *database, rows int) (empty, full *slot) {
	t.Helper()
	empty, full = b.scaleSlots(ctx, db, rows)
	slots := []*slot{empty, full}
	t.Cleanup(func() { closeKept(slots); b.dropSlots(slots) })
	if empty.err != nil || full.err != nil {
		t.Fatal(empty.err, full.err)
	}
	return empty, full
}

// preloadedBench is a --quick bench with args, its scale database (named
// prefix and a random suffix) preloaded; the database is dropped when the
// test ends.
func preloadedBench(t *testing.T, prefix string, args ...string) (*bench, *strings.Builder, context.Context, *database, *scaleResult, *preloadMeta) {
	t.Helper()
	cfg, err := parseFlags(append([]string{"--quick", "--scale-db", prefix + randHex(4)}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	log := &strings.Builder{}
	b := &bench{cfg: cfg, srv: &server{url: cfg.dbURL}, log: log}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	sr := &scaleResult{}
	db, m, err := b.scaleDatabase(ctx, sr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.drop(db) })
	return b, log, ctx, db, sr, m
}

// The scale pair's rounds keep which side ran first, and byOrder splits
// the ratios by it; sides that do not pair up give no rounds.
func TestScaleRoundsByOrder(t *testing.T) {
	t.Parallel()
	figs := func(reads float64) []sliceFigures {
		return []sliceFigures{{Sys: 40, Reads: reads, FPI: 0.5}, {Sys: 41, Reads: reads}, {Sys: 42, Reads: reads}, {Sys: 43, Reads: reads, FPI: 0.01}}
	}
	empty := &slot{rates: []float64{100, 100, 100, 100}, cpus: []float64{1, 1, 1, 1}, firsts: []bool{true, false, false, true}, figs: figs(0.25)}
	full := &slot{rates: []float64{80, 130, 120, 70}, cpus: []float64{2, 2, 2, 2}, firsts: []bool{false, true, true, false}, figs: figs(1.5)}
	rs := scaleRounds(empty, full)
	if len(rs) != 4 || !rs[1].PreloadedFirst || rs[0].PreloadedFirst || rs[3].PreloadedRate != 70 || rs[2].EmptyCPU != 1 ||
		rs[2].PreloadedReads != 1.5 || rs[2].EmptyReads != 0.25 || rs[3].EmptySys != 43 || rs[0].PreloadedFPI != 0.5 {
		t.Fatalf("rounds: %+v", rs)
	}
	var sb strings.Builder
	roundsTable(&sb, rs)
	for _, row := range []string{"| 1 | empty | 0.80 | 80 | 2 µs | 40 | 1.50 | 0.50 | 100 | 1 µs | 40 | 0.25 | 0.50 |", "| 2 | preloaded | 1.30 |"} {
		if !strings.Contains(sb.String(), row) {
			t.Errorf("rounds table lacks %q:\n%s", row, sb.String())
		}
	}
	if got, want := rs[1].text(), "1.30 (preloaded side first); preloaded 130 ops/s, per op 2 µs CPU (backends' kernel 41 µs), 1.50 blocks read, 0.00 FPI"; !strings.HasPrefix(got, want) {
		t.Errorf("round text %q, want it to begin %q", got, want)
	}
	got := byOrder(rs)
	want := "1.25 (median of 2) when the preloaded side ran first, 0.75 (of 2) when it ran second"
	if !strings.HasSuffix(got, want) {
		t.Errorf("byOrder = %q, want it to end %q", got, want)
	}
	if got := byOrder(rs[1:3]); got != "" {
		t.Errorf("one order only: %q", got)
	}
	want = "allows 0.50 (IQR 0.50–0.50, 4 rounds) (a round's median: 2 µs against 1, its backends' kernel part 42 against 42)"
	if got := cpuBound(rs); !strings.HasSuffix(got, want) {
		t.Errorf("cpuBound = %q, want it to end %q", got, want)
	}
	rs[2].EmptyCPU = 0
	if got := cpuBound(rs); got != "" {
		t.Errorf("cpuBound with a round's CPU unknown = %q", got)
	}
	full.figs = full.figs[:3]
	if rs := scaleRounds(empty, full); rs != nil {
		t.Errorf("unpaired figures gave %+v", rs)
	}
	full.figs, full.rates = figs(1.5), full.rates[:3]
	if rs := scaleRounds(empty, full); rs != nil {
		t.Errorf("unpaired sides gave %+v", rs)
	}
}

// A slice's blocks read come from /proc's rchar, which counts what a
// process reads through the kernel as it happens: this process reading a
// file of 16 blocks shows at least as much, and a slice's figures divide
// it by 8 KB and by the operations.
func TestProcOfCountsReads(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "blocks")
	if err := os.WriteFile(path, make([]byte, 16*8192), 0o600); err != nil {
		t.Fatal(err)
	}
	p0, ok := procOf([]int{os.Getpid()})
	if !ok {
		t.Fatal("procOf could not read this process's /proc")
	}
	if _, err := os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	p1, _ := procOf([]int{os.Getpid()})
	if d := p1.sub(p0).read; d < 16*8192 {
		t.Errorf("read %d bytes, want at least %d", d, 16*8192)
	}
	d := sliceData{sm: &sample{Total: 4}, fpi: 2, serverKnown: true, server: procTimes{sys: 200 * time.Microsecond, read: 16 * 8192}}
	if f := d.figures(); f != (sliceFigures{Sys: 50, Reads: 4, FPI: 0.5}) {
		t.Errorf("figures %+v", f)
	}
}
