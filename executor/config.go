package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/retrysafe/retrysafe/internal/backoff"
)

// Config's defaults and checks, and the system clock.

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error { return backoff.Sleep(ctx, d) }

func defaultOwner() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "worker"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b))
}

// newOwner is the lease owner of one call's claim or takeover, or of one
// reconciler pass's: Config.Owner and 64 random bits. Unique to the call
// whatever Config.Owner is (several processes may share one), so that a
// call whose claim was lost with its connection can tell, reading the
// row, that the claim is its own (adoptLost).
func (e *Executor) newOwner() string {
	return e.cfg.Owner + "/" + strconv.FormatUint(mrand.Uint64(), 36)
}

func (c Config) validate() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	if c.DB == nil {
		return bad("DB is required")
	}
	if _, isTx := c.DB.(pgx.Tx); isTx {
		return bad("DB must be a pool, not a transaction: the claim must commit before the provider is called")
	}
	if c.Intents == nil {
		return bad("Intents is required")
	}
	if c.Tools == nil {
		return bad("Tools is required")
	}
	if c.Owner == "" {
		c.Owner = defaultOwner()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Lease, DefaultLease)
	def(&c.Timeout, DefaultTimeout)
	def(&c.LeaseMargin, DefaultLeaseMargin)
	def(&c.BackoffBase, DefaultBackoffBase)
	def(&c.BackoffMax, DefaultBackoffMax)
	def(&c.RetryHorizon, DefaultRetryHorizon)
	def(&c.ReconcileInterval, DefaultReconcileInterval)
	def(&c.LostWriteRetry, DefaultLostWriteRetry)
	if c.ReconcileBatch == 0 {
		c.ReconcileBatch = DefaultReconcileBatch
	}
	if c.GroupCommit == 0 {
		c.GroupCommit = DefaultGroupCommit
	}
	if c.GroupCommitConns == 0 {
		c.GroupCommitConns = DefaultGroupCommitConns
	}
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	c.defaultHooks()
	switch {
	case c.Lease < 0 || c.Timeout < 0 || c.LeaseMargin < 0 || c.Heartbeat < 0 || c.BackoffBase < 0 || c.BackoffMax < 0 || c.ReconcileInterval < 0 || c.RetryHorizon < 0 || c.LostWriteRetry < 0:
		return bad("durations must not be negative")
	case c.MaxAttempts < 0:
		return bad("MaxAttempts must not be negative (0: no limit but RetryHorizon)")
	case c.ReconcileBatch < 1:
		return bad("ReconcileBatch must be at least 1")
	case c.GroupCommit < 1:
		return bad("GroupCommit must be at least 1 (1 turns grouping off)")
	case c.GroupCommitConns < 1:
		return bad("GroupCommitConns must be at least 1")
	case c.BackoffBase > c.BackoffMax:
		return bad("BackoffBase %s exceeds BackoffMax %s", c.BackoffBase, c.BackoffMax)
	case c.Lease.Microseconds() < 1:
		return bad("Lease must be at least 1µs")
	case c.Heartbeat == 0 && c.Lease <= c.Timeout+c.LeaseMargin:
		// Otherwise a taker could call the provider while this worker's
		// call is still running.
		return bad("Lease %s must exceed Timeout %s + LeaseMargin %s", c.Lease, c.Timeout, c.LeaseMargin)
	case c.Heartbeat > 0 && c.Lease <= 2*c.Heartbeat+c.LeaseMargin:
		// One missed beat must not lose the lease.
		return bad("with Heartbeat %s, Lease %s must exceed 2*Heartbeat + LeaseMargin %s", c.Heartbeat, c.Lease, c.LeaseMargin)
	}
	return c, nil
}
