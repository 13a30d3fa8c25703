package metrics_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/server/metrics"
	"github.com/retrysafe/retrysafe/tools"
)

// series returns every retrysafe_ series but the runtime's: counters by
// value, histograms by sample count.
func series(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), metrics.Namespace+"_") {
			continue
		}
		for _, s := range mf.GetMetric() {
			id := mf.GetName()
			for _, lp := range s.GetLabel() {
				id += " " + lp.GetName() + "=" + lp.GetValue()
			}
			if h := s.GetHistogram(); h != nil {
				got[id] = float64(h.GetSampleCount())
			} else {
				got[id] = s.GetCounter().GetValue()
			}
		}
	}
	return got
}

func TestObserver(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	var o executor.Observer = m
	ms := time.Millisecond
	o.ProviderCalled(executor.ProviderEvent{Tenant: "t1", Action: "pix.charge", Elapsed: ms})
	o.ProviderCalled(executor.ProviderEvent{Tenant: "t1", Action: "pix.charge", Elapsed: ms,
		Err: tools.Definitive("http_422", "no", nil), Class: tools.ClassDefinitive})
	o.LookupDone(executor.ProviderEvent{Tenant: "t1", Action: "pix.charge", Elapsed: ms, Err: tools.ErrNotFound, NotFound: true})

	done := &executor.Outcome{Status: executor.StatusCompleted, Action: "pix.charge"}
	o.ExecutionFinished(executor.ExecutionEvent{Tenant: "t1", Action: "pix.charge", Outcome: done, TookOver: true})
	replay := &executor.Outcome{Status: executor.StatusCompleted, Replayed: true, Divergent: []string{"amount"}}
	o.ExecutionFinished(executor.ExecutionEvent{Tenant: "t1", Action: "pix.charge", Outcome: replay, TookOver: true})
	o.ExecutionFinished(executor.ExecutionEvent{Tenant: "t1", Action: "pix.charge", Outcome: &executor.Outcome{Status: executor.StatusInFlight}})
	o.ExecutionFinished(executor.ExecutionEvent{Tenant: "t2", Action: "pix.charge", Outcome: &executor.Outcome{Status: executor.StatusReview}})
	// No outcome: the edge that answered counts it.
	o.ExecutionFinished(executor.ExecutionEvent{Tenant: "t1", Action: "pix.charge", Err: errors.New("database down")})
	lost := errors.New("unexpected EOF")
	o.WriteLost(executor.WriteEvent{Tenant: "t1", Action: "pix.charge", Write: executor.WriteCompletion, Attempt: 1, Lost: lost, Sends: 1})
	o.WriteLost(executor.WriteEvent{Tenant: "t1", Action: "pix.charge", Write: executor.WriteClaim, Lost: lost,
		Err: errors.New("connection refused"), Sends: 9, Elapsed: 10 * time.Second})

	want := map[string]float64{
		"retrysafe_provider_call_duration_seconds action=pix.charge outcome=ok":          1,
		"retrysafe_provider_call_duration_seconds action=pix.charge outcome=definitive":  1,
		"retrysafe_provider_lookup_duration_seconds action=pix.charge outcome=not_found": 1,
		"retrysafe_executions_total action=pix.charge outcome=completed tenant=t1":       2,
		"retrysafe_executions_total action=pix.charge outcome=in_flight tenant=t1":       1,
		"retrysafe_executions_total action=pix.charge outcome=review tenant=t2":          1,
		"retrysafe_replays_total action=pix.charge outcome=completed tenant=t1":          1,
		"retrysafe_divergences_total action=pix.charge tenant=t1":                        1,
		"retrysafe_in_flight_conflicts_total action=pix.charge tenant=t1":                1,
		"retrysafe_reviews_total action=pix.charge tenant=t2":                            1,
		// The replay took over too, but found the action settled.
		"retrysafe_takeovers_total action=pix.charge outcome=completed tenant=t1": 1,
		"retrysafe_lost_writes_total outcome=through write=completion":            1,
		"retrysafe_lost_writes_total outcome=not_through write=claim":             1,
	}
	// Every series of a pair that executed exists, at zero where nothing
	// was counted; the failed call above adds no pair.
	zero := func(id string) {
		if _, ok := want[id]; !ok {
			want[id] = 0
		}
	}
	// The lost writes' series exist from the start.
	for _, write := range []string{"claim", "takeover", "completion", "release"} {
		for _, outcome := range []string{"through", "not_through"} {
			zero("retrysafe_lost_writes_total outcome=" + outcome + " write=" + write)
		}
	}
	for _, tenant := range []string{"t1", "t2"} {
		for _, status := range []string{"completed", "failed", "in_flight", "review"} {
			for _, name := range []string{"executions_total", "replays_total", "takeovers_total"} {
				zero("retrysafe_" + name + " action=pix.charge outcome=" + status + " tenant=" + tenant)
			}
		}
		for _, status := range []string{"invalid", "error"} {
			zero("retrysafe_executions_total action=pix.charge outcome=" + status + " tenant=" + tenant)
		}
		for _, name := range []string{"divergences_total", "in_flight_conflicts_total", "reviews_total"} {
			zero("retrysafe_" + name + " action=pix.charge tenant=" + tenant)
		}
	}
	got := series(t, m)
	for id, n := range want {
		if v, ok := got[id]; !ok || v != n {
			t.Errorf("%s = %v (present %v), want %v", id, v, ok, n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
}

// A pair's counters exist from its first counted execution, at zero, so
// that the first in-flight conflict or review is an increase a query sees;
// an execution with no outcome creates none (the edge counts it).
func TestObserverCreatesPairSeriesAtZero(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	const lostWrites = 8 // four writes, two outcomes: there from the start
	m.ExecutionFinished(executor.ExecutionEvent{Tenant: "t1", Action: "pix.charge", Err: errors.New("database down")})
	if got := series(t, m); len(got) != lostWrites {
		t.Fatalf("series after an execution without outcome: %v", got)
	}
	m.ExecutionFinished(executor.ExecutionEvent{Tenant: "t1", Action: "pix.charge",
		Outcome: &executor.Outcome{Status: executor.StatusCompleted}})
	got := series(t, m)
	for _, id := range []string{
		"retrysafe_in_flight_conflicts_total action=pix.charge tenant=t1",
		"retrysafe_reviews_total action=pix.charge tenant=t1",
		"retrysafe_divergences_total action=pix.charge tenant=t1",
		"retrysafe_executions_total action=pix.charge outcome=review tenant=t1",
		"retrysafe_executions_total action=pix.charge outcome=error tenant=t1",
	} {
		if v, ok := got[id]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0", id, v, ok)
		}
	}
	if got["retrysafe_executions_total action=pix.charge outcome=completed tenant=t1"] != 1 {
		t.Errorf("executions completed = %v, want 1", got)
	}
	// A second tenant gets its own series; the first's are not created again.
	m.ExecutionFinished(executor.ExecutionEvent{Tenant: "t2", Action: "pix.charge",
		Outcome: &executor.Outcome{Status: executor.StatusInFlight}})
	if got := series(t, m); got["retrysafe_in_flight_conflicts_total action=pix.charge tenant=t2"] != 1 ||
		got["retrysafe_in_flight_conflicts_total action=pix.charge tenant=t1"] != 0 || len(got) != 2*17+lostWrites {
		t.Errorf("after t2: %d series %v", len(got), got)
	}
}
