package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/executor"
)

// The purge under load: executor.Purge deletes the scale database's
// expired rows while first executions run on the same tables. The purge
// runs through a gate (gate.go) that the benchmark opens for one slice and
// closes for the next, in an order that changes every round, so that each
// round compares executions with and without the purge a second or two
// apart; a round is kept only when the purge ran through the whole of its
// slice. Once the rounds are done the purge finishes under the same load,
// unmeasured, for its duration and rate.

// purgeSetting is one Batch/Pause of executor.PurgeParams.
type purgeSetting struct {
	Batch int
	Pause time.Duration
}

func (s purgeSetting) String() string {
	return fmt.Sprintf("batch %d, pause %s", s.Batch, s.Pause)
}

// parsePurgeSettings reads "1000/0,500/5ms": BATCH[/PAUSE], comma-separated;
// "none" for no purge.
func parsePurgeSettings(v string) ([]purgeSetting, error) {
	if strings.TrimSpace(v) == "none" {
		return nil, nil
	}
	var out []purgeSetting
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		b, p, _ := strings.Cut(f, "/")
		n, err := strconv.Atoi(b)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("purge setting %q: batch must be a positive integer", f)
		}
		s := purgeSetting{Batch: n}
		if p != "" && p != "0" {
			if s.Pause, err = time.ParseDuration(p); err != nil || s.Pause < 0 {
				return nil, fmt.Errorf("purge setting %q: bad pause", f)
			}
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, errors.New("empty purge settings")
	}
	return out, nil
}

// purgeRun is one purge under load.
type purgeRun struct {
	Batch   int     `json:"batch"`
	PauseMs float64 `json:"pause_ms"`
	Callers int     `json:"callers"`
	// Expired is how many expired actions (with their intents) the
	// database held when the purge started; Actions and Intents what it
	// deleted, in Batches statements.
	Expired int64 `json:"expired"`
	Actions int64 `json:"purged_actions"`
	Intents int64 `json:"purged_intents"`
	Batches int   `json:"batches"`
	// ActiveSeconds is the purge's duration without the slices it was held
	// for; WallSeconds with them. RowsPerSec is actions per active second.
	ActiveSeconds float64 `json:"active_seconds"`
	WallSeconds   float64 `json:"wall_seconds"`
	RowsPerSec    float64 `json:"actions_per_second"`
	// RoundsRowsPerSec is the purge's rate in the measured rounds only
	// (their slices with it running): the part of the purge the latency
	// figures are for.
	RoundsRowsPerSec float64 `json:"rounds_actions_per_second"`
	// Deleting and Scanning count the statements that deleted rows and
	// those that found none in their block range; the p50s are theirs.
	Deleting      int     `json:"deleting_statements"`
	DeletingP50Ms float64 `json:"deleting_p50_ms"`
	DeletingP99Ms float64 `json:"deleting_p99_ms"`
	Scanning      int     `json:"scanning_statements"`
	ScanningP50Ms float64 `json:"scanning_p50_ms"`
	// ServerCPUPerRowUs is the purge backend's CPU time per action deleted.
	ServerCPUPerRowUs float64 `json:"server_cpu_us_per_row,omitempty"`
	// Rounds is how many paired rounds were kept. With and Without are the
	// pooled p99 of added latency of executions with the purge running and
	// held, in ms; WithQ1..Q3 the quartiles of the rounds' p99s with it.
	Rounds     int      `json:"rounds"`
	WithP99    float64  `json:"with_added_p99_ms"`
	WithoutP99 float64  `json:"without_added_p99_ms"`
	WithQ1     float64  `json:"with_p99_q1_ms"`
	WithMedian float64  `json:"with_p99_median_ms"`
	WithQ3     float64  `json:"with_p99_q3_ms"`
	Pair       pairStat `json:"p99_ratio"` // with / without, per round
	// Stopped: the purge was stopped after its rounds (--purge-tail=false).
	Stopped bool   `json:"stopped,omitempty"`
	Err     string `json:"error,omitempty"`
}

func (r *purgeRun) setting() purgeSetting {
	return purgeSetting{Batch: r.Batch, Pause: time.Duration(r.PauseMs * float64(time.Millisecond))}
}

// purgeApp is the application_name of the purge's connection, which the
// slices' server CPU leaves out.
const purgeApp = "retrysafe-bench-purge"

// purgePoint runs one purge of db's expired rows with setting while
// cfg.purgeCallers callers run first executions, and returns the run and
// the two pooled rows (with the purge, without it).
func (b *bench) purgePoint(ctx context.Context, db *database, m *preloadMeta, set purgeSetting) (*purgeRun, []*result) {
	callers := b.cfg.purgeCallers
	conns := min(callers, b.cfg.maxConns)
	run := &purgeRun{Batch: set.Batch, PauseMs: float64(set.Pause) / float64(time.Millisecond), Callers: callers, Expired: m.Present}
	with := b.newSlot(ctx, b.rsFirstWorkloadOver("first execution while purging ("+set.String()+")", migrated, nil, preloadTenants), db)
	without := b.newSlot(ctx, b.rsFirstWorkloadOver("first execution, purge held ("+set.String()+")", migrated, nil, preloadTenants), db)
	slots := []*slot{with, without}
	fail := func(err error) (*purgeRun, []*result) {
		run.Err = err.Error()
		return run, []*result{b.failed(with.w, callers, err)}
	}
	for _, s := range slots {
		if s.err != nil {
			return fail(s.err)
		}
	}
	pp, err := db.poolNamed(ctx, 1, purgeApp)
	if err != nil {
		return fail(err)
	}
	defer pp.Close()
	retention, err := purgeRetention(ctx, pp, m)
	if err != nil {
		return fail(err)
	}
	m.Dirty = true
	if err := m.save(ctx, pp); err != nil {
		return fail(err)
	}
	g := newGate(pp)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var res executor.PurgeResult
	var perr error
	done := make(chan struct{})
	began := time.Now()
	go func() {
		defer close(done)
		res, perr = executor.Purge(pctx, g, executor.PurgeParams{Retention: retention, Batch: set.Batch, Pause: set.Pause})
		g.finish()
	}()
	finished := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	seed := rand.Uint64()
	for r := 0; r < b.cfg.purgeRounds && !finished() && ctx.Err() == nil; r++ {
		var got [2]sliceData
		kept := true
		for _, i := range roundOrder(2, r, seed) {
			g.setOpen(i == 0)
			d, ok := b.measureSlice(ctx, slots[i], callers, conns)
			g.setOpen(false)
			if !ok {
				g.setOpen(true)
				cancel()
				<-done
				return fail(slots[i].err)
			}
			// A slice the purge did not run through is not "while purging".
			kept = kept && !(i == 0 && finished())
			got[i] = d
		}
		if !kept {
			break
		}
		with.add(got[0])
		without.add(got[1])
	}
	if n, t := g.progress(); t > 0 {
		run.RoundsRowsPerSec = float64(n) / t.Seconds()
	}
	// The rest of the purge, under the same load, unmeasured; or not.
	run.Stopped = !b.cfg.purgeTail && !finished()
	if run.Stopped {
		cancel()
	}
	g.setOpen(true)
	for !finished() && ctx.Err() == nil && !run.Stopped {
		if _, ok := b.measureSlice(ctx, with, callers, conns); !ok {
			cancel()
			<-done
			return fail(with.err)
		}
	}
	<-done
	run.WallSeconds = time.Since(began).Seconds()
	if srv, ok := cpuOf(b.backendsNamed(ctx, db, purgeApp)); ok && res.Actions > 0 {
		run.ServerCPUPerRowUs = float64(srv.Microseconds()) / float64(res.Actions)
	}
	pp.Close()
	m.Present -= res.Actions
	m.Dirty = perr != nil && !(run.Stopped && errors.Is(perr, context.Canceled))
	if err := b.saveMeta(ctx, db, m); err != nil && perr == nil {
		perr = err
	}
	run.fill(res, g)
	if run.Stopped && errors.Is(perr, context.Canceled) && ctx.Err() == nil {
		perr = nil
	}
	if perr != nil {
		return fail(fmt.Errorf("purge: %w", perr))
	}
	if !run.Stopped && (res.Actions != run.Expired || res.Intents != run.Expired) {
		run.Err = fmt.Sprintf("purge deleted %d actions and %d intents, want %d each", res.Actions, res.Intents, run.Expired)
	}
	// Both slots and the purge share the database: its per-database
	// counters do not tell them apart.
	with.mixed, without.mixed = true, true
	rows := []*result{b.pooled(ctx, with, callers, conns), b.pooled(ctx, without, callers, conns)}
	run.Rounds = len(with.samples)
	if run.Rounds > 0 {
		run.WithP99, run.WithoutP99 = rows[0].AddedP99, rows[1].AddedP99
		run.WithQ1, run.WithMedian, run.WithQ3 = quartiles(with.added99s)
		run.Pair = newPair("p99 added latency: first execution while purging ("+set.String()+") / purge held", callers, ratioOf(with.added99s, without.added99s))
	}
	rows[0].Note = fmt.Sprintf("purge: %s actions + %s intents in %.1fs active (%.0f actions/s; %.0f in the rounds), %d statements; %d paired rounds",
		count(int(res.Actions)), count(int(res.Intents)), run.ActiveSeconds, run.RowsPerSec, run.RoundsRowsPerSec, res.Batches, run.Rounds)
	b.logf("  purge (%s): %d actions, %d intents in %.1fs active, %.1fs wall: %.0f actions/s (%.0f in the rounds); %d deleting statements (p50 %.1f ms, p99 %.1f ms), %d scanning (p50 %.2f ms); added p99 %.2f ms while purging, %.2f held (%d rounds)",
		set, res.Actions, res.Intents, run.ActiveSeconds, run.WallSeconds, run.RowsPerSec, run.RoundsRowsPerSec, run.Deleting, run.DeletingP50Ms, run.DeletingP99Ms,
		run.Scanning, run.ScanningP50Ms, run.WithP99, run.WithoutP99, run.Rounds)
	return run, rows
}

// fill records what the purge deleted and how long it ran.
func (r *purgeRun) fill(res executor.PurgeResult, g *gate) {
	r.Actions, r.Intents, r.Batches = res.Actions, res.Intents, res.Batches
	r.ActiveSeconds = g.activeTime().Seconds()
	if r.ActiveSeconds > 0 {
		r.RowsPerSec = float64(res.Actions) / r.ActiveSeconds
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	r.Deleting, r.Scanning = len(g.deleting), len(g.scanning)
	r.DeletingP50Ms, r.DeletingP99Ms = pct(g.deleting, 0.50), pct(g.deleting, 0.99)
	r.ScanningP50Ms = pct(g.scanning, 0.50)
}

func (b *bench) saveMeta(ctx context.Context, db *database, m *preloadMeta) error {
	p, err := db.pool(ctx, 1)
	if err != nil {
		return err
	}
	defer p.Close()
	return m.save(ctx, p)
}

// ratioOf pairs a and b index by index: a[i] / b[i].
func ratioOf(a, b []float64) []float64 {
	n := min(len(a), len(b))
	out := make([]float64, 0, n)
	for i := range n {
		if b[i] > 0 {
			out = append(out, a[i]/b[i])
		}
	}
	return out
}
