package backoff_test

import (
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/backoff"
)

func TestExponential(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	for _, tc := range []struct {
		base, max time.Duration
		attempt   int
		want      time.Duration
	}{
		{200 * ms, time.Minute, 0, 200 * ms},
		{200 * ms, time.Minute, 1, 200 * ms},
		{200 * ms, time.Minute, 2, 400 * ms},
		{200 * ms, time.Minute, 5, 3200 * ms},
		{200 * ms, time.Minute, 9, 51200 * ms},
		{200 * ms, time.Minute, 10, time.Minute},
		{200 * ms, time.Minute, 1 << 30, time.Minute}, // no overflow: doubling stops at the cap
		{time.Second, 500 * ms, 1, 500 * ms},
		{0, time.Second, 3, 0},
	} {
		if got := backoff.Exponential(tc.base, tc.max, tc.attempt); got != tc.want {
			t.Errorf("Exponential(%v, %v, %d) = %v, want %v", tc.base, tc.max, tc.attempt, got, tc.want)
		}
	}
}

func TestUpperHalf(t *testing.T) {
	t.Parallel()
	d := 100 * time.Millisecond
	lo, hi := d, time.Duration(0)
	for range 2000 {
		got := backoff.UpperHalf(d)
		lo, hi = min(lo, got), max(hi, got)
	}
	if lo < d/2 || hi > d || hi-lo < d/4 {
		t.Fatalf("UpperHalf(%v) ranged over [%v, %v], want a spread inside [%v, %v]", d, lo, hi, d/2, d)
	}
	if got := backoff.UpperHalf(1); got != 1 {
		t.Fatalf("UpperHalf(1ns) = %v", got)
	}
}

func TestSpread(t *testing.T) {
	t.Parallel()
	d := time.Second
	lo, hi := 2*d, time.Duration(0)
	for range 2000 {
		got := backoff.Spread(d, 0.2)
		lo, hi = min(lo, got), max(hi, got)
	}
	if lo < 800*time.Millisecond || hi > 1200*time.Millisecond || hi-lo < 200*time.Millisecond {
		t.Fatalf("Spread(1s, 0.2) ranged over [%v, %v]", lo, hi)
	}
}
