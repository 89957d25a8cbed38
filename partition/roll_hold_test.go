package partition

import (
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/pidtable"
	"github.com/idemlog/idemlog/producer"
)

// BenchmarkRollLockHold measures how long the writer lock is held
// by an append that rolls (the append holds mu throughout under
// SyncNever), with a producer table of 100k producers whose snapshot the
// roll now writes itself (the engine's snapshotImage, reproduced: Range,
// EntryOf, SnapshotWriter), on the test's temporary directory. Reported:
// ms-hold/roll (the whole rolling append), ms-image/roll (building the
// image, which the roll did under mu before today's change too) and
// ms-write/roll (the rest: the file write, rename, stray listing, segment
// switch).
//
//	go test ./partition -run XXX -bench BenchmarkRollLockHold -benchtime 20x
func BenchmarkRollLockHold(b *testing.B) {
	const producers = 100_000
	tab := pidtable.New(pidtable.Options{})
	for pid := int64(1); pid <= producers; pid++ {
		e, _, err := tab.Acquire(pid)
		if err != nil {
			b.Fatal(err)
		}
		s := e.State()
		s.SetEpoch(3)
		s.Push(pidtable.BatchMeta{LastSeq: 9, LastOffset: pid * 10, OffsetDelta: 9, Timestamp: pid})
		s.LastTimestamp = pid
		s.SetTxnFirstOffset(-1)
		tab.Release(e)
	}
	var w producer.SnapshotWriter
	var imageTime time.Duration
	opts := smallSegments(64 << 10)
	opts.Snapshot = func(off int64) []byte {
		t0 := time.Now()
		w.Reset()
		tab.Range(func(pid int64, s *pidtable.State) bool {
			w.Add(producer.EntryOf(pid, s))
			return true
		})
		imageTime = time.Since(t0)
		return w.Bytes()
	}
	l, err := Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var hold, image, worst time.Duration
	b.ResetTimer()
	for n, i := 0, 0; n < b.N; i++ {
		bt := makeBatch(b, i, 1, 1000, int64(i))
		last := l.LogEndOffset() + int64(batch.Batch(bt).LastOffsetDelta())
		willRoll := !l.active.Fits(len(bt), last)
		if willRoll {
			b.StopTimer()
			l.waitIdle() // the previous seal done: the roll alone
			b.StartTimer()
		}
		t0 := time.Now()
		if _, err := l.Append(bt); err != nil {
			b.Fatal(err)
		}
		if willRoll {
			d := time.Since(t0)
			hold += d
			image += imageTime
			worst = max(worst, d)
			n++
		}
	}
	b.StopTimer() // the deferred Close: off the clock
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
	b.ReportMetric(ms(hold), "ms-hold/roll")
	b.ReportMetric(ms(image), "ms-image/roll")
	b.ReportMetric(ms(hold-image), "ms-write/roll")
	b.ReportMetric(float64(worst)/float64(time.Millisecond), "ms-worst")
}
