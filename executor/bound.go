package executor

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// writeTimeout bounds the bookkeeping writes that follow a provider call.
// They run detached from the caller's context: once the provider answered,
// a caller that gave up must not keep the answer from being recorded.
const writeTimeout = 10 * time.Second

// writeBound is the deadline of the executor's own writes (a group's
// batch, a completion, a release): one context shared by every write that
// starts while it has at least half of writeTimeout left, so each write is
// bounded by between writeTimeout/2 and writeTimeout.
//
// Why not a context.WithTimeout per write: a new timer that becomes the
// earliest one wakes a sleeping thread to re-arm the poller, a futex wake
// and a sleep again (runtime.wakeNetPoller under time.AfterFunc in a CPU
// profile of lone calls). A lone call made three of them (its claim's
// group, its completion's group and the completion's own bound), and on
// this project's two-core virtual machines, where a system call is dear,
// Execute took 1.04 to 1.06 times as long as with grouping off, which
// made one. With the shared bound, 1.01 to 1.02 (one connection, the two
// interleaved in blocks of 16 calls, four runs of 3,000; the shared bound
// against a timer per write, the same way: 0.97 to 0.99).
type writeBound struct {
	cur atomic.Pointer[boundCtx]
	mu  sync.Mutex // serializes renewals
}

type boundCtx struct {
	ctx context.Context
	// cancel is never called: writes may still hold a superseded ctx,
	// and its own timer ends it at its deadline, releasing it.
	cancel context.CancelFunc
	renew  time.Time // when a write should take a new one
}

// get returns a context that ends at least writeTimeout/2 from now and at
// most writeTimeout from now.
func (w *writeBound) get() context.Context {
	now := time.Now()
	if b := w.cur.Load(); b != nil && now.Before(b.renew) {
		return b.ctx
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if b := w.cur.Load(); b != nil && now.Before(b.renew) {
		return b.ctx
	}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	w.cur.Store(&boundCtx{ctx: ctx, cancel: cancel, renew: now.Add(writeTimeout / 2)})
	return ctx
}

// detach returns ctx's values under the shared write bound: neither the
// caller's cancellation nor its deadline reach the write (as with
// context.WithoutCancel), the bound does.
func (w *writeBound) detach(ctx context.Context) context.Context {
	return detached{Context: ctx, bound: w.get()}
}

// detached is a caller's context for its values only, with the shared
// bound's deadline and cancellation. Value asks the bound first: it holds
// no values of its own, only its cancellation's identity, which lets
// context.AfterFunc (pgx watches every query's context with it) register
// with the bound instead of starting a goroutine per query.
type detached struct {
	context.Context
	bound context.Context
}

func (d detached) Deadline() (time.Time, bool) { return d.bound.Deadline() }
func (d detached) Done() <-chan struct{}       { return d.bound.Done() }
func (d detached) Err() error                  { return d.bound.Err() }
func (d detached) Value(key any) any {
	if v := d.bound.Value(key); v != nil {
		return v
	}
	return d.Context.Value(key)
}
