package partition

import (
	"testing"
	"time"
)

// The throttle sleeps, at each check, until the bytes counted since the
// last one fit the rate; below the rate it never sleeps.
func TestThrottleBoundsRate(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	now := time.Duration(0)
	var slept time.Duration
	th := NewThrottle(1000) // bytes per second
	th.now = func() time.Time { return base.Add(now) }
	th.sleep = func(d time.Duration) { slept += d; now += d }

	th.wait(600)
	now = throttleCheckInterval
	th.wait(0)
	if want := 300 * time.Millisecond; slept != want {
		t.Fatalf("slept %v at 600 bytes in 300 ms of a 1000 B/s throttle, want %v", slept, want)
	}
	slept = 0
	th.wait(100)
	now += throttleCheckInterval
	th.wait(100)
	if slept != 0 {
		t.Fatalf("slept %v at 200 bytes in 300 ms, under the rate", slept)
	}
	var none *Throttle
	none.wait(1 << 30) // a nil throttle bounds nothing
}
