package pidtable

import (
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
)

// benchPIDs returns n distinct random producer ids.
func benchPIDs(n int) []int64 {
	r := rand.New(rand.NewPCG(42, uint64(n)))
	seen := make(map[int64]bool, n)
	pids := make([]int64, 0, n)
	for len(pids) < n {
		p := r.Int64()
		if !seen[p] {
			seen[p] = true
			pids = append(pids, p)
		}
	}
	return pids
}

var benchFixture struct {
	n    int
	tb   *Table
	pids []int64
}

func fixture(n int) (*Table, []int64) {
	if benchFixture.n != n {
		benchFixture.tb, benchFixture.pids = nil, nil
		pids := benchPIDs(n)
		tb := New(Options{})
		for _, p := range pids {
			e, _, _ := tb.Acquire(p)
			e.State().SetEpoch(0)
			tb.Release(e)
		}
		benchFixture.n, benchFixture.tb, benchFixture.pids = n, tb, pids
	}
	return benchFixture.tb, benchFixture.pids
}

// update is the append path's work under the entry: a check of the newest
// batch and the push of the next one.
func update(s *State) {
	next := int32(0)
	if n := s.Newest(); n != nil {
		next = n.LastSeq + 1
	}
	s.Push(BatchMeta{LastOffset: int64(next) * 10, Timestamp: int64(next), LastSeq: next, OffsetDelta: 3})
	s.LastTimestamp = int64(next)
}

// BenchmarkAcquireUpdate is Acquire + a small state update + Release of a
// random pre-populated producer, at 100k and 1M live producers.
func BenchmarkAcquireUpdate(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		name := strconv.Itoa(n/1000) + "k"
		b.Run("n="+name+"/serial", func(b *testing.B) {
			tb, pids := fixture(n)
			b.ReportAllocs()
			b.ResetTimer()
			x := uint64(0x9E3779B97F4A7C15)
			for i := 0; i < b.N; i++ {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				e, _, _ := tb.Acquire(pids[x%uint64(len(pids))])
				update(e.State())
				tb.Release(e)
			}
			b.ReportMetric(float64(tb.MemoryBytes())/float64(tb.Len()), "B/entry")
		})
		b.Run("n="+name+"/parallel", func(b *testing.B) {
			tb, pids := fixture(n)
			var seed atomic.Uint64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				x := seed.Add(0x9E3779B97F4A7C15)
				for pb.Next() {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
					e, _, _ := tb.Acquire(pids[x%uint64(len(pids))])
					update(e.State())
					tb.Release(e)
				}
			})
			b.ReportMetric(float64(tb.MemoryBytes())/float64(tb.Len()), "B/entry")
		})
	}
}

// BenchmarkLookup is the lock-free presence check.
func BenchmarkLookup(b *testing.B) {
	tb, pids := fixture(100_000)
	b.ReportAllocs()
	b.ResetTimer()
	x := uint64(1)
	for i := 0; i < b.N; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if !tb.Lookup(pids[x%uint64(len(pids))]) {
			b.Fatal("lost")
		}
	}
}

// BenchmarkInsert grows a table from empty (default options) by b.N new
// producers: the amortised cost of claims and resizes.
func BenchmarkInsert(b *testing.B) {
	b.ReportAllocs()
	tb := New(Options{})
	for i := 0; i < b.N; i++ {
		e, _, _ := tb.Acquire(int64(i) * 0x9E3779B97F4A7C1 & (1<<62 - 1))
		tb.Release(e)
	}
	b.ReportMetric(float64(tb.MemoryBytes())/float64(max(tb.Len(), 1)), "B/entry")
}
