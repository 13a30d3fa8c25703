package executor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/tools"
)

// Issue 18: 180,00 completed, then an amendment to 190,00, then the
// original message redelivered made two charges (18,000 and 19,000). The
// amendment is now refused, and the redelivery replays the 18,000 charge.
// An operator's override is explicit and recorded, and only then does the
// amended intent charge under its new key.
func TestAmendOfCompletedChargeRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	cpf := testutil.CPF(5100)
	fields := func(amount string) map[string]any {
		return map[string]any{"customer_id": "cust-1", "amount": amount, "pix_key": cpf, "pix_key_type": "cpf"}
	}
	first, err := e.ex.Execute(ctx, pixCall("t1", "NF-2026-000123", fields("180,00")), nil)
	if err != nil || first.Status != executor.StatusCompleted {
		t.Fatal(first, err)
	}
	amend := intent.AmendParams{Tenant: "t1", Ref: "NF-2026-000123", Action: tools.PixChargeName, Fields: fields("190,00"), Reason: "customer said 190"}
	if _, err := e.store.Amend(ctx, e.pool, amend); !errors.Is(err, intent.ErrCompleted) {
		t.Fatalf("amend of a completed charge: %v", err)
	}
	for _, f := range []map[string]any{fields("180,00"), fields("190,00")} {
		again, err := e.ex.Execute(ctx, pixCall("t1", "NF-2026-000123", f), nil)
		if err != nil || again.Status != executor.StatusCompleted || !again.Replayed || again.Key != first.Key {
			t.Fatalf("redelivery: %+v %v", again, err)
		}
	}
	if rec := e.psp.Records(""); len(rec) != 1 || fmt.Sprint(rec[0]["amount_cents"]) != "18000" {
		t.Fatalf("charges %v, want one of 18000", rec)
	}

	// The override: recorded, and the amended intent is a new action.
	amend.OverrideCompleted, amend.By = true, "op-3"
	res, err := e.store.Amend(ctx, e.pool, amend)
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.ex.Execute(ctx, pixCall("t1", "NF-2026-000123", fields("180,00")), nil)
	if err != nil || second.Status != executor.StatusCompleted || second.Replayed || second.Key != res.Intent.Key {
		t.Fatalf("after the override: %+v %v", second, err)
	}
	if old, err := executor.Get(ctx, e.pool, "t1", first.Key); err != nil || old.Status != executor.RowCompleted {
		t.Fatalf("the first charge's action: %+v %v", old, err)
	}
	if rec := e.psp.Records(""); len(rec) != 2 || fmt.Sprint(rec[1]["amount_cents"]) != "19000" {
		t.Fatalf("charges %v, want the override's second", rec)
	}
}
