package executor

import (
	"context"
	"errors"
	"testing"
	"time"
)

type boundKey struct{}

func TestWriteBoundSharedAndBounded(t *testing.T) {
	t.Parallel()
	var w writeBound
	before := time.Now()
	a := w.get()
	dl, ok := a.Deadline()
	if !ok || dl.Before(before.Add(writeTimeout)) || dl.After(time.Now().Add(writeTimeout)) {
		t.Fatalf("deadline %v (set %t), want writeTimeout from now", dl, ok)
	}
	if b := w.get(); b != a {
		t.Fatal("a write that starts with more than half the bound left took a new context")
	}
	// Past half the bound, the next write gets a new context: no write is
	// left with less than writeTimeout/2.
	w.cur.Load().renew = time.Now()
	if b := w.get(); b == a {
		t.Fatal("a write past the renewal time got the old context")
	} else if d, _ := b.Deadline(); time.Until(d) < writeTimeout/2 {
		t.Fatalf("new bound ends in %v", time.Until(d))
	}
}

func TestDetachedKeepsValuesNotCancellation(t *testing.T) {
	t.Parallel()
	var w writeBound
	caller, cancel := context.WithTimeout(context.WithValue(context.Background(), boundKey{}, "trace-1"), time.Millisecond)
	cancel()
	d := w.detach(caller)
	if d.Err() != nil {
		t.Fatalf("a canceled caller canceled the write: %v", d.Err())
	}
	if got := d.Value(boundKey{}); got != "trace-1" {
		t.Fatalf("caller's value %v, want trace-1", got)
	}
	if dl, _ := d.Deadline(); time.Until(dl) < writeTimeout/2 {
		t.Fatalf("deadline in %v: the caller's, not the bound's", time.Until(dl))
	}
	// context.AfterFunc (pgx's query watch) registers with the bound and
	// runs when it ends.
	var bound writeBound
	ctx, end := context.WithCancel(context.Background())
	bound.cur.Store(&boundCtx{ctx: ctx, cancel: end, renew: time.Now().Add(time.Hour)})
	d = bound.detach(caller)
	ran := make(chan struct{})
	context.AfterFunc(d, func() { close(ran) })
	end()
	<-ran
	if !errors.Is(d.Err(), context.Canceled) || context.Cause(d) != context.Canceled {
		t.Fatalf("after the bound ended: err %v, cause %v", d.Err(), context.Cause(d))
	}
}
