package mcpserver

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/server/metrics"
)

// An execution without an outcome is answered as the sidecar answers it:
// only what the sidecar answers 503 (the database, a timeout) tells the
// model that calling again is safe; what the sidecar answers 400, 404 or
// 409 tells it not to call again unchanged.
func TestExecuteErrorsAsTheSidecar(t *testing.T) {
	t.Parallel()
	s := &Server{cfg: Config{Metrics: metrics.New()}}
	for _, c := range []struct {
		name  string
		err   error
		want  string
		retry bool
	}{
		{"database down", errors.New("dial tcp 127.0.0.1:5432: connection refused"), StatusError, true},
		{"refused value (sidecar 400)", fmt.Errorf("executor: freeze and claim: %w (SQLSTATE 22021)", executor.ErrRefused), StatusInvalid, false},
		{"unknown action (sidecar 404)", fmt.Errorf("%w: %q", executor.ErrUnknownTool, "pix.nope"), StatusInvalid, false},
		{"key in use (sidecar 409)", intent.ErrKeyInUse, StatusInvalid, false},
		{"invalid field (sidecar 400)", &derive.FieldError{Field: "amount", Reason: "not an amount"}, StatusInvalid, false},
	} {
		r := s.executeError("t1", "pix.charge", c.err, &callNote{})
		if r.Status != c.want || (r.RetryAfterMillis > 0) != c.retry {
			t.Errorf("%s: status %q, retry after %d ms; want %q, retry %v", c.name, r.Status, r.RetryAfterMillis, c.want, c.retry)
		}
		if safe := strings.Contains(r.Message, "is safe"); safe != c.retry {
			t.Errorf("%s: message %q says retrying is safe: %v, want %v", c.name, r.Message, safe, c.retry)
		}
	}
}
