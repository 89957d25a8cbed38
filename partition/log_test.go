package partition

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemlog/idemlog/internal/fsutil"
	"github.com/idemlog/idemlog/internal/testutil"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/segment"
)

// makeBatch builds a plain batch of n records whose values name id, with
// timestamp ts.
func makeBatch(t testing.TB, id, n, valueSize int, ts int64) []byte {
	t.Helper()
	return testutil.Batch(t, testutil.BatchSpec{Records: n, Timestamp: ts, Value: func(i int) []byte {
		v := bytes.Repeat([]byte{byte('a' + id%26)}, valueSize)
		copy(v, fmt.Sprintf("%d/%d", id, i))
		return v
	}})
}

// smallSegments keeps segments tiny so tests roll often.
func smallSegments(maxBytes int64) Options {
	return Options{Segment: segment.Options{MaxBytes: maxBytes, IndexMaxBytes: 4096, IndexIntervalBytes: 256, ReserveAhead: 4096}}
}

// readAll reads every batch from the log start to the high watermark.
func readAll(t testing.TB, l *Log) []batch.Batch {
	t.Helper()
	var out []batch.Batch
	off := l.LogStartOffset()
	for off < l.HighWatermark() {
		c, err := l.Read(off, 1000)
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		it := batch.NewIter(c.Data)
		for it.Next() {
			out = append(out, batch.Batch(bytes.Clone(it.Batch())))
		}
		if err := it.Err(); err != nil {
			t.Fatalf("chunk at %d: %v", off, err)
		}
		if c.NextOffset <= off {
			t.Fatalf("Read(%d) made no progress", off)
		}
		off = c.NextOffset
		c.Release()
	}
	return out
}

// sameBatch checks that stored equals sent except for the stamped base offset.
func sameBatch(t testing.TB, stored batch.Batch, sent []byte, base int64) {
	t.Helper()
	if stored.BaseOffset() != base {
		t.Fatalf("stored base offset %d, want %d", stored.BaseOffset(), base)
	}
	if !bytes.Equal(stored[8:], sent[8:]) {
		t.Fatalf("batch at %d differs from what was appended", base)
	}
}

func TestAppendReadReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := Open(dir, smallSegments(4096))
	if err != nil {
		t.Fatal(err)
	}
	var sent [][]byte
	var off int64
	for i := range 50 {
		b := makeBatch(t, i, 1+i%4, 100, int64(1000+i))
		res, err := l.Append(b)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if res.BaseOffset != off || res.LastOffset != off+int64(1+i%4)-1 {
			t.Fatalf("append %d: offsets %+v, want base %d", i, res, off)
		}
		off = res.LastOffset + 1
		sent = append(sent, b)
	}
	if l.HighWatermark() != off || l.LogEndOffset() != off {
		t.Fatalf("hw %d leo %d, want %d", l.HighWatermark(), l.LogEndOffset(), off)
	}
	check := func(l *Log) {
		got := readAll(t, l)
		if len(got) != len(sent) {
			t.Fatalf("read %d batches, want %d", len(got), len(sent))
		}
		var base int64
		for i, g := range got {
			sameBatch(t, g, sent[i], base)
			base = g.NextOffset()
		}
	}
	check(l)
	if n := len(*l.segs.Load()); n < 5 {
		t.Fatalf("only %d segments: rolls did not happen", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if !fsutil.Exists(filepath.Join(dir, cleanShutdownFile)) {
		t.Fatal("no clean-shutdown marker after Close")
	}
	l, err = Open(dir, smallSegments(4096))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if fsutil.Exists(filepath.Join(dir, cleanShutdownFile)) {
		t.Fatal("marker still present after Open")
	}
	if l.LogEndOffset() != off || l.HighWatermark() != off {
		t.Fatalf("reopened: leo %d hw %d, want %d", l.LogEndOffset(), l.HighWatermark(), off)
	}
	check(l)
	// Appends continue densely after reopen.
	res, err := l.Append(makeBatch(t, 99, 2, 10, 5000))
	if err != nil || res.BaseOffset != off {
		t.Fatalf("append after reopen: %+v %v", res, err)
	}
}

func TestReadLimits(t *testing.T) {
	t.Parallel()
	l, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var sizes []int
	for i := range 10 {
		b := makeBatch(t, i, 3, 200, 1)
		sizes = append(sizes, len(b))
		if _, err := l.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	// maxBytes smaller than one batch still returns exactly one.
	c, err := l.Read(0, 1)
	if err != nil || len(c.Data) != sizes[0] || c.NextOffset != 3 {
		t.Fatalf("Read(0, 1): %d bytes next %d, %v", len(c.Data), c.NextOffset, err)
	}
	c.Release()
	// An offset inside a batch returns that whole batch.
	c, err = l.Read(4, sizes[1]+sizes[2]-1)
	if err != nil || len(c.Data) != sizes[1] || batch.Batch(c.Data).BaseOffset() != 3 {
		t.Fatalf("Read(4): %d bytes, %v", len(c.Data), err)
	}
	c.Release()
	c, err = l.Read(3, sizes[1]+sizes[2])
	if err != nil || len(c.Data) != sizes[1]+sizes[2] {
		t.Fatalf("Read(3) two batches: %d bytes, %v", len(c.Data), err)
	}
	c.Release()
	c, err = l.Read(30, 100)
	if err != nil || len(c.Data) != 0 || c.NextOffset != 30 {
		t.Fatalf("Read at the high watermark: %d bytes, %v", len(c.Data), err)
	}
	if _, err := l.Read(31, 100); !errors.Is(err, ErrOffsetOutOfRange) || errcode.Code(err) != errcode.OffsetOutOfRange {
		t.Fatalf("Read past the high watermark: %v", err)
	}
	if _, err := l.Read(-1, 100); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read below the start: %v", err)
	}
}

func TestAppendRejectsBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := Open(dir, Options{MaxBatchSize: 2000, Segment: segment.Options{MaxBytes: 3000}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	good := makeBatch(t, 1, 2, 50, 1)
	if _, err := l.Append(good); err != nil {
		t.Fatal(err)
	}
	before := readAll(t, l)
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)-1] ^= 1
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"crc", corrupt, batch.ErrCRC},
		{"truncated", good[:len(good)-3], batch.ErrTruncated},
		{"garbage", []byte("definitely not a batch"), batch.ErrTruncated},
		{"too large", makeBatch(t, 2, 30, 100, 1), batch.ErrTooLarge},
	}
	for _, c := range cases {
		if _, err := l.Append(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// A batch over the segment size but under the batch limit.
	l2, err := Open(t.TempDir(), Options{Segment: segment.Options{MaxBytes: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l2.Append(makeBatch(t, 3, 10, 100, 1)); !errors.Is(err, ErrTooLarge) || errcode.Code(err) != errcode.RecordListTooLarge {
		t.Errorf("larger than a segment: %v", err)
	}
	l2.Close()
	after := readAll(t, l)
	if len(after) != len(before) || l.LogEndOffset() != 2 {
		t.Fatalf("log changed by rejected appends: %d batches, leo %d", len(after), l.LogEndOffset())
	}
}

func TestOffsetForTime(t *testing.T) {
	t.Parallel()
	l, err := Open(t.TempDir(), smallSegments(2048))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 40 {
		if _, err := l.Append(makeBatch(t, i, 1, 100, int64(100*i))); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ ts, want int64 }{{-5, 0}, {0, 0}, {1, 1}, {100, 1}, {150, 2}, {3900, 39}, {3901, 40}} {
		got, err := l.OffsetForTime(c.ts)
		if err != nil || got != c.want {
			t.Errorf("OffsetForTime(%d) = %d, %v; want %d", c.ts, got, err, c.want)
		}
	}
}

func TestUncleanRecoveryTruncatesTornTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := Open(dir, smallSegments(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for i := range 20 {
		b := makeBatch(t, i, 1, 100, 1)
		sizes = append(sizes, len(b))
		if _, err := l.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	// Crash: no Close. Flip a byte in batch 15, which lies in the
	// unflushed part (never policy: the recovery point is 0).
	l.abandon()
	var pos int
	for _, n := range sizes[:15] {
		pos += n
	}
	logPath := filepath.Join(dir, segment.FileName(0, ".log"))
	f, err := os.OpenFile(logPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, int64(pos+70)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l2, err := Open(dir, smallSegments(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.LogEndOffset() != 15 {
		t.Fatalf("recovered log end %d, want 15 (cut at the corrupt batch)", l2.LogEndOffset())
	}
	st, _ := os.Stat(logPath)
	if st.Size() < int64(pos) {
		t.Fatalf("file cut below the valid prefix: %d < %d", st.Size(), pos)
	}
	if got := readAll(t, l2); len(got) != 15 {
		t.Fatalf("read %d batches after recovery, want 15", len(got))
	}
	res, err := l2.Append(makeBatch(t, 100, 1, 100, 1))
	if err != nil || res.BaseOffset != 15 {
		t.Fatalf("append after recovery: %+v, %v", res, err)
	}
}

func TestRetention(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_000_000)
	opts := smallSegments(1024)
	opts.Now = func() time.Time { return now }
	opts.RetentionAge = time.Hour
	dir := t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 30 {
		if _, err := l.Append(makeBatch(t, i, 1, 200, now.UnixMilli()+int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	// A batch that will not have expired keeps the active segment (an
	// expired active segment is rolled and deleted too: see
	// TestRetentionExpiredActiveSegment).
	if _, err := l.Append(makeBatch(t, 30, 1, 200, now.Add(2*time.Hour).UnixMilli())); err != nil {
		t.Fatal(err)
	}
	nsegs := len(*l.segs.Load())
	// A reader holds the first segment across its deletion.
	held, err := l.Read(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	heldCopy := bytes.Clone(held.Data)
	now = now.Add(2 * time.Hour)
	deleted, err := l.ApplyRetention()
	if err != nil {
		t.Fatal(err)
	}
	if deleted != nsegs-1 {
		t.Fatalf("deleted %d of %d segments, want all but the active one", deleted, nsegs)
	}
	if !bytes.Equal(held.Data, heldCopy) {
		t.Fatal("held chunk changed under retention")
	}
	if _, err := os.Stat(filepath.Join(dir, segment.FileName(0, ".log"))); err != nil {
		t.Fatalf("file of a held segment removed before release: %v", err)
	}
	held.Release()
	l.waitIdle() // the maintainer's reference goes once it has sealed
	if _, err := os.Stat(filepath.Join(dir, segment.FileName(0, ".log"))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file of a released, retired segment still there: %v", err)
	}
	start := l.LogStartOffset()
	if start == 0 || start != (*l.segs.Load())[0].Base() {
		t.Fatalf("log start %d", start)
	}
	if _, err := l.Read(0, 100); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the new start: %v", err)
	}
	// Size-based retention on a fresh log.
	opts2 := smallSegments(1024)
	opts2.RetentionAge = -1
	opts2.RetentionBytes = 3000
	l2, err := Open(t.TempDir(), opts2)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	for i := range 30 {
		if _, err := l2.Append(makeBatch(t, i, 1, 200, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l2.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, s := range *l2.segs.Load() {
		total += s.Published()
	}
	if total > 3000+1024 || total < 3000-1024 {
		t.Fatalf("size after retention %d, want about 3000", total)
	}
}

// TestModel runs random append / roll / retention / reopen / crash
// sequences against a model: the list of appended batches.
func TestModel(t *testing.T) {
	t.Parallel()
	seeds := 20
	if testing.Short() {
		seeds = 3
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, uint64(seed)) })
	}
}

func runModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	dir := t.TempDir()
	opts := smallSegments(int64(1024 + rng.IntN(4096)))
	opts.RetentionAge = -1
	type entry struct {
		b    []byte
		base int64
	}
	var model []entry
	start := int64(0)
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	check := func() {
		got := readAll(t, l)
		var want []entry
		for _, e := range model {
			if e.base >= start {
				want = append(want, e)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("log has %d batches, model %d", len(got), len(want))
		}
		for i := range got {
			sameBatch(t, got[i], want[i].b, want[i].base)
		}
	}
	next := int64(0)
	for step := range 300 {
		switch op := rng.IntN(100); {
		case op < 75:
			b := makeBatch(t, step, 1+rng.IntN(5), rng.IntN(300), int64(step))
			res, err := l.Append(b)
			if err != nil {
				t.Fatalf("step %d append: %v", step, err)
			}
			if res.BaseOffset != next {
				t.Fatalf("step %d: base %d, want %d", step, res.BaseOffset, next)
			}
			model = append(model, entry{b, next})
			next = res.LastOffset + 1
		case op < 82:
			opts.RetentionBytes = int64(2000 + rng.IntN(8000))
			l.opts.RetentionBytes = opts.RetentionBytes
			if _, err := l.ApplyRetention(); err != nil {
				t.Fatal(err)
			}
			start = l.LogStartOffset()
		case op < 90:
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if l, err = Open(dir, opts); err != nil {
				t.Fatal(err)
			}
		default:
			// Crash: abandon the log without closing; the page cache
			// holds everything (never policy), so nothing is lost.
			l.abandon()
			if l, err = Open(dir, opts); err != nil {
				t.Fatal(err)
			}
		}
		if l.LogEndOffset() != next {
			t.Fatalf("step %d: log end %d, model %d", step, l.LogEndOffset(), next)
		}
		if l.LogStartOffset() != start {
			t.Fatalf("step %d: log start %d, model %d", step, l.LogStartOffset(), start)
		}
		if step%10 == 0 {
			check()
		}
	}
	check()
	l.Close()
}

// TestRetentionCrashBeforeDelete: retention checkpoints the new log start
// and leaves the files to the maintainer; a crash before it deletes them
// leaves segments wholly below the log start, which Open deletes.
func TestRetentionCrashBeforeDelete(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_000_000)
	opts := smallSegments(1024)
	opts.Now = func() time.Time { return now }
	opts.RetentionAge = time.Hour
	dir := t.TempDir()
	l := openWith30(t, dir, opts, now.UnixMilli())
	// Keeps the active segment from expiring (it would be rolled and
	// deleted, leaving nothing to read at the log start).
	if _, err := l.Append(makeBatch(t, 30, 1, 200, now.Add(2*time.Hour).UnixMilli())); err != nil {
		t.Fatal(err)
	}
	l.waitIdle()
	l.maint.drop.Store(true) // the maintainer does nothing from here: a crash
	now = now.Add(2 * time.Hour)
	deleted, err := l.ApplyRetention()
	if err != nil || deleted == 0 {
		t.Fatalf("retention: %d, %v", deleted, err)
	}
	start := l.LogStartOffset()
	l.waitIdle()
	if _, err := os.Stat(filepath.Join(dir, segment.FileName(0, ".log"))); err != nil {
		t.Fatalf("retired segment's file gone before the maintainer ran: %v", err)
	}
	l.Kill()

	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.LogStartOffset(); got != start {
		t.Fatalf("log start %d after reopening, want %d", got, start)
	}
	bases, err := listSegments(dir)
	if err != nil || len(bases) == 0 || bases[0] != start {
		t.Fatalf("segments after reopening: %v, %v; want the first at the log start %d", bases, err, start)
	}
	if _, err := os.Stat(filepath.Join(dir, segment.FileName(0, ".log"))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("retired segment's file still there after reopening: %v", err)
	}
	if _, err := l.Read(0, 100); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the log start: %v", err)
	}
	if c, err := l.Read(start, 100); err != nil || len(c.Data) == 0 {
		t.Fatalf("read at the log start: %v", err)
	} else {
		c.Release()
	}
}

// TestRetentionCrashTornBelowStart: a crash after retention checkpointed
// the log start but before the maintainer deleted the segments below it,
// with a torn tail in one of them (its seal cut short too). Open deletes
// those segments before recovery scans anything, so the tear cannot make
// it drop the segments after it. (Without this: it once did, and the log
// start ended above the log end.)
func TestRetentionCrashTornBelowStart(t *testing.T) {
	t.Parallel()
	opts := smallSegments(1024)
	opts.RetentionBytes = 2500
	dir := t.TempDir()
	l := openWith30(t, dir, opts, 0)
	l.waitIdle()
	l.maint.drop.Store(true) // a crash from here on
	if n, err := l.ApplyRetention(); err != nil || n == 0 {
		t.Fatalf("retention: %d, %v", n, err)
	}
	start := l.LogStartOffset()
	l.Kill()
	bases, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	below := int64(-1)
	for _, b := range bases {
		if b < start {
			below = b
		}
	}
	if below < 0 {
		t.Fatalf("no segment left below the log start %d: %v", start, bases)
	}
	p := filepath.Join(dir, segment.FileName(below, ".log"))
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, st.Size()-100); err != nil {
		t.Fatal(err)
	}

	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.LogStartOffset() != start || l.LogEndOffset() != 30 {
		t.Fatalf("log start %d, end %d after reopening; want %d and 30", l.LogStartOffset(), l.LogEndOffset(), start)
	}
	for off := start; off < 30; off++ {
		c, err := l.Read(off, 1)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		c.Release()
	}
}

// TestLogEndBelowStartAfterCrash: the log start was moved (and
// checkpointed) past offsets that a crash then lost. As Kafka does, Open
// starts an empty log at the log start.
func TestLogEndBelowStartAfterCrash(t *testing.T) {
	t.Parallel()
	opts := smallSegments(1024)
	dir := t.TempDir()
	l := openWith30(t, dir, opts, 0)
	if err := l.DeleteRecordsBefore(28); err != nil {
		t.Fatal(err)
	}
	last := (*l.segs.Load())[len(*l.segs.Load())-1].Base()
	l.Kill()
	if err := os.Truncate(filepath.Join(dir, segment.FileName(last, ".log")), 0); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.LogStartOffset() != 28 || l.LogEndOffset() != 28 {
		t.Fatalf("log start %d, end %d; want both 28", l.LogStartOffset(), l.LogEndOffset())
	}
	if bases, err := listSegments(dir); err != nil || len(bases) != 1 || bases[0] != 28 {
		t.Fatalf("segments %v, %v; want one at 28", bases, err)
	}
	if res, err := l.Append(makeBatch(t, 30, 1, 200, 30)); err != nil || res.BaseOffset != 28 {
		t.Fatalf("append: %+v, %v", res, err)
	}
}

// TestDeleteRecordsDuringClose: DeleteRecordsBefore racing Close returns
// nil (before Close began) or ErrClosed, and never queues work for the
// stopped maintainer (it once panicked, sending on its closed queue).
func TestDeleteRecordsDuringClose(t *testing.T) {
	t.Parallel()
	opts := smallSegments(1024)
	opts.Segment.Reserve = segment.ReserveZeroFill
	for round := range 20 {
		l := openWith30(t, t.TempDir(), opts, 0)
		l.waitIdle()
		closed := make(chan error)
		go func() { closed <- l.Close() }()
		for off := int64(1); off < 30; off++ {
			if err := l.DeleteRecordsBefore(off); err != nil && !errors.Is(err, ErrClosed) {
				t.Fatalf("round %d: DeleteRecordsBefore(%d) racing Close: %v", round, off, err)
			}
		}
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		if err := l.DeleteRecordsBefore(29); !errors.Is(err, ErrClosed) {
			t.Fatalf("DeleteRecordsBefore after Close: %v, want ErrClosed", err)
		}
	}
}

// openWith30 opens a log in dir and appends 30 one-record batches of 200
// bytes, timestamps ts, ts+1, ...
func openWith30(t *testing.T, dir string, opts Options, ts int64) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if _, err := l.Append(makeBatch(t, i, 1, 200, ts+int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	return l
}
