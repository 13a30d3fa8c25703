package testutil

import (
	"runtime"
	"sync"
)

// Crashpoints stand for a process dying at a named point, inside one test
// process: code under test calls Hit(name) at the point (through its
// failpoint hook), and once a test has armed the name the nth next hit ends
// the calling goroutine on the spot with runtime.Goexit. Nothing after the
// point runs, though deferred calls do; what was committed stays, and what
// was held (claims, leases) stays held until it expires. Run the code with
// RunCrashable to learn whether it died there. The zero value is ready and
// arms nothing.
type Crashpoints struct {
	mu    sync.Mutex
	armed map[string]int // name -> hits left before it "crashes"
}

// Arm makes the nth next Hit(name) end its goroutine (nth 1: the next one).
func (c *Crashpoints) Arm(name string, nth int) {
	c.mu.Lock()
	if c.armed == nil {
		c.armed = map[string]int{}
	}
	c.armed[name] = nth
	c.mu.Unlock()
}

// Hit counts a hit of the named point and, on the armed one, calls
// runtime.Goexit. An unarmed name does nothing.
func (c *Crashpoints) Hit(name string) {
	c.mu.Lock()
	n, ok := c.armed[name]
	if ok {
		n--
		if n == 0 {
			delete(c.armed, name)
		} else {
			c.armed[name] = n
		}
	}
	c.mu.Unlock()
	if ok && n == 0 {
		runtime.Goexit()
	}
}

// RunCrashable runs f in its own goroutine, as a queue worker would, and
// waits for it; crashed reports that f did not return because its goroutine
// ended early (an armed Crashpoints hit), in which case err is nil.
func RunCrashable(f func() error) (err error, crashed bool) {
	done := make(chan struct{})
	crashed = true
	go func() {
		defer close(done)
		err = f()
		crashed = false
	}()
	<-done
	return err, crashed
}
