// Package backoff computes the pause before a retry: exponential in the
// attempt number, capped, with jitter so that callers that failed together
// do not come back together. The executor's transient-failure retries, the
// River jobs' retry policy (internal/riverretry), the idempotency
// middleware's polling of an unfinished key and the sandbox PSP's webhook
// redeliveries all take their pauses from here.
//
// The pause is a pure function of the attempt number, not the state of a
// retry loop: every caller reads its attempt from a database row (an
// action's attempt, a River job's, a delivery's), and the process that
// retries is often not the one that failed. That is why this is not
// github.com/cenkalti/backoff, whose ExponentialBackOff is a stateful
// sequence (NextBackOff advances it) and whose jitter is symmetric around
// the interval: the executor's pause must never exceed its cap
// (Config.BackoffMax) nor fall below half of it.
//
// # Imports
//
// This package imports only the standard library.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Exponential is base doubled for every attempt after the first, capped
// at max: the pause after attempt n (1 = the first) before jitter. An
// attempt below 1 counts as 1, and a base above max gives max.
func Exponential(base, max time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// UpperHalf returns a random pause in [d/2, d]: spread enough that a crowd
// thins out, never longer than d (so a cap stays a cap) and never shorter
// than half of it.
func UpperHalf(d time.Duration) time.Duration {
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(half+1)
}

// Spread returns d moved by a random fraction of at most frac either way,
// uniformly in [d·(1-frac), d·(1+frac)].
func Spread(d time.Duration, frac float64) time.Duration {
	return d + time.Duration(float64(d)*frac*(2*rand.Float64()-1))
}

// Sleep waits d, or until ctx is done (returning its error): how every
// retry loop here waits out a delay. A non-positive d does not wait.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
