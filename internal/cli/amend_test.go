package cli

import (
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/executor"
)

// 180,00 completed; `retrysafe amend` to 190,00 is refused with what to
// do instead, and a redelivery replays the 180,00 charge; the override
// needs who, is recorded, and inspect then shows both actions.
func TestAmendCompletedCharge(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t, 5)
	o := f.charge("tenant-a", "inv-a1")
	if o.Status != executor.StatusCompleted {
		t.Fatalf("%+v", o)
	}
	base := []string{"amend", "--tenant", "tenant-a", "--ref", "inv-a1", "--action", "pix.charge",
		"--fields", `{"customer_id":"c-1","amount":"190,00","pix_key":"529.982.247-25","pix_key_type":"cpf"}`}
	code, _, errb := f.run(append(base, "--reason", "customer said 190")...)
	if code != 1 || !strings.Contains(errb, "completed and moves money") || !strings.Contains(errb, "Refund") {
		t.Fatalf("amend of a completed charge: exit %d: %s", code, errb)
	}
	if again := f.charge("tenant-a", "inv-a1"); again.Status != executor.StatusCompleted || !again.Replayed || again.Key != o.Key || f.psp.Count("") != 1 {
		t.Fatalf("redelivery after the refusal: %+v, %d charges", again, f.psp.Count(""))
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--reason", "x", "--override-completed", "--by", ""}, "--override-completed needs --by"},
		{[]string{"--reason", " "}, "--reason is required"},
	} {
		if code, _, errb := f.run(append(base, tc.args...)...); code != 2 || !strings.Contains(errb, tc.want) {
			t.Errorf("%v: exit %d: %s", tc.args, code, errb)
		}
	}
	dup := []string{"amend", "--tenant", "tenant-a", "--ref", "inv-a1", "--action", "pix.charge", "--reason", "x",
		"--fields", `{"amount":"1,00","amount":"190,00"}`}
	if code, _, errb := f.run(dup...); code != 2 || !strings.Contains(errb, "duplicate member") {
		t.Errorf("duplicate member: exit %d: %s", code, errb)
	}

	code, out, errb := f.run(append(base, "--reason", "second charge agreed with the customer", "--override-completed", "--by", "op-5")...)
	if code != 0 || !strings.Contains(out, "override recorded") {
		t.Fatalf("override: exit %d: %s %s", code, out, errb)
	}
	second := f.charge("tenant-a", "inv-a1")
	if second.Status != executor.StatusCompleted || second.Replayed || second.Key == o.Key || f.psp.Count("") != 2 {
		t.Fatalf("after the override: %+v, %d charges", second, f.psp.Count(""))
	}
	code, out, _ = f.run("inspect", "--tenant", "tenant-a", "--ref", "inv-a1", "--action", "pix.charge")
	for _, want := range []string{"OVERRIDE: amended past a completed action", "by op-5", "earlier actions", o.Key + "  completed", `"amount_cents":18000`, `"amount_cents":19000`} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("inspect lacks %q:\n%s", want, out)
		}
	}
}
