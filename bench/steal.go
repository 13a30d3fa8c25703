package main

import (
	"os"
	"strconv"
	"strings"
)

// machineTicks is the machine's CPU time so far from /proc/stat's first
// line, in clock ticks: all of it (user through steal) and the part the
// hypervisor gave to other guests while this one wanted to run (steal).
// On a shared VM steal is what moves a slice's rate without any change in
// the code; a workload whose slices saw much of it has a rate the machine,
// not the workload, set. unknown is set where /proc/stat is not there;
// the zero value is an interval of no time, which add extends.
type machineTicks struct {
	total, steal int64
	unknown      bool
}

func readMachineTicks() machineTicks {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineTicks{unknown: true}
	}
	return parseMachineTicks(string(raw))
}

// parseMachineTicks reads the aggregate "cpu" line: user nice system idle
// iowait irq softirq steal (guest and guest_nice are already in user and
// nice, so they are not added again).
func parseMachineTicks(stat string) machineTicks {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return machineTicks{unknown: true}
	}
	var t machineTicks
	for i := 1; i <= 8; i++ {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil || v < 0 {
			return machineTicks{unknown: true}
		}
		t.total += v
	}
	t.steal, _ = strconv.ParseInt(f[8], 10, 64)
	return t
}

// since is the ticks from t0 to t; unknown unless both readings are known.
func (t machineTicks) since(t0 machineTicks) machineTicks {
	if t.unknown || t0.unknown || t.total < t0.total || t.steal < t0.steal {
		return machineTicks{unknown: true}
	}
	return machineTicks{total: t.total - t0.total, steal: t.steal - t0.steal}
}

// add sums two intervals; unknown if either is.
func (t machineTicks) add(d machineTicks) machineTicks {
	if t.unknown || d.unknown {
		return machineTicks{unknown: true}
	}
	return machineTicks{total: t.total + d.total, steal: t.steal + d.steal}
}

// stealPct is steal as a share of all CPU time in the interval, in per
// cent; -1 when it is not known (or the interval is empty).
func (t machineTicks) stealPct() float64 {
	if t.unknown || t.total <= 0 {
		return -1
	}
	return 100 * float64(t.steal) / float64(t.total)
}
