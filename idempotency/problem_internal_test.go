package idempotency

import (
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/problemdocs"
)

// Every answer the middleware gives on its own has a type in ProblemTypes,
// each a documented section of docs/problems.md, and says whether a retry
// should wait.
func TestEveryProblemIsListedAndDocumented(t *testing.T) {
	t.Parallel()
	problemdocs.Check(t, ProblemTypes...)
	for _, tc := range []struct {
		err        error
		status     int
		retryAfter time.Duration
	}{
		{ErrKeyMissing, http.StatusBadRequest, 0},
		{&KeyError{Reason: "the key is empty"}, http.StatusBadRequest, 0},
		{ErrKeyReused, http.StatusUnprocessableEntity, 0},
		{&InFlightError{RetryAfter: 2 * time.Second}, http.StatusConflict, 2 * time.Second},
		{ErrUnauthenticated, http.StatusUnauthorized, 0},
		{ErrBodyTooLarge, http.StatusRequestEntityTooLarge, 0},
		{errBodyRead, http.StatusBadRequest, 0},
		{errNotCommitted, http.StatusInternalServerError, 0},
		{errStore, http.StatusServiceUnavailable, time.Second},
		{errors.New("anything else"), http.StatusInternalServerError, 0},
	} {
		p, ra := problemFor(tc.err)
		if !slices.Contains(ProblemTypes, p.Type) || p.Title == "" || p.Status != tc.status || ra != tc.retryAfter {
			t.Errorf("%v: answered %+v, Retry-After %v; want status %d, Retry-After %v, a listed type",
				tc.err, p, ra, tc.status, tc.retryAfter)
		}
	}
}
