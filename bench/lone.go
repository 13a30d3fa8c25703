package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/tools"
)

// A lone call (one caller, one call at a time, as an agent's conversation
// makes them) is compared with the least a claim-before-call design waits
// for by interleaving the two block by block, milliseconds apart. The
// level's slices cannot do that at one caller: a slice holds a few hundred
// calls, and between two slices of a round, seconds apart, this shared
// machine moves more than retrysafe differs from the minimal shape (the
// slice-paired p50 ratio spread 20 to 30 % in most runs). Blocks of a few
// calls, each workload's block after the other's in a new order every
// cycle, see the same machine.
//
// A block's first call is not recorded: it pays for what the block before
// it left. retrysafe's completion does not wait for its WAL flush, so the
// next commit that flushes, whichever workload's, writes it; interleaved
// call by call, the shape's first commit paid for retrysafe's completion
// and retrysafe measured as fast as two single-row commits, which in blocks
// it is not (BenchmarkLoneCall in executor measures the same split
// without the benchmark's tool).

// loneBlock is how many calls of one workload run back to back; the first
// is not recorded.
const loneBlock = 16

// An agent's calls come seconds apart (the model thinks between them), not
// back to back: the interleave runs a second time with a pause before
// every call (--lone-pause), one block of each workload per round. After a
// pause the VM's cores have gone idle and its caches cold, and every
// workload's lone call is slower (on the thirty-second host two single-row
// commits took about twice as long after 20 ms idle as back to back:
// docs/benchmarks.md); the paused ratio says whether retrysafe's longer
// path pays more of that than commit + tool + commit does. It is reported
// beside the target, whose verdict rests on the back-to-back interleave as
// before, so that runs before and after this pass compare.
const lonePausedCycles = 1

// The lone-call interleave's own workload and its paired ratios.
const (
	loneNoToolName           = "first execution, tool in process"
	lonePairName             = "lone call p50: retrysafe first execution / commit + tool + commit"
	loneNoToolPairName       = "lone call p50, tool in process: retrysafe first execution / two single-row commits"
	lonePausedPairName       = "lone call p50 after a pause: retrysafe first execution / commit + tool + commit"
	lonePausedNoToolPairName = "lone call p50 after a pause, tool in process: retrysafe first execution / two single-row commits"
)

// loneRow is one workload's calls in the interleave, pooled over its
// rounds.
type loneRow struct {
	System   string  `json:"system"`
	Workload string  `json:"workload"`
	Ops      int     `json:"ops"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	Around   *around `json:"around_tool,omitempty"`
}

// loneResult is the lone-call interleave's rows; its paired ratios (of
// per-round p50s) go with the report's others. Paused is the same
// workloads' rows with PauseMS before every call, PausedCycles blocks of
// each per round (none when the pause is 0).
type loneResult struct {
	Rounds       int       `json:"rounds"`
	Cycles       int       `json:"cycles_per_round"`
	Block        int       `json:"block"`
	Rows         []loneRow `json:"rows"`
	PauseMS      float64   `json:"pause_ms,omitempty"`
	PausedCycles int       `json:"paused_cycles_per_round,omitempty"`
	Paused       []loneRow `json:"paused_rows,omitempty"`
	Err          string    `json:"error,omitempty"`
}

// loneShape is the rounds and cycles of the interleave: each round runs
// cycles blocks of every workload.
func (b *bench) loneShape() (rounds, cycles int) {
	if b.cfg.quick {
		return 4, 3
	}
	return 12, 6
}

// loneRunning is one workload's operation in the interleave.
type loneRunning struct {
	op   opFunc
	stop func()
	next int64
}

// loneSamples is one workload's recorded calls in one pass: per round,
// and pooled.
type loneSamples struct {
	rounds [][]time.Duration
	all    *sample
}

// loneCall runs the interleave at one caller, back to back and then with
// the pause, and returns it with its paired ratios.
func (b *bench) loneCall(ctx context.Context) (*loneResult, []pairStat) {
	ws := []workload{b.floorToolWorkload(), b.rsFirstWorkload(firstName, nil), b.floorTwoWorkload(), b.rsInProcessWorkload()}
	rounds, cycles := b.loneShape()
	res := &loneResult{Rounds: rounds, Cycles: cycles, Block: loneBlock}
	slots := make([]*slot, len(ws))
	for i, w := range ws {
		slots[i] = b.newSlot(ctx, w, nil)
	}
	defer b.dropSlots(slots)
	rs := make([]*loneRunning, len(slots))
	defer func() {
		for _, r := range rs {
			if r != nil {
				r.stop()
			}
		}
	}()
	fail := func(err error) (*loneResult, []pairStat) {
		res.Err = err.Error()
		b.logf("  lone call: %v", err)
		return res, nil
	}
	for i, s := range slots {
		if s.err != nil {
			return fail(fmt.Errorf("%s/%s: %w", s.w.system, s.w.name, s.err))
		}
		op, stop, err := s.w.start(ctx, s.db, 1)
		if err != nil {
			return fail(fmt.Errorf("%s/%s: start: %w", s.w.system, s.w.name, err))
		}
		rs[i] = &loneRunning{op: op, stop: stop}
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 24))
	back, err := b.interleave(ctx, slots, rs, rng, rounds, cycles, 0)
	if err != nil {
		return fail(err)
	}
	var paused []*loneSamples
	if pause := b.cfg.lonePause; pause > 0 {
		if paused, err = b.interleave(ctx, slots, rs, rng, rounds, lonePausedCycles, pause); err != nil {
			return fail(err)
		}
		res.PauseMS, res.PausedCycles = float64(pause)/float64(time.Millisecond), lonePausedCycles
	}
	for _, s := range slots {
		if s.w.after != nil {
			if err := s.w.after(ctx, s.db, &result{}); err != nil {
				return fail(fmt.Errorf("%s/%s: %w", s.w.system, s.w.name, err))
			}
		}
	}
	rows := func(ss []*loneSamples, what string) []loneRow {
		out := make([]loneRow, 0, len(ss))
		for i, s := range slots {
			row := &result{}
			row.fill(ss[i].all)
			out = append(out, loneRow{System: s.w.system, Workload: s.w.name, Ops: len(ss[i].all.Lat), P50: row.P50, P99: row.P99, Around: row.Around})
			b.logf("  lone call%s: %-10s %-34s p50 %6.3f ms  p99 %6.3f ms (%d calls)", what, s.w.system, s.w.name, row.P50, row.P99, len(ss[i].all.Lat))
		}
		return out
	}
	p50s := func(s *loneSamples) []float64 {
		out := make([]float64, len(s.rounds))
		for r, lat := range s.rounds {
			out[r] = pct(lat, 0.50)
		}
		return out
	}
	res.Rows = rows(back, "")
	pairs := []pairStat{
		newPair(lonePairName, 1, ratioOf(p50s(back[1]), p50s(back[0]))),
		newPair(loneNoToolPairName, 1, ratioOf(p50s(back[3]), p50s(back[2]))),
	}
	if paused != nil {
		res.Paused = rows(paused, fmt.Sprintf(" after %v", b.cfg.lonePause))
		pairs = append(pairs,
			newPair(lonePausedPairName, 1, ratioOf(p50s(paused[1]), p50s(paused[0]))),
			newPair(lonePausedNoToolPairName, 1, ratioOf(p50s(paused[3]), p50s(paused[2]))))
	}
	for _, p := range pairs {
		b.logf("  lone call: %s %s", p.Name, p.text("x"))
	}
	return res, pairs
}

// interleave runs rounds of cycles blocks of every workload, each cycle in
// a new order, with pause before every call, and returns each workload's
// recorded calls (a block's first is not recorded).
func (b *bench) interleave(ctx context.Context, slots []*slot, rs []*loneRunning, rng *rand.Rand, rounds, cycles int, pause time.Duration) ([]*loneSamples, error) {
	ss := make([]*loneSamples, len(rs))
	for i := range ss {
		ss[i] = &loneSamples{rounds: make([][]time.Duration, rounds), all: &sample{}}
	}
	order := make([]int, len(rs))
	for i := range order {
		order[i] = i
	}
	for round := range rounds {
		for range cycles {
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for _, k := range order {
				r := rs[k]
				for j := range loneBlock {
					if pause > 0 {
						sleep(ctx, pause)
					}
					if err := ctx.Err(); err != nil {
						return nil, err
					}
					t0 := time.Now()
					tool, err := r.op(ctx, 0, r.next)
					t1 := time.Now()
					r.next++
					if err != nil {
						return nil, fmt.Errorf("%s/%s: %w", slots[k].w.system, slots[k].w.name, err)
					}
					if j == 0 {
						continue
					}
					ss[k].rounds[round] = append(ss[k].rounds[round], t1.Sub(t0))
					ss[k].all.record(t0, t1, tool)
				}
			}
		}
	}
	return ss, nil
}

// inProcessTool is the benchmark action answered in the process, without
// the provider's HTTP round trip: what is left of a first execution is
// retrysafe's own work and its two round trips to the database.
func inProcessTool() *tools.Func {
	return &tools.Func{
		ToolName: toolName, ToolDescription: "benchmark charge (answered in process)",
		Fields: toolSchema(), HonoursKey: true,
		Exec: func(ctx context.Context, key string, _ derive.Payload) (json.RawMessage, error) {
			return timed(ctx, func() (json.RawMessage, error) {
				return json.RawMessage(`{"id":"ch_` + key[:12] + `","status":"paid"}`), nil
			})
		},
	}
}

// rsInProcessWorkload is retrysafe's first execution with inProcessTool.
func (b *bench) rsInProcessWorkload() workload {
	run := newRun()
	return workload{
		system: "retrysafe", name: loneNoToolName, prep: migrated,
		start: func(ctx context.Context, db *database, conns int) (opFunc, func(), error) {
			p, err := db.pool(ctx, conns)
			if err != nil {
				return nil, nil, err
			}
			e, err := wireRSTool(p, nil, inProcessTool(), nil)
			if err != nil {
				p.Close()
				return nil, nil, err
			}
			op := func(ctx context.Context, _ int, i int64) (toolSpan, error) {
				return e.execute(ctx, benchCall(run, i), false)
			}
			return op, e.close, nil
		},
	}
}

// loneSection writes the interleave's table.
func (rep *report) loneSection(sb *strings.Builder) {
	l := rep.Lone
	if l == nil {
		return
	}
	fmt.Fprintf(sb, "\nA lone call, interleaved: one caller, each workload's block of %d calls after another's in a new order, %d blocks of each per round, %d rounds; a block's first call not recorded (it pays for what the block before it left):\n\n",
		l.Block, l.Cycles, l.Rounds)
	if l.Err != "" {
		fmt.Fprintf(sb, "error: %s\n", l.Err)
		return
	}
	table := func(rows []loneRow, pairs ...string) {
		sb.WriteString("| system | workload | calls | p50 ms | p99 ms | p50 ms before / in / after the tool |\n|---|---|---:|---:|---:|---:|\n")
		for _, r := range rows {
			split := "–"
			if a := r.Around; a != nil {
				split = fmt.Sprintf("%.3f / %.3f / %.3f", a.BeforeP50, a.ToolP50, a.AfterP50)
			}
			fmt.Fprintf(sb, "| %s | %s | %d | %.3f | %.3f | %s |\n", r.System, r.Workload, r.Ops, r.P50, r.P99, split)
		}
		for _, name := range pairs {
			if p, ok := rep.findPair(name, 1); ok {
				fmt.Fprintf(sb, "\n- %s: %s", name, p.text("x"))
			}
		}
		sb.WriteString("\n")
	}
	table(l.Rows, lonePairName, loneNoToolPairName)
	if len(l.Paused) > 0 {
		fmt.Fprintf(sb, "\nThe same after a pause of %g ms before every call (as an agent's calls come, after the model's turn), %d block of each workload per round, %d rounds:\n\n", l.PauseMS, l.PausedCycles, l.Rounds)
		table(l.Paused, lonePausedPairName, lonePausedNoToolPairName)
	}
}

// loneSplit says where a lone first execution's time went against commit
// + tool + commit's, part by part (the interleave's p50s before, in and
// after the tool), and what is left without the provider's HTTP exchange:
// the lone-call target's context, empty when the interleave has no such
// rows. A claim is where retrysafe writes more than a single-row commit
// (an intent and its action, their index entries); a completion that does
// not wait for its flush is where it waits less than the second commit.
func (rep *report) loneSplit() string {
	l := rep.Lone
	if l == nil || l.Err != "" {
		return ""
	}
	shape, rs := loneRowOf(l.Rows, "floor", floorToolName), loneRowOf(l.Rows, "retrysafe", firstName)
	if shape == nil || rs == nil || shape.Around == nil || rs.Around == nil {
		return ""
	}
	diff := func(a, b float64) string {
		if a >= b {
			return fmt.Sprintf("%.3f ms more", a-b)
		}
		return fmt.Sprintf("%.3f ms less", b-a)
	}
	s := fmt.Sprintf("p50s: the claim took %s than commit + tool + commit's first commit, the tool call %s, the completion %s than its second commit",
		diff(rs.Around.BeforeP50, shape.Around.BeforeP50), diff(rs.Around.ToolP50, shape.Around.ToolP50), diff(rs.Around.AfterP50, shape.Around.AfterP50))
	if p, ok := rep.findPair(loneNoToolPairName, 1); ok {
		s += "; with the tool in process (no HTTP provider on these cores), retrysafe / two single-row commits " + p.text("x")
	}
	if p, ok := rep.findPair(lonePausedPairName, 1); ok {
		s += fmt.Sprintf("; after a %g ms pause before every call, retrysafe / commit + tool + commit %s", l.PauseMS, p.text("x"))
		if r := loneRowOf(l.Paused, "retrysafe", firstName); r != nil {
			s += fmt.Sprintf(" (p50 %.3f ms against %.3f back to back)", r.P50, rs.P50)
		}
	}
	return s
}

// loneRowOf is the row of system's workload in rows, or nil.
func loneRowOf(rows []loneRow, system, workload string) *loneRow {
	for i := range rows {
		if r := &rows[i]; r.System == system && r.Workload == workload {
			return r
		}
	}
	return nil
}

// loneWanted: the interleave runs at one caller, when --only allows
// retrysafe/lone call.
func (b *bench) loneWanted() bool {
	return slices.Contains(b.cfg.concurrency, 1) && b.wanted("retrysafe/lone call")
}
