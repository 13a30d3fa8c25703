package main

import (
	"fmt"
	"strings"
)

// scaleSection writes the scale runs: the preload, the paired comparison
// with empty tables, the sizes and the purges under load.
func (rep *report) scaleSection(sb *strings.Builder) {
	sc := rep.Scale
	if sc == nil {
		return
	}
	fmt.Fprintf(sb, "\nScale: %s intents, each with its completed action (%s of them finished 8 to 7 days before the preload and expired, the others in the 7 days before it):\n\n",
		groupDigits(int64(sc.Rows)), groupDigits(sc.Expired))
	switch {
	case sc.Reused:
		fmt.Fprintf(sb, "- database %s, preloaded by an earlier run (--scale-db)", sc.Database)
	case sc.LoadSeconds > 0:
		fmt.Fprintf(sb, "- preload: %.0f s (rows %.0f s, key indexes built after them %.0f s, vacuum + analyze + checkpoint %.0f s)",
			sc.LoadSeconds+sc.IndexSeconds+sc.SettleSeconds, sc.LoadSeconds, sc.IndexSeconds, sc.SettleSeconds)
		if sc.Database != "" {
			fmt.Fprintf(sb, "; kept as %s (--scale-db)", sc.Database)
		}
	}
	if sc.RestoreSeconds > 0 {
		fmt.Fprintf(sb, "; expired rows deleted by a purge inserted again in %.0f s in all", sc.RestoreSeconds)
	}
	sb.WriteString("\n")
	if len(sc.Warmup) > 0 {
		fmt.Fprintf(sb, "- warm-up of the preloaded tables after the preload's checkpoint (--scale-warmup), first executions at %d callers, unmeasured by the rounds: %s\n",
			sc.Callers, warmText(sc.Warmup))
	}
	if len(sc.EmptyWarmup) > 0 {
		fmt.Fprintf(sb, "- warm-up of the empty side's pool before it (so that neither side's rounds begin on new backends): %s\n", warmText(sc.EmptyWarmup))
	}
	if sc.WarmupExecutions > 0 {
		fmt.Fprintf(sb, "- the preloaded tables held about %s intents when the rounds began: %s preloaded, %s first executions before the rounds\n",
			groupDigits(int64(sc.Rows)+sc.WarmupExecutions), groupDigits(int64(sc.Rows)), groupDigits(sc.WarmupExecutions))
	}
	if ck := sc.Checkpoint; ck != nil {
		if ck.NeedSeconds > 0 {
			fmt.Fprintf(sb, "- the server's next checkpoint: %s\n", ck.text())
		} else {
			fmt.Fprintf(sb, "- checkpoints begun during the rounds: %d\n", ck.InRounds)
		}
	}
	if p := sc.Pair; p != nil {
		fmt.Fprintf(sb, "- first executions on the preloaded tables / on empty ones, %d callers, paired slices (each side keeps one pool across its slices, its warm-up's when it had one): %s\n", sc.Callers, p.text(""))
		if t := byOrder(sc.Rounds); t != "" {
			fmt.Fprintf(sb, "- %s\n", t)
		}
	}
	roundsTable(sb, sc.Rounds)
	if sc.Err != "" {
		fmt.Fprintf(sb, "- error: %s\n", sc.Err)
	}
	sizeTable(sb, sc.Sizes, sc.LiveSizes, sc.Reused)
	if len(sc.Purges) == 0 {
		return
	}
	sb.WriteString("\nPurges of the expired rows (executor.Purge) while first executions run, in paired slices: the purge runs in one slice and is held between two of its statements in the other:\n\n")
	sb.WriteString("| Batch | Pause | callers | purged actions + intents | active s (wall) | actions/s (in the rounds) | statements deleting (p50 / p99 ms) / only scanning (p50 ms) | purge CPU µs/action | added p99 ms, purging / held | rounds' p99 purging, median (IQR) | p99 ratio (IQR) | rounds |\n")
	sb.WriteString("|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|\n")
	for _, p := range sc.Purges {
		set := p.setting()
		if p.Err != "" {
			fmt.Fprintf(sb, "| %d | %s | %d | error: %s | | | | | | | | |\n", set.Batch, set.Pause, p.Callers, cell(p.Err))
			continue
		}
		purged := groupDigits(p.Actions) + " + " + groupDigits(p.Intents)
		if p.Stopped {
			purged += fmt.Sprintf(" of %s, stopped after the rounds", groupDigits(p.Expired))
		}
		ratio := "–"
		if p.Rounds > 0 {
			ratio = fmt.Sprintf("%.2f (%.2f–%.2f)", p.Pair.Median, p.Pair.Q1, p.Pair.Q3)
		}
		fmt.Fprintf(sb, "| %d | %s | %d | %s | %.1f (%.1f) | %.0f (%.0f) | %d (%s / %s) / %d (%s) | %s | %s / %s | %s (%s–%s) | %s | %d |\n",
			set.Batch, set.Pause, p.Callers, purged, p.ActiveSeconds, p.WallSeconds, p.RowsPerSec, p.RoundsRowsPerSec,
			p.Deleting, ms(p.DeletingP50Ms), ms(p.DeletingP99Ms), p.Scanning, ms(p.ScanningP50Ms), cpuText(p.ServerCPUPerRowUs),
			ms(p.WithP99), ms(p.WithoutP99), ms(p.WithMedian), ms(p.WithQ1), ms(p.WithQ3), ratio, p.Rounds)
	}
}

// roundsTable gives the scale pair's rounds one by one, so that a ratio
// that drifts from round to round shows it, and what moved with it.
func roundsTable(sb *strings.Builder, rs []scaleRound) {
	if len(rs) == 0 {
		return
	}
	sb.WriteString("\nThe pair's rounds (per operation: CPU of this process and the side's backends, the backends' kernel part, blocks they read from outside shared buffers, full-page images logged):\n\n")
	sb.WriteString("| round | first | ratio | preloaded ops/s | CPU µs | kernel µs | reads | FPI | empty ops/s | CPU µs | kernel µs | reads | FPI |\n")
	sb.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, r := range rs {
		first, ratio := "empty", "–"
		if r.PreloadedFirst {
			first = "preloaded"
		}
		if x, ok := r.ratio(); ok {
			ratio = fmt.Sprintf("%.2f", x)
		}
		fmt.Fprintf(sb, "| %d | %s | %s | %.0f | %s | %.0f | %.2f | %.2f | %.0f | %s | %.0f | %.2f | %.2f |\n",
			i+1, first, ratio, r.PreloadedRate, cpuText(r.PreloadedCPU), r.PreloadedSys, r.PreloadedReads, r.PreloadedFPI,
			r.EmptyRate, cpuText(r.EmptyCPU), r.EmptySys, r.EmptyReads, r.EmptyFPI)
	}
}

// warmText is a warm-up's steps on one line.
func warmText(steps []warmStep) string {
	parts := make([]string, 0, len(steps))
	past := false
	for _, w := range steps {
		s := fmt.Sprintf("%.0f s: %.0f ops/s, %.2f FPI/op, %.0f WAL B/op", w.Seconds, w.Rate, w.FPIPerOp, w.WALPerOp)
		if w.Past && !past {
			past = true
			s = fmt.Sprintf("then, past --scale-warmup, until a part logged under %.2f FPI/op: ", afterCheckpointFPI) + s
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}
