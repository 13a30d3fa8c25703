package testutil

import (
	"sync"
	"testing"
	"time"
)

// Together calls f(0), …, f(n-1), each in its own goroutine, and returns
// when all have returned. The goroutines wait at a barrier that opens once
// all n are started, so that they reach the code under test as nearly at
// once as the scheduler allows.
func Together(n int, f func(i int)) {
	TogetherPrepared(n, func(i int) func() { return func() { f(i) } })
}

// TogetherPrepared is Together with a preparation off the race: goroutine i
// calls prepare(i) before the barrier (to build its inputs) and the
// function it returned after.
func TogetherPrepared(n int, prepare func(i int) (run func())) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := prepare(i)
			<-start
			run()
		}()
	}
	close(start)
	wg.Wait()
}

// FinishWithin runs f in its own goroutine and fails the test if it has not
// returned after d (a deadlock, most likely); what names f in the failure.
// On a timeout f is left running.
func FinishWithin(tb testing.TB, d time.Duration, what string, f func()) {
	tb.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		tb.Fatalf("%s did not finish within %v: deadlock?", what, d)
	}
}
