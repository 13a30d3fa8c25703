package metrics

import (
	"fmt"
	"sync"
	"testing"
)

// Pairs seen at once from many goroutines are each recorded, none lost
// to a concurrent copy.
func TestInitPairConcurrent(t *testing.T) {
	t.Parallel()
	m := New()
	const goroutines, tenants, actions = 256, 4, 3
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range goroutines {
		wg.Go(func() {
			<-start
			m.initPair(fmt.Sprintf("t%d", g%tenants), fmt.Sprintf("a%d", g%actions))
		})
	}
	close(start)
	wg.Wait()
	seen := *m.seen.Load()
	if len(seen) != tenants*actions {
		t.Fatalf("%d pairs recorded, want %d: %v", len(seen), tenants*actions, seen)
	}
}

// A pair already seen costs no allocation: the lookup runs on every
// execution. (Not parallel: AllocsPerRun counts the whole process's.)
func TestInitPairSeenAllocatesNothing(t *testing.T) {
	m := New()
	tenant, action := "t1", "a2"
	m.initPair(tenant, action)
	if allocs := testing.AllocsPerRun(100, func() { m.initPair(tenant, action) }); allocs != 0 {
		t.Errorf("a seen pair's lookup allocates %.0f times", allocs)
	}
}
