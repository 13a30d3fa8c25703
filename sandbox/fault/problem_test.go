package fault_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/retrysafe/retrysafe/internal/problemdocs"
	"github.com/retrysafe/retrysafe/sandbox/fault"
)

// An injected fault is a problem whose type is a documented URL.
func TestFaultProblemDocumented(t *testing.T) {
	t.Parallel()
	problemdocs.Check(t, fault.ProblemFault)
	h := fault.Injector{Default: fault.Spec{FailBefore: true}}.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Header().Get("Content-Type") != "application/problem+json" ||
		p.Type != fault.ProblemFault || p.Status != http.StatusInternalServerError {
		t.Fatalf("answered %d %s %s: %v", rec.Code, rec.Header().Get("Content-Type"), rec.Body, err)
	}
}
