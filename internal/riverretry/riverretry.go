// Package riverretry is the retry policy of retrysafe's River jobs (the
// agent's inbox and replies, the payment receipt relay): exponential
// backoff with jitter, so that jobs failing together do not retry together.
//
// # Imports
//
// It imports internal/backoff (the pause, the same as the executor's
// retries) and River's rivertype.
package riverretry

import (
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/retrysafe/retrysafe/internal/backoff"
)

// Policy is exponential backoff with jitter: the wait after attempt n is
// min(Max, Base*2^(n-1)), of which the upper half is random.
type Policy struct {
	Base, Max time.Duration
	Clock     func() time.Time // default time.Now
}

// NextRetry implements river.ClientRetryPolicy.
func (p *Policy) NextRetry(job *rivertype.JobRow) time.Time {
	now := time.Now
	if p.Clock != nil {
		now = p.Clock
	}
	return now().Add(p.Delay(job.Attempt))
}

// Delay is the wait before retrying after the given attempt (1 = first).
func (p *Policy) Delay(attempt int) time.Duration {
	return backoff.UpperHalf(backoff.Exponential(p.Base, p.Max, attempt))
}
