package idempotency

import (
	"testing"

	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// Each statement's generic plan, made on a table no ANALYZE has seen (a
// new deployment, or any time on a server with autovacuum off), must look
// its row up by key: that plan is what a pooled connection keeps.
func TestGenericPlansReadWhatTheyName(t *testing.T) {
	t.Parallel()
	pgtest.CheckGenericPlans(t, pgtest.PlanCheck{
		Tables: []string{"idempotency_requests"},
		Statements: []pgtest.Statement{
			{Name: "requestReserveSQL", SQL: requestReserveSQL},
			{Name: "requestTakeOverSQL", SQL: requestTakeOverSQL},
			{Name: "requestGetSQL", SQL: requestGetSQL},
			{Name: "requestCompleteSQL", SQL: requestCompleteSQL},
			{Name: "requestReleaseSQL", SQL: requestReleaseSQL},
		},
	})
}
