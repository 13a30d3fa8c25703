package idempotency_test

import (
	"testing"

	"github.com/retrysafe/retrysafe/idempotency"
	"github.com/retrysafe/retrysafe/internal/problemdocs"
)

// Every problem type the middleware answers with is a documented URL.
func TestProblemTypesDocumented(t *testing.T) {
	t.Parallel()
	if idempotency.ProblemDocs != problemdocs.Page {
		t.Fatalf("ProblemDocs %q", idempotency.ProblemDocs)
	}
	problemdocs.Check(t, idempotency.ProblemTypes...)
}
