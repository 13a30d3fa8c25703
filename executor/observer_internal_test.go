package executor

import (
	"errors"
	"testing"
)

// Unset, the hooks cost the hot path nothing: no allocation, no clock.
func TestHooksUnsetAllocateNothing(t *testing.T) {
	var c Config
	c.defaultHooks()
	e := &Executor{cfg: c}
	h := held{tenant: "t1", key: "k", action: "pix.charge", attempt: 2}
	out := &Outcome{Action: "pix.charge"}
	fail := errors.New("boom")
	n := testing.AllocsPerRun(1000, func() {
		err := fail
		e.called(h, e.calling(h), &err)
		e.looked(h, e.start(), &err)
		e.finished("t1", "", e.start(), out, err)
	})
	if n != 0 {
		t.Fatalf("%v allocations per call with the default hooks", n)
	}
	if !e.start().IsZero() {
		t.Fatal("the clock was read with nothing observing")
	}
}
