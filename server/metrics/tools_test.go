package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/server/metrics"
	"github.com/retrysafe/retrysafe/tools"
)

func newTool(name string, look func(context.Context, string) (json.RawMessage, error), exec error) *tools.Func {
	return &tools.Func{
		ToolName: name,
		Fields:   derive.Schema{Fields: []derive.Field{{Name: "to", Rule: derive.RuleText}, {Name: tools.RefField, Rule: derive.RuleRef}}},
		Exec: func(context.Context, string, derive.Payload) (json.RawMessage, error) {
			return json.RawMessage(`{}`), exec
		},
		Look: look,
	}
}

// Wrapping must not change what the executor concludes about a tool: a
// wrapped tool is a Looker exactly when the original can really look up.
func TestInstrumentToolsKeepsLookupAbility(t *testing.T) {
	t.Parallel()
	look := func(context.Context, string) (json.RawMessage, error) { return nil, tools.ErrNotFound }
	reg, err := tools.NewRegistry(newTool("can.look", look, nil), newTool("cannot.look", nil, tools.Definitive("http_422", "no", nil)))
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	src := m.InstrumentTools(reg)

	can, _ := src.Tool("can.look")
	l, ok := tools.CanLookup(can)
	if !ok {
		t.Fatal("a tool with a lookup lost it when wrapped")
	}
	cannot, _ := src.Tool("cannot.look")
	if _, ok := tools.CanLookup(cannot); ok {
		t.Fatal("a tool without a lookup gained one when wrapped")
	}
	if _, ok := src.Tool("missing"); ok {
		t.Fatal("unknown tool found")
	}

	ctx, probe := metrics.WithProbe(context.Background())
	if _, err := can.Execute(ctx, "k", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Lookup(ctx, "k"); !errors.Is(err, tools.ErrNotFound) {
		t.Fatal(err)
	}
	cannot.Execute(ctx, "k", nil) //nolint:errcheck
	if probe.Calls() != 2 || probe.Lookups() != 1 {
		t.Fatalf("probe: %d calls, %d lookups", probe.Calls(), probe.Lookups())
	}
	got := map[string]uint64{}
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "retrysafe_provider_") {
			continue
		}
		for _, s := range mf.GetMetric() {
			id := mf.GetName()
			for _, lp := range s.GetLabel() {
				id += " " + lp.GetName() + "=" + lp.GetValue()
			}
			got[id] = s.GetHistogram().GetSampleCount()
		}
	}
	want := map[string]uint64{
		"retrysafe_provider_call_duration_seconds action=can.look outcome=ok":            1,
		"retrysafe_provider_call_duration_seconds action=cannot.look outcome=definitive": 1,
		"retrysafe_provider_lookup_duration_seconds action=can.look outcome=not_found":   1,
	}
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for id, n := range want {
		if got[id] != n {
			t.Errorf("%s: %d observations, want %d", id, got[id], n)
		}
	}
}
