package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// opFunc performs operation i for caller w and returns when it was in the
// tool (zero when the tool was not called).
type opFunc func(ctx context.Context, w int, i int64) (tool toolSpan, err error)

// toolSpan is when an operation was in the tool: from the first call's
// start to the last one's end, and the time spent inside the calls (less
// than end - start only when it called more than once).
type toolSpan struct {
	start, end time.Time
	in         time.Duration
}

// span is the toolSpan of one call from t0 to now.
func span(t0 time.Time) toolSpan {
	t1 := time.Now()
	return toolSpan{start: t0, end: t1, in: t1.Sub(t0)}
}

// sample is what one measured point yields.
type sample struct {
	Ops     int64         // operations completed inside the window
	Total   int64         // operations issued, warm-up included (for per-op counters)
	Elapsed time.Duration // the window
	Lat     []time.Duration
	Added   []time.Duration // latency minus the time spent in the tool
	// Before, Tool and After split the latency of the operations that
	// called the tool: up to the call, in it, and after it. For a runtime
	// they are its work before the side effect (the claim) and after it
	// (recording the outcome).
	Before, Tool, After []time.Duration
	// Extended is how long the window stayed open after it was due to
	// close because no operation inside it had completed yet (usually 0).
	Extended time.Duration
	Err      error
}

// record adds one operation that ran from t0 to t1, and was in the tool
// during tool (zero when it did not call it), to s's latencies.
func (s *sample) record(t0, t1 time.Time, tool toolSpan) {
	d := t1.Sub(t0)
	s.Lat = append(s.Lat, d)
	s.Added = append(s.Added, d-tool.in)
	if !tool.start.IsZero() {
		s.Before = append(s.Before, tool.start.Sub(t0))
		s.Tool = append(s.Tool, tool.in)
		s.After = append(s.After, t1.Sub(tool.end))
	}
}

// merge adds o's latencies to s's (not its counters).
func (s *sample) merge(o *sample) {
	s.Lat = append(s.Lat, o.Lat...)
	s.Added = append(s.Added, o.Added...)
	s.Before = append(s.Before, o.Before...)
	s.Tool = append(s.Tool, o.Tool...)
	s.After = append(s.After, o.After...)
}

func (s *sample) rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Ops) / s.Elapsed.Seconds()
}

// measure runs op from callers goroutines for warmup + dur and records the
// operations that started after the warm-up and completed inside the window.
// The first error stops the run.
func measure(ctx context.Context, callers int, warmup, dur time.Duration, op opFunc) *sample {
	return measureWhile(ctx, callers, warmup, op, func() error {
		t := time.NewTimer(dur)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// measureWhile runs op from callers goroutines; after warmup it runs window
// in the foreground, and the operations that started and completed while it
// ran are recorded.
//
// The window stays open past window's return until one operation that
// started in it has completed. On a shared machine a single stall (a
// neighbour's fsync, a checkpoint) can outlast a short slice at one caller;
// closing the window on time would then record nothing, and a point with
// no operation has no rate. Kept open, the slice's rate counts the stall
// in its elapsed time, as a caller would have felt it, and Extended says
// by how much.
func measureWhile(ctx context.Context, callers int, warmup time.Duration, op opFunc, window func() error) *sample {
	var (
		next      atomic.Int64
		total     atomic.Int64
		stop      atomic.Bool
		from      atomic.Int64 // unix ns; 0 until the window opens
		to        atomic.Int64 // unix ns; 0 while the window is open
		mu        sync.Mutex
		wg        sync.WaitGroup
		s         = &sample{}
		errOnce   sync.Once
		stopped   = make(chan struct{}) // closed by the first error
		firstIn   = make(chan struct{}) // closed when an operation inside the window completes
		firstOnce sync.Once
	)
	setErr := func(err error) {
		errOnce.Do(func() { s.Err = err; close(stopped) })
		stop.Store(true)
	}
	next.Store(-1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine sample
			for !stop.Load() {
				i := next.Add(1)
				t0 := time.Now()
				tool, err := op(ctx, w, i)
				t1 := time.Now()
				total.Add(1)
				if err != nil {
					if ctx.Err() == nil {
						setErr(fmt.Errorf("caller %d, op %d: %w", w, i, err))
					}
					break
				}
				f, e := from.Load(), to.Load()
				if f == 0 || t0.UnixNano() < f || (e != 0 && t1.UnixNano() > e) {
					continue
				}
				firstOnce.Do(func() { close(firstIn) })
				mine.record(t0, t1, tool)
			}
			mu.Lock()
			s.merge(&mine)
			mu.Unlock()
		}()
	}
	sleep(ctx, warmup)
	start := time.Now()
	from.Store(start.UnixNano())
	if !stop.Load() {
		if err := window(); err != nil {
			setErr(fmt.Errorf("during the window: %w", err))
		}
	}
	var extended time.Duration
	select {
	case <-firstIn:
	default:
		closing := time.Now()
		select {
		case <-firstIn:
		case <-stopped:
		case <-ctx.Done():
		}
		extended = time.Since(closing)
	}
	end := time.Now()
	to.Store(end.UnixNano())
	stop.Store(true)
	wg.Wait()
	s.Ops = int64(len(s.Lat))
	s.Total = total.Load()
	s.Elapsed = end.Sub(start)
	if s.Ops > 0 {
		s.Extended = extended
	}
	if s.Err == nil && s.Ops == 0 {
		s.Err = fmt.Errorf("no operation completed in %s", s.Elapsed)
	}
	return s
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// pct returns the p-quantile (0..1) of ds, in milliseconds.
func pct(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p * float64(len(s)-1))
	return float64(s[i]) / float64(time.Millisecond)
}
