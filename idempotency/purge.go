package idempotency

import (
	"context"
	"time"
)

// Purge deletes every expired key, one batch of Config.PurgeBatch rows per
// statement, and returns how many it deleted. Each batch commits on its
// own, so no lock is held longer than one small DELETE, and rows that a
// request is working on are skipped, never waited for (they are picked up
// by a later purge).
func (m *Middleware) Purge(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := requestPurge(ctx, m.db, m.cfg.PurgeBatch)
		total += n
		if err != nil {
			return total, err
		}
		if n < m.cfg.PurgeBatch {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

// RunPurger purges at once and then every Config.PurgeEvery until ctx ends.
// Failures are logged and retried at the next tick: an unpurged key only
// costs space, since expired keys are treated as absent anyway. Run it in
// one or more processes; concurrent purgers skip each other's rows.
func (m *Middleware) RunPurger(ctx context.Context) {
	t := time.NewTicker(m.cfg.PurgeEvery)
	defer t.Stop()
	for {
		n, err := m.Purge(ctx)
		if err != nil && ctx.Err() == nil {
			m.cfg.Logger.Warn("idempotency: purge failed", "err", err, "deleted", n)
		} else if n > 0 {
			m.cfg.Logger.Debug("idempotency: purged expired keys", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
