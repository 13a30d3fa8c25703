package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/internal/pgtest"
)

func TestTokensEstimateDefaults(t *testing.T) {
	t.Parallel()
	e, out, errb := testEnv(strings.NewReader(""), nil)
	svg := filepath.Join(t.TempDir(), "spend.svg")
	if code := Run(context.Background(), e, []string{"tokens", "estimate", "--chart", svg}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	for _, want := range []string{"R$ 148,50", "0,41 %", "R$ 1.782,00", " 124\n", "R$ 0,165", "R$ 36.000,00", " 900\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	chart, err := os.ReadFile(svg)
	if err != nil || !strings.HasPrefix(string(chart), "<svg") || !strings.Contains(string(chart), "<polyline") {
		t.Fatalf("chart: %v %.80s", err, chart)
	}
}

func TestTokensEstimateJSONAndErrors(t *testing.T) {
	t.Parallel()
	e, out, errb := testEnv(strings.NewReader(""), nil)
	args := []string{"tokens", "estimate", "--format", "json", "--conversations", "1000", "--input-tokens", "1000", "--output-tokens", "1000",
		"--input-price", "0.01", "--output-price", "0.03", "--ticket", "2", "--repeat-rate", "10%"}
	if code := Run(context.Background(), e, args); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var got map[string]string
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got["burned_per_month"] != "4.00" && got["burned_per_month"] != "4" && !strings.HasPrefix(got["burned_per_month"], "4.0") {
		t.Errorf("burned_per_month = %q", got["burned_per_month"])
	}
	if got["break_even_conversations"] != "2" {
		t.Errorf("break_even = %q", got["break_even_conversations"])
	}
	for _, bad := range [][]string{
		{"tokens", "estimate", "--repeat-rate", "abc"},
		{"tokens", "estimate", "--format", "xml"},
		{"tokens", "estimate", "--conversations", "0"},
		{"tokens", "estimate", "--chart", "x.png"},
		{"tokens", "nope"},
	} {
		e, _, _ := testEnv(strings.NewReader(""), nil)
		if code := Run(context.Background(), e, bad); code == 0 {
			t.Errorf("%v: exit 0", bad)
		}
	}
}

func TestTokensMeasureCommand(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t, nil)
	ctx := context.Background()
	day := time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC)
	for i, replayed := range []bool{false, false, false, true} {
		if err := agent.RecordModelCall(ctx, pool, "shop", "wamid.1", agent.ModelCall{Step: 0, Model: "gpt-x", Prompt: 8000, Completion: 600,
			Replayed: replayed, At: day.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	e, out, errb := testEnv(strings.NewReader(""), map[string]string{"DATABASE_URL": pgtest.URL(t)})
	args := []string{"tokens", "measure", "--schema", schema, "--since", "2026-11-01", "--until", "2026-12-01",
		"--price", "gpt-x=0.015/0.075", "--format", "json", "--chart", filepath.Join(t.TempDir(), "d.svg")}
	if code := Run(ctx, e, args); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var rep struct {
		Total struct {
			Made, Duplicate, Avoided struct{ Calls int }
			DuplicateCost            string `json:"duplicate_cost"`
		}
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// Three real calls for one (message, step): two are duplicates at
	// 0.165 each; one journal hit.
	if rep.Total.Made.Calls != 3 || rep.Total.Duplicate.Calls != 2 || rep.Total.Avoided.Calls != 1 || !strings.HasPrefix(rep.Total.DuplicateCost, "0.33") {
		t.Fatalf("report = %+v", rep.Total)
	}
	e, _, errb = testEnv(strings.NewReader(""), map[string]string{"DATABASE_URL": pgtest.URL(t)})
	if code := Run(ctx, e, []string{"tokens", "measure", "--schema", schema, "--since", "2026-11-01", "--until", "2026-12-01"}); code == 0 || !strings.Contains(errb.String(), "gpt-x") {
		t.Fatalf("missing price: exit %d %s", code, errb)
	}
}
