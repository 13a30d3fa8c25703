package restarttest

import (
	"math"
	"testing"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/tools/apipix"
)

// The refunds' plan: only API Pix, about the rate, reproducible by seed,
// dealt evenly to the refund points, partial (1 centavo to half).
func TestPlanRefunds(t *testing.T) {
	t.Parallel()
	plan := func(psp string, rate float64, seed int64) []*RunPlan {
		tt := &tester{cfg: Config{PSP: psp, RefundRate: rate, Seed: seed}}
		for i := range 400 {
			tt.runs = append(tt.runs, &RunPlan{Index: i, AmountCents: int64(1000 + 37*i)})
		}
		tt.planRefunds()
		return tt.runs
	}
	count := func(runs []*RunPlan) map[string]int {
		n := map[string]int{}
		for _, r := range runs {
			if r.RefundScenario != "" {
				n[r.RefundScenario]++
				if r.RefundCents < 1 || r.RefundCents > max(1, r.AmountCents/2) {
					t.Errorf("run %d: refund %d of %d", r.Index, r.RefundCents, r.AmountCents)
				}
			}
		}
		return n
	}
	if n := count(plan(PSPV1, 0.3, 1)); len(n) != 0 {
		t.Errorf("v1 PSP planned refunds: %v", n)
	}
	if n := count(plan(PSPAPIPix, 0, 1)); len(n) != 0 {
		t.Errorf("rate 0 planned refunds: %v", n)
	}
	a, b := plan(PSPAPIPix, 0.3, 42), plan(PSPAPIPix, 0.3, 42)
	total := 0
	n := count(a)
	for _, p := range RefundPoints {
		total += n[p]
	}
	if math.Abs(float64(total)/400-0.3) > 0.08 {
		t.Errorf("%d of 400 runs refund at rate 0.3", total)
	}
	for _, p := range RefundPoints {
		if d := n[p] - total/len(RefundPoints); d < -1 || d > 1 {
			t.Errorf("refund point %s got %d of %d", p, n[p], total)
		}
	}
	for i := range a {
		if a[i].RefundScenario != b[i].RefundScenario || a[i].RefundCents != b[i].RefundCents {
			t.Fatalf("run %d: the same seed planned two refunds", i)
		}
	}
}

// A refund point's failpoint is the executor's point for pix.refund, as
// the executor hits it (executor.Config.Failpoints).
func TestRefundCrashPoint(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"action-claimed":    agent.FailActionClaimed + "." + apipix.RefundName,
		"provider-answered": agent.FailProviderAnswered + "." + apipix.RefundName,
		"provider-call":     "",
		"random":            "",
	} {
		if got := refundCrashPoint(name).Failpoint; got != want {
			t.Errorf("%s: failpoint %q, want %q", name, got, want)
		}
	}
	if refundRef("RT-1-00001") != "RT-1-00001:refund:1" {
		t.Error("refund intent_ref")
	}
}

// A refund stays within half of what the charge was paid, which a misread
// amount makes less than the plan's.
func TestRefundWithinPaid(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		valor         string
		planned, want int64
	}{
		{"180.00", 9000, 9000},  // paid as planned
		{"18.00", 9000, 900},    // a slipped decimal point
		{"0.01", 1, 1},          // a centavo refunds a centavo
		{"0.01", 5, 1},          // never below one
		{"", 9000, 9000},        // not paid (or not read): as planned
		{"18.0", 9000, 9000},    // not an API Pix valor
		{"1,80", 9000, 9000},    // nor this
		{"1800.00", 4000, 4000}, // within already
	} {
		if got := refundWithinPaid(c.planned, pixCents(c.valor)); got != c.want {
			t.Errorf("refund %d of a Pix of %q: %d, want %d", c.planned, c.valor, got, c.want)
		}
	}
}

// A refund moves to a point left unreached from the later point with the
// most left, never taking a later point's last one, and is then counted
// under the point it moved to.
func TestMoveRefund(t *testing.T) {
	t.Parallel()
	runs := func(point string, n int) []*RunPlan {
		var out []*RunPlan
		for i := range n {
			out = append(out, &RunPlan{Index: i, RefundScenario: point})
		}
		return out
	}
	byPoint := map[string][]*RunPlan{
		"action-claimed": runs("action-claimed", 1),
		"provider-call":  runs("provider-call", 2),
		"random":         runs("random", 2),
	}
	// A tie goes to the last of later (random): it is met by any kill.
	r := moveRefund(byPoint, "action-claimed", RefundPoints[1:])
	if r == nil || r.RefundScenario != "action-claimed" || len(byPoint["random"]) != 1 || len(byPoint["action-claimed"]) != 2 {
		t.Fatalf("first move: %+v, left %d at random, %d at action-claimed", r, len(byPoint["random"]), len(byPoint["action-claimed"]))
	}
	if r = moveRefund(byPoint, "action-claimed", RefundPoints[1:]); r == nil || len(byPoint["provider-call"]) != 1 {
		t.Fatalf("second move: %+v, left %d at provider-call", r, len(byPoint["provider-call"]))
	}
	// Every later point is down to its last refund: nothing moves.
	if r = moveRefund(byPoint, "action-claimed", RefundPoints[1:]); r != nil {
		t.Fatalf("moved a point's last refund: %+v", r)
	}
	if r = moveRefund(byPoint, "random", nil); r != nil {
		t.Fatalf("moved with no later point: %+v", r)
	}
	if n := len(byPoint["action-claimed"]); n != 3 {
		t.Errorf("action-claimed has %d refunds, want 3", n)
	}
}
