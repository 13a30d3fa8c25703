// Package riverretry is the retry policy of retrysafe's River jobs (the
// agent's inbox and replies, the payment receipt relay): exponential
// backoff with jitter, so that jobs failing together do not retry together.
package riverretry

import (
	"math/rand/v2"
	"time"

	"github.com/riverqueue/river/rivertype"
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
	d := p.Base
	for i := 1; i < attempt && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(half+1)
}
