package restarttest

import (
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/sandbox/model"
	"github.com/retrysafe/retrysafe/tools"
)

// corpus is the templates shipped in testdata/restart.
func corpus(t *testing.T) []Template {
	t.Helper()
	f, err := os.Open("../../../testdata/restart/messages.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ts, err := ReadTemplates(f)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// TestPlannedMessagesReadRight: a run that fails because the sandbox model
// cannot read its message, or derive refuses its key, would show up as a
// lost intent and blame the runtime. Every planned message, with the
// built-in templates and the testdata corpus, must be read by the model's
// parser as a request to pay with the run's key (and amount, when spelled),
// and every spelling of a run's key must derive to the run's normalized key
// and one idempotency key (item 3: CPF punctuated and bare, a phone three
// ways: one intent, one key).
func TestPlannedMessagesReadRight(t *testing.T) {
	reg, err := tools.NewRegistry(mustPix(t))
	if err != nil {
		t.Fatal(err)
	}
	der, err := reg.Deriver([]byte("restart-test-plan-secret-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]derive.PixKeyType{KindCPF: derive.PixCPF, KindCNPJ: derive.PixCNPJ, KindEmail: derive.PixEmail, KindPhone: derive.PixPhone}
	modelKinds := map[string]string{KindCPF: model.KeyCPF, KindCNPJ: model.KeyCNPJ, KindEmail: model.KeyEmail, KindPhone: model.KeyPhone}
	multi := map[string]int{}
	for name, templates := range map[string][]Template{"built-in": DefaultTemplates(), "testdata": corpus(t)} {
		for seed := int64(1); seed <= 20; seed++ {
			runs := planRuns(rand.New(rand.NewPCG(uint64(seed), 1)), 50, []string{"a", "b"}, templates, seed)
			for _, r := range runs {
				var keys []string
				for _, m := range r.Messages {
					f := model.Extract(m.Text)
					if !f.WantsToPay {
						t.Errorf("%s seed %d: %q: not read as a request to pay", name, seed, m.Text)
					}
					wantKey := r.Key
					if r.KeyKind == KindEmail {
						wantKey = strings.ToLower(wantKey)
					}
					if f.PixKey != wantKey || f.PixKeyType != modelKinds[r.KeyKind] {
						t.Errorf("%s seed %d: %q: model read key %q (%s), want %q (%s)", name, seed, m.Text, f.PixKey, f.PixKeyType, wantKey, r.KeyKind)
					}
					if f.HasAmount && f.AmountCents != r.AmountCents {
						t.Errorf("%s seed %d: %q: model read amount %d, want %d", name, seed, m.Text, f.AmountCents, r.AmountCents)
					}
					res, err := der.Derive("restart-test", tools.PixChargeName, map[string]any{
						"customer_id": r.Customer, "amount": model.FormatBRL(r.AmountCents), "pix_key": m.Spelling,
						"pix_key_type": string(kinds[r.KeyKind]), tools.RefField: r.Invoice,
					}, nil)
					if err != nil {
						t.Errorf("%s seed %d: derive %q: %v", name, seed, m.Spelling, err)
						continue
					}
					if got, _ := res.Payload.Get("pix_key"); got != wantKey {
						t.Errorf("%s seed %d: %q normalized to %q, want %q", name, seed, m.Spelling, got, wantKey)
					}
					keys = append(keys, res.Key)
				}
				for _, k := range keys[1:] {
					if k != keys[0] {
						t.Errorf("%s seed %d run %d: spellings %v derive different keys", name, seed, r.Index, r.Messages)
					}
				}
				if len(r.Messages) > 1 {
					multi[r.KeyKind]++
				}
			}
		}
	}
	if multi[KindCPF] == 0 || multi[KindPhone] == 0 {
		t.Fatalf("no multi-spelling runs planned: %v", multi)
	}
}

// TestPlanReproducible: one seed, one plan.
func TestPlanReproducible(t *testing.T) {
	a := planRuns(rand.New(rand.NewPCG(7, 1)), 30, []string{"x", "y", "z"}, DefaultTemplates(), 7)
	b := planRuns(rand.New(rand.NewPCG(7, 1)), 30, []string{"x", "y", "z"}, DefaultTemplates(), 7)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different plans")
	}
	per := map[string]int{}
	for _, r := range a {
		per[r.Scenario]++
	}
	if per["x"] != 10 || per["y"] != 10 || per["z"] != 10 {
		t.Fatalf("runs per scenario %v, want 10 each", per)
	}
}

func TestScenarioSelection(t *testing.T) {
	optIn := 0
	for _, p := range CrashPoints {
		if p.OptIn != "" {
			optIn++
		}
	}
	faultOptIn, ownCluster := 0, 0
	for _, f := range Faults {
		if f.OptIn != "" {
			faultOptIn++
		}
		if f.OwnCluster {
			ownCluster++
		}
	}
	if faultOptIn != 1 || ownCluster != 3 {
		t.Fatalf("%d opt-in faults (want pg-failover), %d on the own cluster (want pg-restart, pg-crash, pg-failover)", faultOptIn, ownCluster)
	}
	c := Config{}
	def, err := c.scenarios(true)
	if err != nil || len(def) != len(CrashPoints)-optIn+len(Faults)-faultOptIn {
		t.Fatalf("default: %d scenarios, %v", len(def), err)
	}
	c = Config{CrashPoints: []string{"all"}, Faults: []string{"all"}}
	all, err := c.scenarios(true)
	if err != nil || len(all) != len(CrashPoints)+len(Faults) {
		t.Fatalf("all: %d scenarios, %v", len(all), err)
	}
	noPG, err := c.scenarios(false)
	if err != nil || len(noPG) != len(all)-ownCluster {
		t.Fatalf("without own cluster: %d scenarios, %v", len(noPG), err)
	}
	for _, f := range []string{"pg-restart", "pg-crash", "pg-failover"} {
		c = Config{Faults: []string{f}, CrashPoints: []string{"none"}}
		if _, err := c.scenarios(false); err == nil {
			t.Fatalf("%s on a given database accepted", f)
		}
		if s, err := c.scenarios(true); err != nil || len(s) != 1 {
			t.Fatalf("%s alone on the own cluster: %v, %v", f, s, err)
		}
	}
	c = Config{DatabaseURL: "postgres://x", DBSynchronousCommit: "off"}
	if err := c.validate(1); err == nil {
		t.Fatal("--db-synchronous-commit on a given database accepted")
	}
	c = Config{DBSynchronousCommit: "sometimes"}
	c.defaults()
	if err := c.validate(1); err == nil {
		t.Fatal("--db-synchronous-commit sometimes accepted")
	}
	c = Config{CrashPoints: []string{"provider-call", "nope"}}
	if _, err := c.scenarios(true); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown crash point: %v", err)
	}
}

func TestReadTemplatesRefuses(t *testing.T) {
	for _, in := range []string{
		`{"text": "no key here, pagar"}`,
		`{"text": "{key} twice {key} pagar"}`,
		`{"text": "chave {key}"}`, // no word asking to pay
		`not json`,
		"# only a comment\n",
	} {
		if _, err := ReadTemplates(strings.NewReader(in)); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func mustPix(t *testing.T) tools.Tool {
	t.Helper()
	p, err := tools.NewPixCharge(tools.HTTPConfig{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
