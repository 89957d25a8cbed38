package pidtablecompare

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemlog/idemlog/pidtable"
	"github.com/puzpuzpuz/xsync/v4"
)

// update is the work done under the producer's lock: check the newest
// cached batch, push the next one.
func update(s *pidtable.State) {
	next := int32(0)
	if n := s.Newest(); n != nil {
		next = n.LastSeq + 1
	}
	s.Push(pidtable.BatchMeta{LastOffset: int64(next) * 10, Timestamp: int64(next), LastSeq: next, OffsetDelta: 3})
	s.LastTimestamp = int64(next)
}

// locked is the value of the mutex variants: the same State plus the
// per-producer lock that pidtable keeps in its entries.
type locked struct {
	mu sync.Mutex
	s  pidtable.State
}

// impl is one structure under test, populated with pids.
type impl interface {
	op(pid int64)
	extra() float64 // structure-reported bytes per entry, 0 if none
}

type ptImpl struct{ t *pidtable.Table }

func (p ptImpl) op(pid int64) {
	e, _, _ := p.t.Acquire(pid)
	update(e.State())
	p.t.Release(e)
}
func (p ptImpl) extra() float64 { return float64(p.t.MemoryBytes()) / float64(p.t.Len()) }

type xsCompute struct {
	m *xsync.Map[int64, *pidtable.State]
}

func (x xsCompute) op(pid int64) {
	x.m.Compute(pid, func(s *pidtable.State, loaded bool) (*pidtable.State, xsync.ComputeOp) {
		update(s) // under the bucket lock
		return s, xsync.CancelOp
	})
}
func (xsCompute) extra() float64 { return 0 }

type xsLoad struct{ m *xsync.Map[int64, *locked] }

func (x xsLoad) op(pid int64) {
	v, _ := x.m.Load(pid)
	v.mu.Lock()
	update(&v.s)
	v.mu.Unlock()
}
func (xsLoad) extra() float64 { return 0 }

type syncLoad struct{ m *sync.Map }

func (x syncLoad) op(pid int64) {
	v, _ := x.m.Load(pid)
	l := v.(*locked)
	l.mu.Lock()
	update(&l.s)
	l.mu.Unlock()
}
func (syncLoad) extra() float64 { return 0 }

var builders = []struct {
	name  string
	build func(pids []int64) impl
}{
	{"pidtable", func(pids []int64) impl {
		t := pidtable.New(pidtable.Options{})
		for _, p := range pids {
			e, _, _ := t.Acquire(p)
			e.State().SetEpoch(0)
			t.Release(e)
		}
		return ptImpl{t}
	}},
	{"xsync-compute", func(pids []int64) impl {
		m := xsync.NewMap[int64, *pidtable.State]()
		for _, p := range pids {
			s := new(pidtable.State)
			s.SetEpoch(0)
			m.Store(p, s)
		}
		return xsCompute{m}
	}},
	{"xsync-load-mutex", func(pids []int64) impl {
		m := xsync.NewMap[int64, *locked]()
		for _, p := range pids {
			l := new(locked)
			l.s.SetEpoch(0)
			m.Store(p, l)
		}
		return xsLoad{m}
	}},
	{"syncmap-load-mutex", func(pids []int64) impl {
		m := new(sync.Map)
		for _, p := range pids {
			l := new(locked)
			l.s.SetEpoch(0)
			m.Store(p, l)
		}
		return syncLoad{m}
	}},
}

func benchPIDs(n int) []int64 {
	r := rand.New(rand.NewPCG(42, uint64(n)))
	seen := make(map[int64]bool, n)
	pids := make([]int64, 0, n)
	for len(pids) < n {
		if p := r.Int64(); !seen[p] {
			seen[p] = true
			pids = append(pids, p)
		}
	}
	return pids
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// One structure is kept populated at a time, reused by the serial and the
// parallel runs of the same name and size.
var cur struct {
	key      string
	im       impl
	pids     []int64
	perEntry float64
	gcMillis float64
}

func fixture(name string, n int, build func([]int64) impl) (impl, []int64, float64) {
	key := name + "/" + strconv.Itoa(n)
	if cur.key != key {
		cur.im, cur.pids = nil, nil
		pids := benchPIDs(n)
		before := heap()
		im := build(pids)
		after := heap()
		cur.key, cur.im, cur.pids = key, im, pids
		cur.perEntry = float64(int64(after)-int64(before)) / float64(n)
		cur.gcMillis = gcCost()
	}
	return cur.im, cur.pids, cur.perEntry
}

// cpuTime is the CPU time (user + system) the process has used, in ns: on
// a shared machine it varies much less than wall time, since time spent
// runnable but descheduled does not count.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// gcCost is the wall time of a full forced GC with the structure live: the
// marking of its pointers (none in pidtable's arrays) is what the
// structure adds to every GC cycle of the process.
func gcCost() float64 {
	const rounds = 3
	start := time.Now()
	for i := 0; i < rounds; i++ {
		runtime.GC()
	}
	return float64(time.Since(start).Microseconds()) / 1000 / rounds
}

func BenchmarkUpdate(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		for _, bl := range builders {
			prefix := "n=" + strconv.Itoa(n/1000) + "k/" + bl.name
			b.Run(prefix+"/serial", func(b *testing.B) {
				im, pids, per := fixture(bl.name, n, bl.build)
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := cpuTime()
				x := uint64(0x9E3779B97F4A7C15)
				for i := 0; i < b.N; i++ {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
					im.op(pids[x%uint64(len(pids))])
				}
				b.StopTimer()
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
				b.ReportMetric(per, "B/entry")
				b.ReportMetric(cur.gcMillis, "GC-ms")
			})
			b.Run(prefix+"/parallel", func(b *testing.B) {
				im, pids, per := fixture(bl.name, n, bl.build)
				var seed atomic.Uint64
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := cpuTime()
				b.RunParallel(func(pb *testing.PB) {
					x := seed.Add(0x9E3779B97F4A7C15)
					for pb.Next() {
						x ^= x << 13
						x ^= x >> 7
						x ^= x << 17
						im.op(pids[x%uint64(len(pids))])
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
				b.ReportMetric(per, "B/entry")
			})
		}
	}
}

// TestSameWork checks that every variant sees the same states after the
// same operations, so the benchmarks compare equal work.
func TestSameWork(t *testing.T) {
	pids := benchPIDs(1000)
	for _, bl := range builders {
		im := bl.build(pids)
		for i := 0; i < 5000; i++ {
			im.op(pids[i%len(pids)])
		}
		var s *pidtable.State
		switch v := im.(type) {
		case ptImpl:
			e, _ := v.t.TryAcquire(pids[3])
			s = e.State()
			defer v.t.Release(e)
		case xsCompute:
			s, _ = v.m.Load(pids[3])
		case xsLoad:
			l, _ := v.m.Load(pids[3])
			s = &l.s
		case syncLoad:
			l, _ := v.m.Load(pids[3])
			s = &l.(*locked).s
		}
		if s.Len() != 5 || s.Newest().LastSeq != 4 || s.LastTimestamp != 4 {
			t.Fatalf("%s: state %+v", bl.name, *s)
		}
	}
}
