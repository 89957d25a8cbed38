package pidtable

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCapSamePIDRefusedAcrossResize: MaxEntries 1 and a single pid,
// which several goroutines create and remove over and over while its shard
// is resized (growth over the dead entries, and Sweep's compaction). At
// most one entry of pid 42 ever exists, so no Acquire may be refused with
// ErrTooManyProducers (acquireIn's comment: "a concurrent creation of the
// same pid is never counted against MaxEntries").
//
// It is: a claimer in the old table reserves the count, the resizer seals
// its slot (the claimer's key CAS will fail) and publishes the new table,
// and a second claimer of the same pid reserves again in the new table
// while the first still holds its reservation: count 2 > 1, refused. The
// first claimer only gives its reservation back after its failed key CAS,
// so a preemption there refuses every claim of the pid meanwhile.
func TestCapSamePIDRefusedAcrossResize(t *testing.T) {
	t.Parallel()
	tb := New(Options{Shards: 1, InitialCapacity: 1, MaxEntries: 1})
	var refused, ops atomic.Int64
	var stop atomic.Bool
	deadline := time.Now().Add(4 * time.Second)
	var wg sync.WaitGroup
	for g := 0; g < 3; g++ {
		wg.Go(func() {
			for !stop.Load() && time.Now().Before(deadline) {
				e, _, err := tb.Acquire(42)
				ops.Add(1)
				if err != nil {
					if !errors.Is(err, ErrTooManyProducers) {
						t.Error(err)
					}
					refused.Add(1)
					stop.Store(true)
					return
				}
				tb.Remove(e)
			}
		})
	}
	wg.Go(func() {
		for !stop.Load() && time.Now().Before(deadline) {
			tb.Sweep(func(int64, *State) bool { return true })
		}
	})
	wg.Wait()
	if n := refused.Load(); n > 0 {
		t.Fatalf("Acquire(42) refused with ErrTooManyProducers after %d calls, though pid 42 is the only producer and MaxEntries is 1", ops.Load())
	}
	if err := tb.verify(); err != nil {
		t.Fatal(err)
	}
}
