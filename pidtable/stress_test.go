package pidtable

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestStress: workers lock random pids from a small (contended) and a large
// key space and count in the State; growers insert fresh pids to force
// resizes; a sweeper removes pids; a reader runs Lookup and TryAcquire. The
// model of each pid (its expected counter) is a plain variable written only
// under the pid's entry lock, so a broken lock is a data race for -race as
// well as a wrong count.
func TestStress(t *testing.T) {
	t.Parallel()
	const (
		small   = 32
		large   = 20000
		fresh   = 60000
		workers = 4
	)
	ops := 60000
	if raceBuild || testing.Short() {
		ops = 25000
	}
	tb := New(Options{Shards: 4, InitialCapacity: 8})
	total := small + large + fresh
	expect := make([]int64, total) // guarded by the pid's entry lock
	var increments, removedSum atomic.Int64
	var failures atomic.Int32
	fail := func(format string, args ...any) {
		if failures.Add(1) <= 10 {
			t.Errorf(format, args...)
		}
	}

	// bump runs under e's lock: the state must hold exactly the model's
	// count, whatever resizes moved it meanwhile.
	bump := func(e *Entry) {
		pid := e.PID()
		s := e.State()
		if s.LastTimestamp != expect[pid] {
			fail("pid %d: counter %d, expected %d", pid, s.LastTimestamp, expect[pid])
		}
		if n := s.Newest(); (n == nil) != (s.LastTimestamp == 0) || (n != nil && n.LastOffset != s.LastTimestamp) {
			fail("pid %d: newest batch %v for counter %d", pid, n, s.LastTimestamp)
		}
		s.LastTimestamp++
		s.Push(BatchMeta{LastOffset: s.LastTimestamp, LastSeq: int32(s.LastTimestamp)})
		expect[pid]++
		increments.Add(1)
	}

	var wg sync.WaitGroup
	var done atomic.Bool
	var running sync.WaitGroup
	for w := 0; w < workers; w++ {
		running.Add(1)
		wg.Go(func() {
			defer running.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for i := 0; i < ops; i++ {
				pid := r.Int64N(small)
				if r.IntN(2) == 0 {
					pid = small + r.Int64N(large)
				}
				e, _, err := tb.Acquire(pid)
				if err != nil {
					fail("Acquire(%d): %v", pid, err)
					return
				}
				bump(e)
				if r.IntN(64) == 0 {
					removedSum.Add(expect[pid])
					expect[pid] = 0
					tb.Remove(e)
				} else {
					tb.Release(e)
				}
				if i%256 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	for g := 0; g < 2; g++ { // growers
		running.Add(1)
		wg.Go(func() {
			defer running.Done()
			for i := g; i < fresh; i += 2 {
				e, created, err := tb.Acquire(int64(small + large + i))
				if err != nil || !created {
					fail("grower: Acquire: created %v err %v", created, err)
					return
				}
				bump(e)
				tb.Release(e)
			}
		})
	}
	wg.Go(func() { // sweeper
		r := rand.New(rand.NewPCG(7, 7))
		for !done.Load() {
			mod := int64(5 + r.IntN(20))
			tb.Sweep(func(pid int64, s *State) bool {
				if s.LastTimestamp != expect[pid] {
					fail("sweep: pid %d counter %d, expected %d", pid, s.LastTimestamp, expect[pid])
				}
				if pid%mod != 0 || r.IntN(4) != 0 {
					return true
				}
				removedSum.Add(expect[pid])
				expect[pid] = 0
				return false
			})
			runtime.Gosched()
		}
	})
	wg.Go(func() { // reader
		r := rand.New(rand.NewPCG(8, 8))
		for !done.Load() {
			pid := r.Int64N(int64(total))
			tb.Lookup(pid)
			if e, ok := tb.TryAcquire(pid); ok {
				bump(e)
				tb.Release(e)
			}
		}
	})
	running.Wait()
	done.Store(true)
	wg.Wait()

	// Quiescent: every pid at most once, counters equal to the model, the
	// increments conserved.
	mustVerify(t, tb)
	seen := make([]bool, total)
	var sum int64
	live := 0
	tb.Range(func(pid int64, s *State) bool {
		if seen[pid] {
			fail("pid %d found twice", pid)
		}
		seen[pid] = true
		if s.LastTimestamp != expect[pid] {
			fail("end: pid %d counter %d, expected %d", pid, s.LastTimestamp, expect[pid])
		}
		sum += s.LastTimestamp
		live++
		return true
	})
	for pid, n := range expect {
		if n > 0 && !seen[pid] {
			fail("pid %d with %d increments lost", pid, n)
		}
	}
	if sum+removedSum.Load() != increments.Load() {
		t.Errorf("counters %d + removed %d != increments %d", sum, removedSum.Load(), increments.Load())
	}
	if tb.Len() != live {
		t.Errorf("Len %d, Range saw %d", tb.Len(), live)
	}
	t.Logf("%d increments, %d live, %d bytes per entry", increments.Load(), live, tb.MemoryBytes()/max(live, 1))
}

// TestRangeDuringClaims runs Range (no State writers, per its rule) while
// other goroutines claim new entries and force resizes: the race detector
// checks that claims and resizes write no State that Range reads.
func TestRangeDuringClaims(t *testing.T) {
	t.Parallel()
	tb := New(Options{Shards: 2, InitialCapacity: 4})
	const n = 20000
	var wg sync.WaitGroup
	var done atomic.Bool
	for g := 0; g < 2; g++ {
		wg.Go(func() {
			for i := g; i < n; i += 2 {
				e, _, err := tb.Acquire(int64(i))
				if err != nil {
					t.Error(err)
					return
				}
				tb.Release(e)
			}
		})
	}
	var ranges atomic.Int32
	var rg sync.WaitGroup
	rg.Go(func() {
		for !done.Load() {
			seen := map[int64]bool{}
			tb.Range(func(pid int64, s *State) bool {
				if seen[pid] || *s != (State{}) {
					t.Errorf("Range: pid %d seen %v state %+v", pid, seen[pid], *s)
				}
				seen[pid] = true
				return true
			})
			ranges.Add(1)
		}
	})
	wg.Wait()
	done.Store(true)
	rg.Wait()
	if tb.Len() != n {
		t.Fatalf("len %d", tb.Len())
	}
	mustVerify(t, tb)
	t.Logf("%d Range passes", ranges.Load())
}

// TestResizeWaitsForHolder checks that a resize waits for an entry held
// across it and copies the holder's writes.
func TestResizeWaitsForHolder(t *testing.T) {
	t.Parallel()
	tb := New(Options{Shards: 1, InitialCapacity: 4})
	e, _ := acquire(t, tb, 1)
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // forces several resizes of the only shard
		close(started)
		for pid := int64(2); pid < 200; pid++ {
			x, _, err := tb.Acquire(pid)
			if err != nil {
				t.Error(err)
				return
			}
			tb.Release(x)
		}
	})
	<-started
	for i := 0; i < 100; i++ {
		runtime.Gosched()
	}
	e.State().LastTimestamp = 42 // still ours: no resize could move it
	tb.Release(e)
	wg.Wait()
	e, _ = acquire(t, tb, 1)
	if e.State().LastTimestamp != 42 {
		t.Fatalf("holder's write lost: %d", e.State().LastTimestamp)
	}
	tb.Release(e)
	mustVerify(t, tb)
}

// TestCreatedIsExact races goroutines to Acquire the same new pids while
// resizes run: for each pid exactly one caller sees created, and it is the
// first holder (it finds the zero State).
func TestCreatedIsExact(t *testing.T) {
	t.Parallel()
	tb := New(Options{Shards: 2, InitialCapacity: 2})
	const pids, callers = 3000, 4
	var wg sync.WaitGroup
	var creators [pids]atomic.Int32
	for c := 0; c < callers; c++ {
		wg.Go(func() {
			for p := 0; p < pids; p++ {
				pid := int64(p)
				if c%2 == 1 {
					pid = pids - 1 - int64(p)
				}
				e, created, err := tb.Acquire(pid)
				if err != nil {
					t.Error(err)
					return
				}
				s := e.State()
				if created {
					creators[pid].Add(1)
					if s.LastTimestamp != 0 {
						t.Errorf("pid %d: created, but %d holders came first", pid, s.LastTimestamp)
					}
				} else if s.LastTimestamp == 0 {
					t.Errorf("pid %d: not created, but first holder", pid)
				}
				s.LastTimestamp++
				tb.Release(e)
			}
		})
	}
	wg.Wait()
	for p := range creators {
		if n := creators[p].Load(); n != 1 {
			t.Fatalf("pid %d created %d times", p, n)
		}
	}
	mustVerify(t, tb)
}
