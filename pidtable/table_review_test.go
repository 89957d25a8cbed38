package pidtable

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReviewCapRefusesConcurrentSamePID: MaxEntries 1, several goroutines
// Acquire the SAME new pid at once. Exactly one entry results (well within
// the cap), so every caller should get it; a caller that reads the empty
// slot while the creator is between its count reservation and its key CAS
// is refused with ErrTooManyProducers instead of waiting for the claim.
func TestReviewCapRefusesConcurrentSamePID(t *testing.T) {
	refused := 0
	for round := 0; round < 3000 && refused == 0; round++ {
		tb := New(Options{Shards: 1, InitialCapacity: 8, MaxEntries: 1})
		var wg sync.WaitGroup
		var start sync.WaitGroup
		start.Add(1)
		var errs atomic.Int32
		for g := 0; g < 8; g++ {
			wg.Go(func() {
				start.Wait()
				e, _, err := tb.Acquire(42)
				if err != nil {
					if errors.Is(err, ErrTooManyProducers) {
						errs.Add(1)
					}
					return
				}
				tb.Release(e)
			})
		}
		start.Done()
		wg.Wait()
		refused += int(errs.Load())
		if tb.Len() != 1 {
			t.Fatalf("Len %d", tb.Len())
		}
	}
	if refused > 0 {
		t.Fatalf("%d Acquire(42) calls refused with ErrTooManyProducers although pid 42 was the only producer (cap 1)", refused)
	}
}

// TestReviewRangeVisitsPIDTwice (from review): Range runs (no State
// writers) while another goroutine removes a visited pid and claims it
// again. The new incarnation is another entry, which may be visited too:
// the documented rule is that a pid is reported at most once with a
// non-zero State, and any second visit sees the new entry's zero State.
func TestReviewRangeVisitsPIDTwice(t *testing.T) {
	tb := New(Options{Shards: 1, InitialCapacity: 64})
	for pid := int64(0); pid < 8; pid++ {
		e, _, _ := tb.Acquire(pid)
		e.State().EpochPlus1 = 5
		tb.Release(e)
	}
	seen := map[int64]int{}
	withState := map[int64]int{}
	first := int64(-1)
	tb.Range(func(pid int64, s *State) bool {
		seen[pid]++
		if *s != (State{}) {
			withState[pid]++
		}
		if first < 0 {
			first = pid
			done := make(chan struct{})
			go func() { // another goroutine: Sweep-like removal, then a new Acquire
				defer close(done)
				e, _ := tb.TryAcquire(pid)
				tb.Remove(e)
				e, _, _ = tb.Acquire(pid)
				tb.Release(e)
			}()
			<-done
		}
		return true
	})
	for pid, n := range withState {
		if n > 1 {
			t.Fatalf("Range reported pid %d with a State %d times", pid, n)
		}
	}
	for pid, n := range seen {
		if n > 2 || n == 2 && pid != first {
			t.Fatalf("Range reported pid %d %d times (removed and claimed again: %d)", pid, n, first)
		}
	}
	if len(withState) != 8 {
		t.Fatalf("Range reported %d pids with a State, want 8", len(withState))
	}
}

// TestReviewStressCap: small shards and capacities, MaxEntries, random
// Acquire/Release/Remove/TryAcquire/Sweep; checks mutual exclusion per pid,
// the count (no leaked reservations) and the structure at quiescence.
func TestReviewStressCap(t *testing.T) {
	const pids = 400
	const max = 150
	const workers = 8
	tb := New(Options{Shards: 2, InitialCapacity: 2, MaxEntries: max})
	var holders [pids]atomic.Int32
	var wg sync.WaitGroup
	var done atomic.Bool
	var fails atomic.Int32
	fail := func(f string, a ...any) {
		if fails.Add(1) < 10 {
			t.Errorf(f, a...)
		}
	}
	hold := func(e *Entry) {
		pid := e.PID()
		if holders[pid].Add(1) != 1 {
			fail("pid %d held twice", pid)
		}
		e.State().LastTimestamp++
		runtime.Gosched()
		holders[pid].Add(-1)
	}
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 3))
			for i := 0; i < 20000; i++ {
				pid := r.Int64N(pids)
				switch r.IntN(10) {
				case 0:
					if e, ok := tb.TryAcquire(pid); ok {
						hold(e)
						tb.Release(e)
					}
				default:
					e, _, err := tb.Acquire(pid)
					if err != nil {
						if !errors.Is(err, ErrTooManyProducers) {
							fail("%v", err)
						}
						continue
					}
					hold(e)
					if r.IntN(3) == 0 {
						tb.Remove(e)
					} else {
						tb.Release(e)
					}
				}
			}
		})
	}
	var sw sync.WaitGroup
	sw.Go(func() {
		r := rand.New(rand.NewPCG(9, 9))
		for !done.Load() {
			tb.Sweep(func(pid int64, s *State) bool {
				if holders[pid].Add(1) != 1 {
					fail("sweep: pid %d held twice", pid)
				}
				holders[pid].Add(-1)
				return r.IntN(3) != 0
			})
			// While claims run, each claimer being refused counts itself
			// for a moment (Len is exact only at rest): at most one per
			// worker above the cap.
			if n := tb.Len(); n > max+workers {
				fail("Len %d > max %d + %d claimers", n, max, workers)
			}
		}
	})
	wg.Wait()
	done.Store(true)
	sw.Wait()
	if err := tb.verify(); err != nil {
		t.Fatal(err)
	}
	if n := tb.Len(); n > max {
		t.Fatalf("Len %d > max %d at rest", n, max)
	}
	// Drain everything: no reservation may be left behind.
	tb.Sweep(func(int64, *State) bool { return false })
	if tb.Len() != 0 {
		t.Fatalf("Len %d after removing all", tb.Len())
	}
	for pid := int64(0); pid < max; pid++ {
		e, _, err := tb.Acquire(pid + 1000)
		if err != nil {
			t.Fatalf("Acquire #%d after drain: %v", pid, err)
		}
		tb.Release(e)
	}
	if err := tb.verify(); err != nil {
		t.Fatal(err)
	}
}

// TestReviewSweepWhileHolding: Sweep may be called while holding entries.
// Hold one entry per shard, make every other entry dead, and Sweep: it must
// return (not wait for our own entry in a compaction).
func TestReviewSweepWhileHolding(t *testing.T) {
	for round := 0; round < 50; round++ {
		tb := New(Options{Shards: 2, InitialCapacity: 4})
		var held []*Entry
		for pid := int64(0); pid < 200; pid++ {
			e, _, _ := tb.Acquire(pid)
			tb.Release(e)
		}
		for pid := int64(0); pid < 4; pid++ {
			e, _, _ := tb.Acquire(pid) // no resize: all exist
			held = append(held, e)
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		// Concurrent Acquire/Remove churn on other pids.
		wg.Go(func() {
			for i := int64(0); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				e, _, err := tb.Acquire(1000 + i%50)
				if err != nil {
					t.Error(err)
					return
				}
				tb.Remove(e)
			}
		})
		res := make(chan int, 1)
		go func() {
			res <- tb.Sweep(func(pid int64, s *State) bool { return pid < 4 })
		}()
		select {
		case <-res:
		case <-time.After(10 * time.Second):
			t.Fatal("Sweep deadlocked while the caller holds entries")
		}
		for _, e := range held {
			tb.Release(e)
		}
		close(stop)
		wg.Wait()
		if err := tb.verify(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReviewLookupStableAcrossResizes: pids 0..15 exist throughout; churn
// on other pids forces growth and compactions. Lookup must never report
// them absent, and TryAcquire must never find another pid's entry.
func TestReviewLookupStableAcrossResizes(t *testing.T) {
	tb := New(Options{Shards: 1, InitialCapacity: 2})
	for pid := int64(0); pid < 16; pid++ {
		e, _, _ := tb.Acquire(pid)
		tb.Release(e)
	}
	var wg sync.WaitGroup
	var done atomic.Bool
	for g := 0; g < 3; g++ {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 5))
			for i := 0; i < 30000; i++ {
				e, _, err := tb.Acquire(100 + r.Int64N(500))
				if err != nil {
					t.Error(err)
					return
				}
				if r.IntN(2) == 0 {
					tb.Remove(e)
				} else {
					tb.Release(e)
				}
				if i%97 == 0 {
					tb.Sweep(func(pid int64, _ *State) bool { return pid < 16 || r.IntN(2) == 0 })
				}
			}
		})
	}
	var rd sync.WaitGroup
	rd.Go(func() {
		for i := 0; !done.Load(); i++ {
			pid := int64(i % 16)
			if !tb.Lookup(pid) {
				t.Errorf("Lookup(%d) false", pid)
				return
			}
			if e, ok := tb.TryAcquire(pid); ok {
				if e.PID() != pid {
					t.Errorf("TryAcquire(%d) got %d", pid, e.PID())
				}
				tb.Release(e)
			}
		}
	})
	wg.Wait()
	done.Store(true)
	rd.Wait()
	if err := tb.verify(); err != nil {
		t.Fatal(err)
	}
}
