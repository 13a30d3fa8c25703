package restarttest

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// Sample is one reading of one process.
type Sample struct {
	Seconds    float64 `json:"seconds"` // since the load began
	Process    string  `json:"process"`
	Pid        int     `json:"pid"`
	RSSKiB     int64   `json:"rss_kib"`
	Goroutines int     `json:"goroutines"`
	HeapKiB    int64   `json:"heap_inuse_kib"`
}

// Trend compares a process's readings early in the load (after the
// warm-up) with those at its end.
type Trend struct {
	Process string `json:"process"`
	Pid     int    `json:"pid"`
	// Early: the median of the readings in the first third after the
	// warm-up; Late: of the last third; Max over the load.
	RSSEarlyKiB     int64  `json:"rss_early_kib"`
	RSSLateKiB      int64  `json:"rss_late_kib"`
	RSSMaxKiB       int64  `json:"rss_max_kib"`
	GoroutinesEarly int    `json:"goroutines_early"`
	GoroutinesLate  int    `json:"goroutines_late"`
	GoroutinesMax   int    `json:"goroutines_max"`
	HeapEarlyKiB    int64  `json:"heap_early_kib"`
	HeapLateKiB     int64  `json:"heap_late_kib"`
	Samples         int    `json:"samples"`
	Flat            bool   `json:"flat"`
	FlatRule        string `json:"flat_rule"`
}

// SoakReport is the outcome of a soak.
type SoakReport struct {
	Pass     bool     `json:"pass"`
	Verdict  string   `json:"verdict"`
	Failures []string `json:"failures"`
	// Load is how long the load actually ran; Total the whole soak.
	Load  string `json:"load"`
	Total string `json:"total"`
	Seed  int64  `json:"seed"`
	// What the load did.
	Runs         int    `json:"runs"`
	Storms       int    `json:"storms"`
	Redeliveries int    `json:"webhook_redeliveries"`
	FaultsAsked  int    `json:"psp_faults"`
	ChargePosts  int    `json:"charge_posts_via_proxies"`
	Crashes      int    `json:"crashes"`
	CrashDownMax string `json:"crash_down_max"`
	// CrashJobsRunning and CrashActionsStarted: River jobs running and
	// actions started (claimed, not completed) just before each crash,
	// summed over the crashes: what they hit.
	CrashJobsRunning    int      `json:"crash_jobs_running"`
	CrashActionsStarted int      `json:"crash_actions_started"`
	WorkerRestarts      int      `json:"worker_restarts"`
	Trends              []Trend  `json:"trends"`
	Samples             []Sample `json:"samples"`
	// Restart is the restart test's own verdict over every run of the
	// soak: one charge per intent, none lost, none stuck, one key.
	Restart  *Report `json:"report"`
	Database string  `json:"database"`
}

// trends compares each process's early and late readings. A process is
// flat when its late median RSS is within 25% (plus 8 MiB) of its early
// one and its late median goroutine count within 25% (plus 20).
func trends(samples []Sample, warmUp, load time.Duration) []Trend {
	byPid := map[int][]Sample{}
	var pids []int
	for _, s := range samples {
		if _, ok := byPid[s.Pid]; !ok {
			pids = append(pids, s.Pid)
		}
		byPid[s.Pid] = append(byPid[s.Pid], s)
	}
	var out []Trend
	for _, pid := range pids {
		ss := byPid[pid]
		var early, late []Sample
		span := load - warmUp
		for _, s := range ss {
			at := time.Duration(s.Seconds * float64(time.Second))
			switch {
			case at < warmUp:
			case at < warmUp+span/3:
				early = append(early, s)
			case at >= load-span/3:
				late = append(late, s)
			}
		}
		if len(early) == 0 || len(late) == 0 {
			continue
		}
		tr := Trend{Process: ss[0].Process, Pid: pid, Samples: len(ss),
			RSSEarlyKiB: median(early, func(s Sample) int64 { return s.RSSKiB }), RSSLateKiB: median(late, func(s Sample) int64 { return s.RSSKiB }),
			GoroutinesEarly: int(median(early, func(s Sample) int64 { return int64(s.Goroutines) })), GoroutinesLate: int(median(late, func(s Sample) int64 { return int64(s.Goroutines) })),
			HeapEarlyKiB: median(early, func(s Sample) int64 { return s.HeapKiB }), HeapLateKiB: median(late, func(s Sample) int64 { return s.HeapKiB }),
			FlatRule: "late median within 25% + 8 MiB (RSS) and 25% + 20 (goroutines) of the early median"}
		for _, s := range ss {
			tr.RSSMaxKiB = max(tr.RSSMaxKiB, s.RSSKiB)
			tr.GoroutinesMax = max(tr.GoroutinesMax, s.Goroutines)
		}
		tr.Flat = float64(tr.RSSLateKiB) <= 1.25*float64(tr.RSSEarlyKiB)+8192 &&
			float64(tr.GoroutinesLate) <= 1.25*float64(tr.GoroutinesEarly)+20
		out = append(out, tr)
	}
	return out
}

func median(ss []Sample, f func(Sample) int64) int64 {
	v := make([]int64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// WriteTable writes the soak's figures and verdict.
func (r *SoakReport) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "retrysafe soak: %s of load (%s in all), seed %d\n", r.Load, r.Total, r.Seed)
	fmt.Fprintf(w, "  database: %s\n", r.Database)
	fmt.Fprintf(w, "  load: %d intents, %d same-key storms, %d webhook redeliveries, %d PSP faults of %d charge requests through the workers' proxies\n",
		r.Runs, r.Storms, r.Redeliveries, r.FaultsAsked, r.ChargePosts)
	fmt.Fprintf(w, "  database crashes: %d (SIGKILL of the postmaster and every backend, then crash recovery; down at most %s); workers restarted: %d\n",
		r.Crashes, r.CrashDownMax, r.WorkerRestarts)
	fmt.Fprintf(w, "  in flight just before the crashes, summed: %d River jobs running, %d actions claimed and not completed\n\n", r.CrashJobsRunning, r.CrashActionsStarted)
	fmt.Fprintln(w, "  process     pid    RSS early → late (max) KiB      goroutines early → late (max)   heap early → late KiB   flat")
	for _, t := range r.Trends {
		fmt.Fprintf(w, "  %-10s %6d   %7d → %7d (%7d)        %5d → %5d (%5d)           %7d → %7d        %v\n",
			t.Process, t.Pid, t.RSSEarlyKiB, t.RSSLateKiB, t.RSSMaxKiB, t.GoroutinesEarly, t.GoroutinesLate, t.GoroutinesMax, t.HeapEarlyKiB, t.HeapLateKiB, t.Flat)
	}
	if len(r.Trends) > 0 {
		fmt.Fprintf(w, "  (%s)\n", r.Trends[0].FlatRule)
	}
	fmt.Fprintln(w)
	if r.Restart != nil {
		if err := r.Restart.WriteTable(w); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	_, err := fmt.Fprintln(w, r.Verdict)
	return err
}
