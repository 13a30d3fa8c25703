package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// On a shared machine the same point moves by tens of per cent from one
// minute to the next, so two systems measured a minute apart are compared
// on two different machines. A level's workloads therefore run in short
// slices, one workload at a time, all of them once per round, in an order
// that changes from round to round; every comparison is the median of the
// ratios of slices of the same round, with the interquartile range of
// those ratios beside it. A ratio whose spread is too wide says so instead
// of giving a verdict.

// maxSpread is the widest interquartile range, as a fraction of the median,
// at which a paired ratio still gives a verdict.
const maxSpread = 0.20

// slot is one workload of a level's rotation: started once, measured in
// every round, stopped at the end.
type slot struct {
	w   workload
	db  *database
	op  opFunc // the current slice's
	err error
	// issued is how many operations earlier slices issued: a slice's i
	// starts there, so that no two slices run one operation (a first
	// execution's intent) twice.
	issued int64

	samples []*sample
	rates   []float64 // per round, ops/s
	// cpus is each round's CPU time per operation issued, µs: the
	// process's and the backends' together (0 when the backends' could not
	// be read). On a machine whose CPU is what runs out, two workloads'
	// rates stand in the inverse ratio of these.
	cpus []float64
	// figs is each round's kernel CPU, reads and full-page images per
	// operation (zero where the backends could not be read).
	figs []sliceFigures
	p50s []float64 // per round, ms
	// added99s is each round's p99 of added latency (latency minus the
	// time in the tool), ms.
	added99s []float64
	wal      int64 // server-wide WAL bytes written during the slices
	fpi      int64
	total    int64 // operations issued, warm-ups included
	client   time.Duration
	// server is what /proc says of the database's backends: their CPU
	// time, its kernel part, their faults and run-queue wait (procTimes).
	server procTimes
	// serverKnown: the backends' CPU could be read (/proc of a local server).
	serverKnown bool
	// machine is the machine's CPU time over the slices (for steal).
	machine machineTicks
	// commits, blksRead and blksHit start at minus the database's counters
	// when the slot was prepared; pooled adds the counters at the end.
	commits, blksRead, blksHit int64
	// stmts is pg_stat_statements' totals for the database when the slot
	// was prepared (nil when the server does not have it loaded).
	stmts map[string]stmtStat
	// shared: db is not the slot's own (see newSlot). mixed: other work
	// runs on db beside the slot's, so its per-database counters are not
	// the slot's and its row leaves them out.
	shared, mixed bool
	// keep: the workload's pools stay open from the slot's first slice to
	// closeKept, as a deployment's pool does, instead of opening for each
	// slice (see measureSlice). stop closes them.
	keep bool
	stop func()
	// firsts holds, per slice added by rounds, whether it ran first in
	// its round.
	firsts []bool
}

// closeKept closes the pools of slots that keep theirs open.
func closeKept(slots []*slot) {
	for _, s := range slots {
		if s.stop != nil {
			s.stop()
			s.stop, s.op = nil, nil
		}
	}
}

// pairStat is one paired comparison at one level.
type pairStat struct {
	Name    string    `json:"name"` // "retrysafe first execution / floor"
	Callers int       `json:"callers"`
	Ratios  []float64 `json:"ratios"` // one per round
	Median  float64   `json:"median"`
	Q1      float64   `json:"q1"`
	Q3      float64   `json:"q3"`
	// Stable: (Q3 - Q1) / Median <= maxSpread.
	Stable bool `json:"stable"`
}

func (p pairStat) spread() float64 {
	if p.Median == 0 {
		return math.Inf(1)
	}
	return (p.Q3 - p.Q1) / p.Median
}

// text is "0.62 (IQR 0.58-0.66)", with "unstable" when the spread is too
// wide for a verdict.
func (p pairStat) text(unit string) string {
	s := fmt.Sprintf("%.2f%s (IQR %.2f–%.2f, %d rounds)", p.Median, unit, p.Q1, p.Q3, len(p.Ratios))
	if !p.Stable {
		s += fmt.Sprintf(", unstable: spread %.0f %%", 100*p.spread())
	}
	return s
}

// quartiles returns the median and the first and third quartiles of xs
// (linear interpolation between order statistics).
func quartiles(xs []float64) (q1, med, q3 float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	at := func(p float64) float64 {
		pos := p * float64(len(s)-1)
		lo := int(math.Floor(pos))
		hi := min(lo+1, len(s)-1)
		return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
	}
	return at(0.25), at(0.5), at(0.75)
}

func newPair(name string, callers int, ratios []float64) pairStat {
	p := pairStat{Name: name, Callers: callers, Ratios: ratios}
	p.Q1, p.Median, p.Q3 = quartiles(ratios)
	p.Stable = len(ratios) >= 3 && p.spread() <= maxSpread
	return p
}

// roundOrder is the order of round r: a different shuffle each round, so
// that no workload always follows the same one or always runs first. Two
// workloads (the scale pair, a purge and its held side) alternate instead,
// the first round's order drawn from seed: shuffled, one of them ran first
// in five or six rounds of six in one run of five, and a pair's median
// moves with the order when something the rounds do not control (a
// checkpoint, the preloaded side's reads) falls in the second slice of a
// round; alternating gives each side the first place in half the rounds.
func roundOrder(n, r int, seed uint64) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	if n == 2 {
		if (seed+uint64(r))%2 == 1 {
			order[0], order[1] = 1, 0
		}
		return order
	}
	rng := rand.New(rand.NewPCG(seed, uint64(r)))
	rng.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
	return order
}

// rotate measures ws at callers in cfg.rounds rounds of one slice each and
// returns a pooled row per workload (in ws's order) and the slots, whose
// per-round rates the paired ratios are made of.
func (b *bench) rotate(ctx context.Context, ws []workload, callers int) ([]*result, []*slot) {
	slots := make([]*slot, len(ws))
	for i, w := range ws {
		slots[i] = b.newSlot(ctx, w, nil)
		slots[i].keep = b.cfg.keepPools
	}
	defer b.dropSlots(slots)
	b.rounds(ctx, slots, callers)
	closeKept(slots)
	conns := min(callers, b.cfg.maxConns)
	out := make([]*result, len(slots))
	for i, s := range slots {
		out[i] = b.pooled(ctx, s, callers, conns)
	}
	return out, slots
}

// newSlot prepares w's slot: on a database of its own, created and
// prepared here, or on db when it is given (a database that outlives the
// slot, which dropSlots leaves alone). A failure is kept in the slot's err.
func (b *bench) newSlot(ctx context.Context, w workload, db *database) *slot {
	s := &slot{w: w, db: db, shared: db != nil}
	if db == nil {
		if s.db, s.err = b.srv.create(ctx, w.system); s.err != nil {
			return s
		}
		if w.prep != nil {
			if err := w.prep(ctx, s.db); err != nil {
				s.err = fmt.Errorf("prepare: %w", err)
				return s
			}
		}
	}
	s.err = b.countFrom(ctx, s)
	return s
}

// countFrom starts s's per-database counters (and its statements, when
// pg_stat_statements is loaded) from now, once the database's backends
// have flushed their statistics: exited, or, when s keeps a pool that is
// open (its warm-up's), gone idle long enough to flush; pooled subtracts
// them.
func (b *bench) countFrom(ctx context.Context, s *slot) error {
	if s.stop != nil {
		if err := b.waitStatsFlushed(ctx, s.db); err != nil {
			return err
		}
	} else if err := b.waitIdle(ctx, s.db); err != nil {
		return err
	}
	c, err := s.db.counters(ctx)
	if err != nil {
		return err
	}
	s.commits, s.blksRead, s.blksHit = -c.commits, -c.blksRead, -c.blksHit
	if b.pgss {
		s.stmts, err = s.db.statementTotals(ctx)
	}
	return err
}

// dropSlots drops the databases the slots created.
func (b *bench) dropSlots(slots []*slot) {
	for _, s := range slots {
		if s.db != nil && !s.shared {
			b.drop(s.db)
		}
	}
}

// rounds runs cfg.rounds rounds of one slice of every slot, each round in
// its own order.
func (b *bench) rounds(ctx context.Context, slots []*slot, callers int) {
	conns := min(callers, b.cfg.maxConns)
	seed := uint64(time.Now().UnixNano())
	for r := range b.cfg.rounds {
		for pos, i := range roundOrder(len(slots), r, seed) {
			s := slots[i]
			if s.err != nil || ctx.Err() != nil {
				continue
			}
			if d, ok := b.measureSlice(ctx, s, callers, conns); ok {
				s.add(d)
				s.firsts = append(s.firsts, pos == 0)
			}
		}
	}
}

// sliceData is what one slice measured, before it is added to its slot's
// tallies (a round whose slices are not all valid adds none of them).
type sliceData struct {
	sm          *sample
	wal, fpi    int64
	client      time.Duration
	server      procTimes
	serverKnown bool
	machine     machineTicks
}

// sliceFigures are what one slice spent per operation besides its CPU
// time: its backends' kernel time (µs) and blocks read through the kernel
// (bytes read / 8 KB), and the full-page images the server logged
// (server-wide, but one slice runs at a time).
type sliceFigures struct {
	Sys, Reads, FPI float64
}

func (d sliceData) figures() sliceFigures {
	n := float64(d.sm.Total)
	if n == 0 {
		return sliceFigures{}
	}
	f := sliceFigures{FPI: float64(d.fpi) / n}
	if d.serverKnown {
		f.Sys = float64(d.server.sys.Microseconds()) / n
		f.Reads = float64(d.server.read) / 8192 / n
	}
	return f
}

// measureSlice measures one slice of s; false (with s.err set) when it
// failed. The workload's pools are opened for the slice and closed after
// it: a level's workloads at 128 callers, all open at once, would need more
// connections than a default server allows. The CPU figures therefore
// include the slice's connection set-up and warm-up, spread over its
// operations. A slot that keeps its pools (the scale pair's two, every
// workload with --keep-pools) opens them at its first slice and counts,
// from then on, only what its backends spent during each slice. Kept
// pools did not move the level's ratios (2026-12-02, private server, two
// runs each way alternating: 0.27 to 0.31 of the floor at 8 callers
// fresh against 0.29 kept, 0.39 to 0.41 at 32 against 0.34 to 0.40), so
// the default stays a pool per slice, which fits a default server.
func (b *bench) measureSlice(ctx context.Context, s *slot, callers, conns int) (sliceData, bool) {
	k0, err := s.db.counters(ctx)
	if err != nil {
		s.err = err
		return sliceData{}, false
	}
	cl0, m0 := selfCPU(), readMachineTicks()
	var srv0 procTimes // the kept backends' before this slice
	stop := func() {}
	if s.keep && s.stop != nil {
		srv0, _ = procOf(b.backends(ctx, s.db))
	} else {
		op, stopPools, err := s.w.start(ctx, s.db, conns)
		if err != nil {
			s.err = fmt.Errorf("start: %w", err)
			return sliceData{}, false
		}
		s.op = op
		if s.keep {
			s.stop = stopPools
		} else {
			stop = stopPools
		}
	}
	base := s.issued
	sm := measure(ctx, callers, b.cfg.sliceWarmup, b.cfg.slice, func(ctx context.Context, w int, i int64) (toolSpan, error) {
		return s.op(ctx, w, base+i)
	})
	s.issued += sm.Total // every operation a slice starts is counted when it ends
	// The backends that served the slice, from their start: pooled
	// connections live as long as the slice's pools.
	srvp, known := procOf(b.backends(ctx, s.db))
	srvp = srvp.sub(srv0)
	stop()
	cl1, m1 := selfCPU(), readMachineTicks()
	k1, err := s.db.counters(ctx)
	if err != nil {
		s.err = err
		return sliceData{}, false
	}
	if sm.Err != nil {
		s.err = sm.Err
		return sliceData{}, false
	}
	if sm.Extended > 0 {
		b.logf("  %s %s at %d callers: the slice stayed open %s past its end, until an operation that started in it completed", s.w.system, s.w.name, callers, sm.Extended.Round(time.Millisecond))
	}
	return sliceData{sm: sm, wal: k1.wal - k0.wal, fpi: k1.fpi - k0.fpi, client: cl1 - cl0, server: srvp, serverKnown: known, machine: m1.since(m0)}, true
}

// add adds one slice's measurement to s's tallies.
func (s *slot) add(d sliceData) {
	s.samples = append(s.samples, d.sm)
	s.rates = append(s.rates, d.sm.rate())
	cpu := 0.0
	if d.serverKnown && d.sm.Total > 0 {
		cpu = float64((d.client + d.server.cpu).Microseconds()) / float64(d.sm.Total)
	}
	s.cpus = append(s.cpus, cpu)
	s.figs = append(s.figs, d.figures())
	s.p50s = append(s.p50s, pct(d.sm.Lat, 0.50))
	s.added99s = append(s.added99s, pct(d.sm.Added, 0.99))
	s.wal += d.wal
	s.fpi += d.fpi
	s.total += d.sm.Total
	s.client += d.client
	s.server = s.server.add(d.server)
	s.serverKnown = d.serverKnown && (len(s.samples) == 1 || s.serverKnown)
	s.machine = s.machine.add(d.machine)
}

// pooled is s's row: rate over all slices, latencies pooled, per-operation
// counters over every operation issued.
func (b *bench) pooled(ctx context.Context, s *slot, callers, conns int) *result {
	if s.err != nil {
		return b.failed(s.w, callers, s.err)
	}
	r := &result{System: s.w.system, Workload: s.w.name, Callers: callers, Conns: conns}
	all := &sample{}
	for _, sm := range s.samples {
		all.Ops += sm.Ops
		all.Total += sm.Total
		all.Elapsed += sm.Elapsed
		all.merge(sm)
	}
	r.fill(all)
	r.sample = all
	r.Rounds = len(s.samples)
	q1, _, q3 := quartiles(s.rates)
	r.RateQ1, r.RateQ3 = q1, q3
	r.AddedP99Q1, _, r.AddedP99Q3 = quartiles(s.added99s)
	if err := b.waitIdle(ctx, s.db); err != nil {
		return b.failed(s.w, callers, err)
	}
	if k, err := s.db.counters(ctx); err == nil && s.total > 0 && !s.mixed {
		r.CommitsPerOp = float64(k.commits+s.commits) / float64(s.total)
		r.BlocksReadPerOp = float64(k.blksRead+s.blksRead) / float64(s.total)
		r.BlocksHitPerOp = float64(k.blksHit+s.blksHit) / float64(s.total)
		if s.stmts != nil {
			if now, err := s.db.statementTotals(ctx); err == nil {
				r.Statements = statementsSince(s.stmts, now, s.total)
			}
		}
	}
	if s.total > 0 {
		r.WALPerOp = float64(s.wal) / float64(s.total)
		r.FPIPerOp = float64(s.fpi) / float64(s.total)
		r.ClientCPUPerOp = float64(s.client.Microseconds()) / float64(s.total)
		if s.serverKnown {
			n := float64(s.total)
			r.ServerCPUPerOp = float64(s.server.cpu.Microseconds()) / n
			r.ServerSysCPUPerOp = float64(s.server.sys.Microseconds()) / n
			r.ServerMinFltPerOp = float64(s.server.minflt) / n
			r.ServerRunWaitPerOp = float64(s.server.runWait.Microseconds()) / n
		}
	}
	if p := s.machine.stealPct(); p >= 0 {
		r.StealPct = &p
	}
	if s.w.after != nil {
		if err := s.w.after(ctx, s.db, r); err != nil {
			return b.failed(s.w, callers, err)
		}
	}
	b.logf("  %-10s %-34s callers=%-4d %8.0f ops/s (slices %.0f–%.0f)  p50 %6.2f ms  p99 %6.2f ms  added p99 %6.2f ms  %.2f commits/op  %5.0f WAL B/op  CPU/op client %.0f µs, server %s (sys %.0f µs, %.2f minor faults, run-queue wait %.0f µs)",
		r.System, r.Workload, callers, r.Rate, q1, q3, r.P50, r.P99, r.AddedP99, r.CommitsPerOp, r.WALPerOp, r.ClientCPUPerOp, cpuText(r.ServerCPUPerOp),
		r.ServerSysCPUPerOp, r.ServerMinFltPerOp, r.ServerRunWaitPerOp)
	return r
}

func cpuText(us float64) string {
	if us == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f µs", us)
}

// ratios pairs the rounds of num and den: num's figure over den's, round
// by round (of rates by default, of p50 latencies with latency).
func ratios(num, den *slot, latency bool) []float64 {
	if latency {
		return ratioOf(num.p50s, den.p50s)
	}
	return ratioOf(num.rates, den.rates)
}

// selfCPU is this process's CPU time so far (user + system): the callers,
// the pools and the in-process tool alike.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// backends returns the process ids of the server's backends connected to
// db (when the server is on this machine, /proc shows their CPU time),
// except a purge's running beside the slices.
func (b *bench) backends(ctx context.Context, db *database) []int {
	return b.backendPids(ctx, db, `application_name <> $2`, purgeApp)
}

// backendsNamed returns the process ids of db's backends whose
// application_name is app.
func (b *bench) backendsNamed(ctx context.Context, db *database, app string) []int {
	return b.backendPids(ctx, db, `application_name = $2`, app)
}

func (b *bench) backendPids(ctx context.Context, db *database, cond, app string) []int {
	c, err := b.srv.admin(ctx)
	if err != nil {
		return nil
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' AND `+cond, db.name, app)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var pids []int
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on
// every Linux this runs on.
const clockTicks = 100

// cpuOf sums the user and system CPU time of pids from /proc; false when
// one of them cannot be read (a remote server, a backend that exited).
func cpuOf(pids []int) (time.Duration, bool) {
	p, ok := procOf(pids)
	return p.cpu, ok
}

// procTimes is what /proc tells of a set of processes: their CPU time, the
// system part of it, their minor page faults, the time they waited on a
// run queue (schedstat; 0 when the kernel does not keep it) and the bytes
// they read through the kernel (io's rchar; 0 when it cannot be read).
// The last four say where a backend's CPU went when its statements cost
// more than another's: into the kernel, into faulting pages in, nowhere
// (waiting for a core), or into reading blocks that were not in shared
// buffers (a backend reads a block with one pread of 8 KB, from the page
// cache or the disk alike, and its clients' messages with recv, which
// rchar leaves out). Unlike pg_stat_database's blks_read, which a backend
// reports at most once a second, rchar is current when read, so it can
// be given slice by slice.
type procTimes struct {
	cpu, sys time.Duration
	minflt   int64
	runWait  time.Duration
	read     int64
}

func (p procTimes) add(q procTimes) procTimes {
	return procTimes{cpu: p.cpu + q.cpu, sys: p.sys + q.sys, minflt: p.minflt + q.minflt, runWait: p.runWait + q.runWait, read: p.read + q.read}
}

func (p procTimes) sub(q procTimes) procTimes {
	return procTimes{cpu: p.cpu - q.cpu, sys: p.sys - q.sys, minflt: p.minflt - q.minflt, runWait: p.runWait - q.runWait, read: p.read - q.read}
}

// procOf sums procTimes over pids; false when one of them cannot be read.
func procOf(pids []int) (procTimes, bool) {
	if len(pids) == 0 {
		return procTimes{}, false
	}
	var ticks, sys, flt, read int64
	var wait time.Duration
	for _, pid := range pids {
		proc, err := procfs.NewProc(pid)
		if err != nil {
			return procTimes{}, false
		}
		st, err := proc.Stat()
		if err != nil {
			return procTimes{}, false
		}
		ticks += int64(st.UTime + st.STime)
		sys += int64(st.STime)
		flt += int64(st.MinFlt)
		// schedstat: time on a CPU, time waiting on a run queue.
		if sc, err := proc.Schedstat(); err == nil {
			wait += time.Duration(sc.WaitingNanoseconds)
		}
		if io, err := proc.IO(); err == nil {
			read += int64(io.RChar)
		}
	}
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / clockTicks }
	return procTimes{cpu: tick(ticks), sys: tick(sys), minflt: flt, runWait: wait, read: read}, true
}

// Workload names the level's comparisons refer to.
const (
	firstName  = "first execution"
	replayName = "replay"
)

// level runs the rotation of n callers and records its rows and paired
// ratios in rep.
func (b *bench) level(ctx context.Context, rep *report, n int) {
	rows, slots := b.rotate(ctx, b.levelWorkloads(), n)
	b.levelPairs(rep, n, rows, slots)
}

// levelWorkloads is what every level rotates: the floor first (every ratio
// is to it, so it always runs), then those --only and the --skip flags
// leave.
func (b *bench) levelWorkloads() []workload {
	ws := []workload{b.floorWorkload(), b.floorToolWorkload(), b.rsFirstWorkload(firstName, nil), b.rsInProcessWorkload(),
		b.rsFirstWorkloadWith("first execution, sync completion", nil, syncCompletion),
		b.rsFirstWorkloadWith("first execution, no group commit", nil, noGroupCommit), b.rsCobWorkload(), b.rsReplayWorkload()}
	if !b.cfg.skipDBOS {
		ws = append(ws, b.dbosFirstWorkload(), b.dbosReplayWorkload())
	}
	if !b.cfg.skipNaive {
		ws = append(ws, b.naiveWorkload())
	}
	// The floor always runs: every ratio is to it.
	kept := ws[:1]
	for _, w := range ws[1:] {
		if b.wanted(w.system + "/" + w.name) {
			kept = append(kept, w)
		}
	}
	return kept
}

// levelPairs records a level's rows and its paired ratios in rep.
func (b *bench) levelPairs(rep *report, n int, rows []*result, slots []*slot) {
	find := func(system, name string) *slot {
		for _, s := range slots {
			if s.w.system == system && s.w.name == name && s.err == nil {
				return s
			}
		}
		return nil
	}
	floor := find("floor", floorName)
	if floor != nil {
		rep.floor[n] = rows[0].Rate
	}
	for i, r := range rows {
		rep.add(r)
		if floor != nil && slots[i] != floor && r.Err == "" {
			p := newPair("", n, ratios(slots[i], floor, false))
			r.Ratio, r.RatioQ1, r.RatioQ3 = p.Median, p.Q1, p.Q3
		}
	}
	pair := func(name string, num, den *slot, latency bool) {
		if num != nil && den != nil {
			rep.Pairs = append(rep.Pairs, newPair(name, n, ratios(num, den, latency)))
		}
	}
	first := find("retrysafe", firstName)
	pair("retrysafe first execution / floor", first, floor, false)
	pair("retrysafe first execution / commit + tool + commit", first, find("floor", floorToolName), false)
	// The benchmark's provider is a local HTTP server in this process, on
	// the same cores as the database: its CPU is counted against
	// retrysafe's first executions and not against the floor, where a
	// deployment's provider runs elsewhere. The same executions with the
	// tool answered in process say what retrysafe's own work allows.
	inProc := find("retrysafe", loneNoToolName)
	pair(inProcPairName, inProc, floor, false)
	pair("retrysafe first execution, pix.cob / floor", find("retrysafe", cobName), floor, false)
	pair("retrysafe first execution, pix.cob / first execution", find("retrysafe", cobName), first, false)
	pair("retrysafe replay / floor", find("retrysafe", replayName), floor, false)
	pair("retrysafe first execution / DBOS first execution", first, find("dbos", firstName), false)
	pair("naive first execution / DBOS first execution", find("naive", firstName), find("dbos", firstName), false)
	pair("p50 latency: retrysafe first execution / commit + tool + commit", first, find("floor", floorToolName), true)
	// The floor's CPU per operation over retrysafe's, slice by slice: the
	// rate ratio a machine whose CPU runs out allows (the same ratio of
	// rates when both are CPU-bound), a figure the host's WAL flush time
	// does not move the way it moves rates.
	for _, c := range []struct {
		name string
		s    *slot
	}{{cpuPairName, first}, {cpuInProcPairName, inProc}} {
		if floor == nil || c.s == nil {
			continue
		}
		if rs := ratioOf(floor.cpus, c.s.cpus); len(rs) > 0 {
			rep.Pairs = append(rep.Pairs, newPair(c.name, n, rs))
		}
	}
}

// The level's pairs that the floor targets name beside their own.
const (
	cpuPairName       = "CPU per operation: floor / retrysafe first execution"
	inProcPairName    = "retrysafe first execution, tool in process / floor"
	cpuInProcPairName = "CPU per operation: floor / retrysafe first execution, tool in process"
)

// findPair returns the pair of that name at callers.
func (rep *report) findPair(name string, callers int) (pairStat, bool) {
	for _, p := range rep.Pairs {
		if p.Name == name && p.Callers == callers {
			return p, true
		}
	}
	return pairStat{}, false
}
