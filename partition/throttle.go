package partition

import (
	"sync"
	"time"
)

// Throttle bounds the bytes per second of the cleaners that share it
// (Kafka's log.cleaner.io.max.bytes.per.second and its Throttler): each
// pass counts what it reads for the offset map, reads for the copy and
// writes; every checkInterval, if the rate since the last check is above
// the target, the caller sleeps until it is not.
type Throttle struct {
	rate float64 // bytes per second; <= 0: unbounded

	mu    sync.Mutex
	start time.Time
	bytes float64
	sleep func(time.Duration) // time.Sleep; tests replace it
	now   func() time.Time
}

// throttleCheckInterval is how often the rate is checked (Kafka: 300 ms).
const throttleCheckInterval = 300 * time.Millisecond

// NewThrottle returns a Throttle of bytesPerSecond (<= 0: unbounded).
func NewThrottle(bytesPerSecond float64) *Throttle {
	return &Throttle{rate: bytesPerSecond, sleep: time.Sleep, now: time.Now}
}

// wait counts n bytes and sleeps if the rate is over the target. A nil
// Throttle does nothing.
func (t *Throttle) wait(n int64) {
	if t == nil || t.rate <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if t.start.IsZero() {
		t.start = now
	}
	t.bytes += float64(n)
	elapsed := now.Sub(t.start)
	if elapsed < throttleCheckInterval {
		return
	}
	if want := time.Duration(t.bytes / t.rate * float64(time.Second)); want > elapsed {
		t.sleep(want - elapsed)
	}
	t.start, t.bytes = t.now(), 0
}
