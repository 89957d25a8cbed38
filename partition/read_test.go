package partition

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
)

// Kafka's ListOffsets by timestamp answers the first offset at or above the
// log start whose timestamp is >= the target. OffsetForTime finds a
// qualifying batch below the log start and clamps it up to the log start,
// whose batch has a smaller timestamp.
func TestOffsetForTimeBelowLogStart(t *testing.T) {
	t.Parallel()
	l, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i, ts := range []int64{100, 10, 10, 200} {
		if _, err := l.Append(makeBatch(t, i, 1, 10, ts)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	got, err := l.OffsetForTime(50)
	if err != nil {
		t.Fatal(err)
	}
	if got != 3 {
		t.Fatalf("OffsetForTime(50) = %d (timestamp 10 < 50); want 3 (first offset >= log start 2 with timestamp >= 50)", got)
	}
}

// Interleaving: a reader checks the offset against the log
// start, then DeleteRecordsBefore/retention detaches the first segment and
// moves the start, then the reader searches the segments. read clamped the
// segment index to 0 and returned the next segment's data for an offset
// below the log start, instead of OFFSET_OUT_OF_RANGE. The readRaceHook knob runs
// the DeleteRecordsBefore at exactly that point.
func TestReadStaleLogStart(t *testing.T) {
	t.Parallel()
	l, err := Open(t.TempDir(), smallSegments(1024))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 30 {
		if _, err := l.Append(makeBatch(t, i, 1, 100, 1)); err != nil {
			t.Fatal(err)
		}
	}
	segs := *l.segs.Load()
	if len(segs) < 3 {
		t.Fatalf("%d segments", len(segs))
	}
	cut := segs[1].Base()
	// The DeleteRecordsBefore lands between the reader's range check and
	// its segment search (once).
	l.opts.private.readRaceHook = func() {
		l.opts.private.readRaceHook = nil
		if err := l.DeleteRecordsBefore(cut); err != nil {
			t.Error(err)
		}
	}
	c, err := l.Read(0, 1<<20)
	if err == nil {
		first := batch.Batch(c.Data).BaseOffset()
		c.Release()
		t.Fatalf("read(0) after the log start moved to %d returned data from offset %d, no error; want ErrOffsetOutOfRange", cut, first)
	}
	if !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("err %v", err)
	}
}

// The same race with real goroutines: Read(off) with off >= the log start
// when called must return either the batch holding off or OFFSET_OUT_OF_RANGE.
func TestReadRacingDeleteRecords(t *testing.T) {
	t.Parallel()
	l, err := Open(t.TempDir(), smallSegments(1024))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var bad atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(5 * time.Second)
	for round := 0; time.Now().Before(deadline) && bad.Load() == 0; round++ {
		for i := range 20 {
			if _, err := l.Append(makeBatch(t, i, 1, 100, 1)); err != nil {
				t.Fatal(err)
			}
		}
		start := l.LogStartOffset()
		var stop atomic.Bool
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					off := start
					c, err := l.Read(off, 1<<20)
					if err != nil {
						continue
					}
					if len(c.Data) > 0 {
						if b := batch.Batch(c.Data); b.BaseOffset() > off {
							bad.Store(b.BaseOffset()<<20 | off)
						}
					}
					c.Release()
				}
			}()
		}
		time.Sleep(100 * time.Microsecond)
		if err := l.DeleteRecordsBefore(l.HighWatermark() - 1); err != nil {
			t.Fatal(err)
		}
		stop.Store(true)
		wg.Wait()
	}
	if v := bad.Load(); v != 0 {
		t.Fatalf("Read(%d) returned a chunk starting at %d: data skipped without OFFSET_OUT_OF_RANGE", v&(1<<20-1), v>>20)
	}
}

// A time index whose only entry is {timestamp 0, relative offset 0} is
// all zeros, so the zero terminator drops it at open (index/doc.go calls
// that harmless). LoadTail then takes the segment's max timestamp from the
// batches after the last offset-index entry only, with their offset; the
// seal at the next Close writes {0, that offset} as the final entry, and a
// lookup for timestamp 0 starts past the earlier batches with timestamp 0.
func TestOffsetForTimeZeroTimestampAfterReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := smallSegments(1 << 20)
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := l.Append(makeBatch(t, i, 1, 100, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := l.OffsetForTime(0); got != 0 {
		t.Fatalf("before reopen OffsetForTime(0) = %d", got)
	}
	for range 2 {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if l, err = Open(dir, opts); err != nil {
			t.Fatal(err)
		}
	}
	defer l.Close()
	got, err := l.OffsetForTime(0)
	if err != nil {
		t.Fatal(err)
	}
	if got != 0 {
		t.Fatalf("after clean reopens OffsetForTime(0) = %d; want 0 (every batch has timestamp 0)", got)
	}
}
