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
	}
	got := series(t, m)
	for id, n := range want {
		if got[id] != n {
			t.Errorf("%s = %v, want %v", id, got[id], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
}
