package sidecar_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/retrysafe/retrysafe/internal/problemdocs"
	"github.com/retrysafe/retrysafe/server/sidecar"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

// Every problem type the sidecar answers with is a documented URL.
func TestProblemTypesDocumented(t *testing.T) {
	t.Parallel()
	if sidecar.ProblemDocs != problemdocs.Page {
		t.Fatalf("ProblemDocs %q", sidecar.ProblemDocs)
	}
	problemdocs.Check(t, sidecar.ProblemTypes...)
}

// 409 in_flight is a problem (application/problem+json, type in-flight)
// that keeps every member of the execute answer, so a client of the former
// application/json answer reads it unchanged.
func TestInFlightIsAProblem(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.psp.SetFault(func(r toolstest.Request) toolstest.Fault {
		if r.N == 1 {
			return toolstest.RateLimit
		}
		return toolstest.None
	})
	r := h.execute(tokenA, "inv-409", chargeFields(`180`, cpfDigits))
	p := r.problem(t) // checks the Content-Type
	if r.status != http.StatusConflict || p.Type != sidecar.ProblemInFlight || p.Title == "" {
		t.Fatalf("HTTP %d %s", r.status, r.body)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &members); err != nil {
		t.Fatal(err)
	}
	// "status" stays the string clients switch on (RFC 9457 3.1: a
	// non-number status is ignored by problem consumers).
	if string(members["status"]) != `"in_flight"` || members["detail"] == nil {
		t.Fatalf("members %s", r.body)
	}
	o := r.exec(t)
	if o.Status != "in_flight" || o.IntentRef != "inv-409" || o.Action != "pix.charge" || len(o.IdempotencyKey) != 64 ||
		o.Error == nil || o.Error.Class != "transient" || o.RetryAfterMillis <= 0 || o.DivergentFields == nil || o.IgnoredFields == nil {
		t.Fatalf("execute members %+v", o)
	}
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || int64(ra)*1000 > o.RetryAfterMillis {
		t.Fatalf("Retry-After %q, retry_after_ms %d", r.header.Get("Retry-After"), o.RetryAfterMillis)
	}
}
