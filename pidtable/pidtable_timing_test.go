package pidtable

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// benchPID is the i-th producer of a benchmark fixture: a bijection of
// [0, 2^62) (multiplication by an odd constant modulo a power of two), so
// the loop computes its pid instead of loading it from an array, whose
// cache misses would be billed to the table.
func benchPID(i uint64) int64 { return int64(i * 0x9E3779B97F4A7C15 & (1<<62 - 1)) }

// pick maps a random word to [0, n) by multiply-shift (no division).
func pick(x uint64, n int) uint64 { return (x >> 32) * uint64(n) >> 32 }

func xorshift(x uint64) uint64 {
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	return x
}

var benchFixture struct {
	n  int
	tb *Table
}

func fixture(n int) *Table {
	if benchFixture.n != n {
		benchFixture.tb = nil
		tb := New(Options{})
		for i := 0; i < n; i++ {
			e, _, _ := tb.Acquire(benchPID(uint64(i)))
			e.State().SetEpoch(0)
			tb.Release(e)
		}
		benchFixture.n, benchFixture.tb = n, tb
	}
	return benchFixture.tb
}

// update is the append path's work under the entry: the in-order check
// against the newest batch and the push of the next one.
func update(s *State) {
	next := int32(0)
	if n := s.Newest(); n != nil {
		next = n.LastSeq + 1
	}
	s.Push(BatchMeta{LastOffset: int64(next) * 10, Timestamp: int64(next), LastSeq: next, OffsetDelta: 3})
	s.LastTimestamp = int64(next)
}

// BenchmarkAcquireUpdate is Acquire + the in-order update + Release of a
// random pre-populated producer, at 100k and 1M live producers, one op
// after another (serial) and on every core (parallel). At 1M producers
// (about 230 MB of entries) each op starts with a DRAM miss on its entry,
// whose address is known only once the op begins: compare with
// BenchmarkMachine/dram-dependent, the machine's round trip over the same
// footprint, measured in the same run. The pids are computed (benchPID),
// not loaded from an array whose own misses would be billed to the table.
func BenchmarkAcquireUpdate(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		name := "n=" + strconv.Itoa(n/1000) + "k"
		b.Run(name+"/serial", func(b *testing.B) {
			tb := fixture(n)
			// The DRAM latency is measured before and after the ops, and
			// the mean taken, so that a neighbour's load that comes or
			// goes during the run weighs on both sides of the ratio.
			dram := dramRoundTrip(tb.MemoryBytes())
			b.ReportAllocs()
			b.ResetTimer()
			x := uint64(0x9E3779B97F4A7C15)
			for b.Loop() {
				x = xorshift(x)
				e, _, _ := tb.Acquire(benchPID(pick(x, n)))
				update(e.State())
				tb.Release(e)
			}
			b.StopTimer()
			dram = (dram + dramRoundTrip(tb.MemoryBytes())) / 2
			b.ReportMetric(float64(tb.MemoryBytes())/float64(tb.Len()), "B/entry")
			b.ReportMetric(dram, "ns/dram-roundtrip")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/dram, "x-dram-roundtrip")
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			tb := fixture(n)
			var seed atomic.Uint64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				x := seed.Add(0x9E3779B97F4A7C15)
				for pb.Next() {
					x = xorshift(x)
					e, _, _ := tb.Acquire(benchPID(pick(x, n)))
					update(e.State())
					tb.Release(e)
				}
			})
			b.ReportMetric(float64(tb.MemoryBytes())/float64(tb.Len()), "B/entry")
		})
	}
}

// BenchmarkMachine is the raw baseline for BenchmarkAcquireUpdate, over
// the same footprint as its 1M-producer table: random reads of one cache
// line each, dependent (a pointer chase: the DRAM round trip, the floor of
// a serial op whose address is known only when it starts) and independent
// (as many misses in flight as the core allows).
func BenchmarkMachine(b *testing.B) {
	m := machine(fixture(1_000_000).MemoryBytes())
	b.Run("dram-dependent", func(b *testing.B) {
		p := uint64(0)
		for b.Loop() {
			p = m[p]
		}
		sink.Store(p)
	})
	b.Run("dram-independent", func(b *testing.B) {
		s, x, lines := uint64(0), uint64(1), len(m)/8
		for b.Loop() {
			x = xorshift(x)
			s += m[pick(x, lines)*8]
		}
		sink.Store(s)
	})
}

// machine returns size bytes of memory holding, in the first word of each
// cache line, the word index of the next line of a random cycle through
// all of them (Sattolo's algorithm): a chase that no prefetcher predicts.
func machine(size int) []uint64 {
	if len(machineMem)*8 == size/64*64 {
		return machineMem
	}
	lines := size / 64
	mem := make([]uint64, lines*8)
	next := make([]uint32, lines)
	for i := range next {
		next[i] = uint32(i)
	}
	x := uint64(88172645463325252)
	for i := lines - 1; i > 0; i-- {
		x = xorshift(x)
		j := int(pick(x, i))
		next[i], next[j] = next[j], next[i]
	}
	for i, nx := range next {
		mem[i*8] = uint64(nx) * 8
	}
	machineMem = mem
	return mem
}

var machineMem []uint64

// dramRoundTrip measures the machine's dependent-load latency over size
// bytes (2M loads), in ns, for the ratio BenchmarkAcquireUpdate reports.
func dramRoundTrip(size int) float64 {
	m := machine(size)
	const loads = 2_000_000
	p := uint64(0)
	start := time.Now()
	for range loads {
		p = m[p]
	}
	sink.Store(p)
	return float64(time.Since(start).Nanoseconds()) / loads
}

var sink atomic.Uint64

// BenchmarkLookup is the lock-free presence check.
func BenchmarkLookup(b *testing.B) {
	tb := fixture(100_000)
	b.ReportAllocs()
	x := uint64(1)
	for b.Loop() {
		x = xorshift(x)
		if !tb.Lookup(benchPID(pick(x, 100_000))) {
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
		e, _, _ := tb.Acquire(benchPID(uint64(i)))
		tb.Release(e)
	}
	b.ReportMetric(float64(tb.MemoryBytes())/float64(max(tb.Len(), 1)), "B/entry")
}
