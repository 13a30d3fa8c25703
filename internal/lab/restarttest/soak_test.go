package restarttest

import (
	"testing"
	"time"
)

// The flat rule must tell a process that holds steady from one that
// leaks, and leave out what the warm-up read.
func TestTrends(t *testing.T) {
	var samples []Sample
	for s := 0; s <= 600; s += 10 {
		// pid 1 steady (its warm-up spike ignored), pid 2 leaks memory,
		// pid 3 leaks goroutines.
		rss1 := int64(30000)
		if s < 60 {
			rss1 = 90000
		}
		samples = append(samples,
			Sample{Seconds: float64(s), Process: "serve", Pid: 1, RSSKiB: rss1, Goroutines: 10},
			Sample{Seconds: float64(s), Process: "w", Pid: 2, RSSKiB: 30000 + int64(s)*100, Goroutines: 60},
			Sample{Seconds: float64(s), Process: "w", Pid: 3, RSSKiB: 30000, Goroutines: 60 + s/2})
	}
	tr := trends(samples, time.Minute, 10*time.Minute)
	if len(tr) != 3 {
		t.Fatalf("%d trends, want 3", len(tr))
	}
	if !tr[0].Flat || tr[0].RSSEarlyKiB != 30000 {
		t.Errorf("steady process: %+v", tr[0])
	}
	if tr[1].Flat {
		t.Errorf("memory leak read as flat: %+v", tr[1])
	}
	if tr[2].Flat {
		t.Errorf("goroutine leak read as flat: %+v", tr[2])
	}
	if got := trends(samples, 9*time.Minute+55*time.Second, 10*time.Minute); len(got) != 0 {
		t.Errorf("a load too short after the warm-up compared anyway: %+v", got)
	}
}
