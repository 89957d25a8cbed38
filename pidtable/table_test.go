package pidtable

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/idemlog/idemlog/errcode"
)

func TestHashIsXXHash(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	var b [8]byte
	for i := 0; i < 10000; i++ {
		pid := int64(r.Uint64())
		if i < 100 {
			pid = int64(i) - 50
		}
		binary.LittleEndian.PutUint64(b[:], uint64(pid))
		if got, want := hashPID(pid), xxhash.Sum64(b[:]); got != want {
			t.Fatalf("hashPID(%d) = %x, xxhash %x", pid, got, want)
		}
	}
}

func mustVerify(t *testing.T, tb *Table) {
	t.Helper()
	if err := tb.verify(); err != nil {
		t.Fatal(err)
	}
}

func acquire(t *testing.T, tb *Table, pid int64) (*Entry, bool) {
	t.Helper()
	e, created, err := tb.Acquire(pid)
	if err != nil {
		t.Fatalf("Acquire(%d): %v", pid, err)
	}
	if e.PID() != pid {
		t.Fatalf("Acquire(%d) returned the entry of %d", pid, e.PID())
	}
	return e, created
}

func TestBasics(t *testing.T) {
	t.Parallel()
	tb := New(Options{})
	if tb.Len() != 0 || tb.Lookup(7) {
		t.Fatal("new table not empty")
	}
	if _, ok := tb.TryAcquire(7); ok {
		t.Fatal("TryAcquire created an entry")
	}
	e, created := acquire(t, tb, 7)
	if !created || tb.Len() != 1 || !tb.Lookup(7) {
		t.Fatalf("first Acquire: created %v len %d", created, tb.Len())
	}
	if *e.State() != (State{}) {
		t.Fatal("new entry's State is not the zero value")
	}
	if _, ok := tb.TryAcquire(7); ok {
		t.Fatal("TryAcquire got an entry held by someone else")
	}
	e.State().SetEpoch(3)
	e.State().Push(BatchMeta{LastOffset: 10})
	tb.Release(e)

	e, created = acquire(t, tb, 7)
	if created || e.State().Epoch() != 3 || e.State().Newest().LastOffset != 10 {
		t.Fatalf("second Acquire: created %v state %+v", created, *e.State())
	}
	tb.Release(e)
	e, ok := tb.TryAcquire(7)
	if !ok || e.State().Epoch() != 3 {
		t.Fatal("TryAcquire missed a free entry")
	}
	tb.Remove(e)
	if tb.Len() != 0 || tb.Lookup(7) {
		t.Fatal("Remove left the entry")
	}
	if _, ok := tb.TryAcquire(7); ok {
		t.Fatal("TryAcquire found a removed entry")
	}
	e, created = acquire(t, tb, 7)
	if !created || *e.State() != (State{}) {
		t.Fatal("Acquire after Remove did not create a fresh entry")
	}
	tb.Release(e)
	mustVerify(t, tb)

	if _, _, err := tb.Acquire(-1); !errors.Is(err, ErrInvalidPID) {
		t.Fatalf("Acquire(-1): %v", err)
	}
	if tb.Lookup(-1) {
		t.Fatal("Lookup(-1)")
	}
	if _, ok := tb.TryAcquire(-1); ok {
		t.Fatal("TryAcquire(-1)")
	}
	e, _ = acquire(t, tb, 1<<63-1) // the largest pid
	tb.Release(e)
	if !tb.Lookup(1<<63-1) || tb.Len() != 2 {
		t.Fatal("max pid")
	}
}

func TestReleaseMisuse(t *testing.T) {
	t.Parallel()
	tb := New(Options{})
	e, _ := acquire(t, tb, 1)
	tb.Release(e)
	for name, f := range map[string]func(){"Release": func() { tb.Release(e) }, "Remove": func() { tb.Remove(e) }} {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("%s of an entry not held did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestMaxEntries(t *testing.T) {
	t.Parallel()
	tb := New(Options{MaxEntries: 3, Shards: 2, InitialCapacity: 2})
	for pid := int64(0); pid < 3; pid++ {
		e, _ := acquire(t, tb, pid)
		tb.Release(e)
	}
	_, _, err := tb.Acquire(3)
	if !errors.Is(err, ErrTooManyProducers) || errcode.Code(err) != errcode.ThrottlingQuotaExceeded {
		t.Fatalf("4th producer: %v (code %d)", err, errcode.Code(err))
	}
	if tb.Len() != 3 || tb.Lookup(3) {
		t.Fatal("failed Acquire left an entry")
	}
	e, created := acquire(t, tb, 1) // existing producers are still served
	if created {
		t.Fatal("existing producer re-created")
	}
	tb.Remove(e)
	e, _ = acquire(t, tb, 3) // room again
	tb.Release(e)
	if tb.Len() != 3 {
		t.Fatalf("len %d", tb.Len())
	}
	mustVerify(t, tb)
}

func TestSweepRangeReset(t *testing.T) {
	t.Parallel()
	tb := New(Options{Shards: 4, InitialCapacity: 8})
	for pid := int64(0); pid < 1000; pid++ {
		e, _ := acquire(t, tb, pid)
		e.State().LastTimestamp = pid
		tb.Release(e)
	}
	held, _ := acquire(t, tb, 10) // Sweep skips it
	n := tb.Sweep(func(pid int64, s *State) bool {
		if s.LastTimestamp != pid {
			t.Fatalf("pid %d has timestamp %d", pid, s.LastTimestamp)
		}
		return pid%2 == 1
	})
	tb.Release(held)
	if n != 499 || tb.Len() != 501 {
		t.Fatalf("swept %d, len %d", n, tb.Len())
	}
	mustVerify(t, tb)
	seen := map[int64]bool{}
	tb.Range(func(pid int64, s *State) bool {
		if seen[pid] || (pid%2 == 0 && pid != 10) || s.LastTimestamp != pid {
			t.Fatalf("Range: pid %d (seen %v, ts %d)", pid, seen[pid], s.LastTimestamp)
		}
		seen[pid] = true
		return true
	})
	if len(seen) != 501 {
		t.Fatalf("Range saw %d", len(seen))
	}
	calls := 0
	tb.Range(func(int64, *State) bool { calls++; return calls < 5 })
	if calls != 5 {
		t.Fatalf("Range went on after false: %d calls", calls)
	}
	// Sweeping everything compacts the shards back to their minimum.
	before := tb.MemoryBytes()
	tb.Sweep(func(int64, *State) bool { return false })
	if tb.Len() != 0 || tb.MemoryBytes() >= before {
		t.Fatalf("after sweeping all: len %d, %d -> %d bytes", tb.Len(), before, tb.MemoryBytes())
	}
	mustVerify(t, tb)
	for pid := int64(0); pid < 100; pid++ {
		e, _ := acquire(t, tb, pid)
		tb.Release(e)
	}
	tb.Reset()
	if tb.Len() != 0 || tb.Lookup(5) || tb.MemoryBytes() != 4*tb.minSlots*EntrySize {
		t.Fatal("Reset")
	}
	mustVerify(t, tb)
}

func TestOptions(t *testing.T) {
	t.Parallel()
	tb := New(Options{})
	if len(tb.shards) != 64 || tb.minSlots != 22 {
		t.Fatalf("defaults: %d shards, %d slots", len(tb.shards), tb.minSlots)
	}
	// 1024 producers fit without a resize, spread evenly enough.
	tb = New(Options{Shards: 5, InitialCapacity: 100})
	if len(tb.shards) != 8 || tb.shift != 61 {
		t.Fatalf("5 shards rounded to %d (shift %d)", len(tb.shards), tb.shift)
	}
	one := New(Options{Shards: 1, InitialCapacity: 1})
	for pid := int64(0); pid < 100; pid++ {
		e, _ := acquire(t, one, pid)
		one.Release(e)
	}
	mustVerify(t, one)
}

// TestGrowth grows a tiny table to a million entries and checks that every
// state survived its moves.
func TestGrowth(t *testing.T) {
	t.Parallel()
	n := 1 << 20
	if raceBuild {
		// The race detector keeps a sync object per atomic word touched:
		// a million entries take a minute; a quarter of them exercise the
		// same resizes bar the last two.
		n = 1 << 18
	}
	if testing.Short() {
		n = 1 << 16
	}
	tb := New(Options{Shards: 16, InitialCapacity: 1})
	pid := func(i int) int64 { return int64(uint64(i)*0x9E3779B97F4A7C15) & (1<<62 - 1) } // a bijection
	for i := 0; i < n; i++ {
		p := pid(i)
		e, created := acquire(t, tb, p)
		if !created {
			t.Fatalf("pid %d existed", p)
		}
		s := e.State()
		s.LastTimestamp = p
		s.SetEpoch(int16(i))
		for j := 0; j <= i%7; j++ {
			s.Push(BatchMeta{LastOffset: int64(i + j), LastSeq: int32(j)})
		}
		tb.Release(e)
	}
	if tb.Len() != n {
		t.Fatalf("len %d", tb.Len())
	}
	mustVerify(t, tb)
	for i := 0; i < n; i++ {
		p := pid(i)
		if !tb.Lookup(p) {
			t.Fatalf("pid %d lost", p)
		}
		e, ok := tb.TryAcquire(p)
		if !ok {
			t.Fatalf("pid %d not acquirable", p)
		}
		s := e.State()
		k := min(i%7+1, MaxBatches)
		if s.LastTimestamp != p || s.Epoch() != int16(i) || s.Len() != k || s.Newest().LastOffset != int64(i+i%7) || s.At(0).LastSeq != int32(i%7+1-k) {
			t.Fatalf("pid %d (#%d): state %+v", p, i, *s)
		}
		tb.Release(e)
	}
	per := float64(tb.MemoryBytes()) / float64(tb.Len())
	t.Logf("%d entries: %.0f bytes per entry", n, per)
	if per > 2*float64(EntrySize)+1 {
		t.Fatalf("%.0f bytes per entry: load factor below 1/2", per)
	}
}

// TestModel runs random operations against a map.
func TestModel(t *testing.T) {
	t.Parallel()
	for seed := uint64(0); seed < 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 99))
		space := int64(8 + r.IntN(300))
		maxE := 0
		if seed%3 == 0 {
			maxE = int(space / 2)
		}
		tb := New(Options{Shards: 1 << r.IntN(4), InitialCapacity: 1 + r.IntN(20), MaxEntries: maxE})
		model := map[int64]int64{} // pid -> LastTimestamp
		for op := 0; op < 5000; op++ {
			pid := r.Int64N(space)
			switch r.IntN(10) {
			case 0, 1, 2, 3:
				e, created, err := tb.Acquire(pid)
				_, had := model[pid]
				if maxE > 0 && !had && len(model) == maxE {
					if !errors.Is(err, ErrTooManyProducers) {
						t.Fatalf("seed %d: over MaxEntries: %v", seed, err)
					}
					continue
				}
				if err != nil || created == had || e.State().LastTimestamp != model[pid] {
					t.Fatalf("seed %d op %d: Acquire(%d): err %v created %v had %v", seed, op, pid, err, created, had)
				}
				v := r.Int64()
				e.State().LastTimestamp = v
				if r.IntN(4) == 0 {
					tb.Remove(e)
					delete(model, pid)
				} else {
					tb.Release(e)
					model[pid] = v
				}
			case 4:
				e, ok := tb.TryAcquire(pid)
				v, had := model[pid]
				if ok != had || (ok && e.State().LastTimestamp != v) {
					t.Fatalf("seed %d: TryAcquire(%d) = %v, model %v", seed, pid, ok, had)
				}
				if ok {
					tb.Release(e)
				}
			case 5, 6:
				if _, had := model[pid]; tb.Lookup(pid) != had {
					t.Fatalf("seed %d: Lookup(%d) != %v", seed, pid, had)
				}
			case 7:
				mod := 2 + r.Int64N(5)
				n := tb.Sweep(func(p int64, s *State) bool {
					if s.LastTimestamp != model[p] {
						t.Fatalf("seed %d: Sweep saw %d for pid %d", seed, s.LastTimestamp, p)
					}
					return p%mod != 0
				})
				want := 0
				for p := range model {
					if p%mod == 0 {
						delete(model, p)
						want++
					}
				}
				if n != want {
					t.Fatalf("seed %d: swept %d, want %d", seed, n, want)
				}
			case 8:
				got := map[int64]int64{}
				tb.Range(func(p int64, s *State) bool {
					if _, dup := got[p]; dup {
						t.Fatalf("seed %d: Range saw %d twice", seed, p)
					}
					got[p] = s.LastTimestamp
					return true
				})
				if len(got) != len(model) {
					t.Fatalf("seed %d: Range saw %d, model %d", seed, len(got), len(model))
				}
				for p, v := range model {
					if got[p] != v {
						t.Fatalf("seed %d: Range: pid %d = %d, want %d", seed, p, got[p], v)
					}
				}
			case 9:
				if r.IntN(50) == 0 {
					tb.Reset()
					clear(model)
				}
			}
			if tb.Len() != len(model) {
				t.Fatalf("seed %d op %d: len %d, model %d", seed, op, tb.Len(), len(model))
			}
		}
		mustVerify(t, tb)
	}
}

// TestCapRefusesConcurrentSamePID: MaxEntries 1, several goroutines
// Acquire the SAME new pid at once. Exactly one entry results (well within
// the cap), so every caller should get it; a caller that reads the empty
// slot while the creator is between its count reservation and its key CAS
// is refused with ErrTooManyProducers instead of waiting for the claim.
func TestCapRefusesConcurrentSamePID(t *testing.T) {
	t.Parallel()
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

// TestRangeVisitsPIDTwice: Range runs (no State
// writers) while another goroutine removes a visited pid and claims it
// again. The new incarnation is another entry, which may be visited too:
// the documented rule is that a pid is reported at most once with a
// non-zero State, and any second visit sees the new entry's zero State.
func TestRangeVisitsPIDTwice(t *testing.T) {
	t.Parallel()
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

// TestStressCap: small shards and capacities, MaxEntries, random
// Acquire/Release/Remove/TryAcquire/Sweep; checks mutual exclusion per pid,
// the count (no leaked reservations) and the structure at quiescence.
func TestStressCap(t *testing.T) {
	t.Parallel()
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

// TestSweepWhileHolding: Sweep may be called while holding entries.
// Hold one entry per shard, make every other entry dead, and Sweep: it must
// return (not wait for our own entry in a compaction).
func TestSweepWhileHolding(t *testing.T) {
	t.Parallel()
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

// TestLookupStableAcrossResizes: pids 0..15 exist throughout; churn
// on other pids forces growth and compactions. Lookup must never report
// them absent, and TryAcquire must never find another pid's entry.
func TestLookupStableAcrossResizes(t *testing.T) {
	t.Parallel()
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
