package segment

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/index"
)

// recycleOpts: 1 MiB segments, so that a few dozen 20 KB batches fill
// one and recycling their file pays (maxInvalidatedShare).
var recycleOpts = Options{MaxBytes: 1 << 20, IndexMaxBytes: 4096, IndexIntervalBytes: 64 << 10, ReserveAhead: 64 << 10}

const recycleValue = 80 << 10 // bytes per old and new batch: about 13 per segment

// recycledFile fills a segment at base 0 with the batches next returns
// (until one does not fit), seals and recycles it, and returns the file
// and the old segment's size.
func recycledFile(t *testing.T, dir string, opts Options, next func() batch.Batch) (*RecycledFile, int64) {
	t.Helper()
	old, err := Create(dir, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(0); ; off++ {
		b := next()
		if !old.Fits(len(b), off) {
			break
		}
		if _, err := old.Append(b, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := old.Seal(); err != nil {
		t.Fatal(err)
	}
	size := old.Size()
	rf, err := old.Recycle()
	if err != nil || rf == nil {
		t.Fatalf("Recycle: %v, %v", rf, err)
	}
	for _, suffix := range []string{".log", ".index", ".timeindex", ".txnindex"} {
		if _, err := os.Stat(filepath.Join(dir, FileName(0, suffix))); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("recycled segment's %s still there: %v", suffix, err)
		}
	}
	return rf, size
}

// equalOld is the old segment's batches in most tests: equal-sized.
func equalOld(t *testing.T) func() batch.Batch {
	return func() batch.Batch { return testBatch(t, 7, 1, recycleValue) }
}

// activate makes the recycled file the active segment at base.
func activate(t *testing.T, dir string, opts Options, rf *RecycledFile, base int64) *Segment {
	t.Helper()
	sp, err := OpenSpare(dir, opts, rf)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sp.Activate(base)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// recycledSegment activates a recycled file as the segment at base with n
// batches of the old ones' size appended: the new data ends exactly on a
// batch boundary of the old, so the stale tail starts with a whole old
// batch (the case a length check cannot catch).
func recycledSegment(t *testing.T, dir string, base int64, n int) (*Segment, []batch.Batch) {
	t.Helper()
	rf, oldSize := recycledFile(t, dir, recycleOpts, equalOld(t))
	s := activate(t, dir, recycleOpts, rf, base)
	if s.Recycled() != oldSize || s.reserved.Load() != oldSize {
		t.Fatalf("recycled %d, reserved %d; want the old size %d", s.Recycled(), s.reserved.Load(), oldSize)
	}
	var sent []batch.Batch
	for i := range n {
		b := testBatch(t, 9, 1, recycleValue)
		if _, err := s.Append(b, base+int64(i)); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, b)
	}
	return s, sent
}

// TestRecycleSmallBatchesDeletes: a file of small batches is deleted, not
// reused: so many of their headers straddle a sector boundary that
// invalidating their CRCs would rewrite a large share of its pages.
func TestRecycleSmallBatchesDeletes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Create(dir, 0, recycleOpts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if _, err := s.Append(testBatch(t, 1, 1, 300), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	rf, err := s.Recycle()
	if err != nil || rf == nil {
		t.Fatalf("Recycle: %+v, %v", rf, err)
	}
	if sp, err := OpenSpare(dir, recycleOpts, rf); !errors.Is(err, ErrNotRecycled) {
		t.Fatalf("OpenSpare of 370-byte batches: %v, %v; want ErrNotRecycled", sp, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Fatalf("files left: %v", left)
	}
}

// TestRecycleUnsealedDeletes: a segment that was never sealed (its file
// may run on past its batches) is deleted, not recycled.
func TestRecycleUnsealedDeletes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Create(dir, 0, recycleOpts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(testBatch(t, 1, 1, recycleValue), 0); err != nil {
		t.Fatal(err)
	}
	if rf, err := s.Recycle(); err != nil || rf != nil {
		t.Fatalf("Recycle of an unsealed segment: %+v, %v; want nil, nil", rf, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Fatalf("files left: %v", left)
	}
}

// TestRecycledSegmentStaleTail: after a crash (no seal), a recycled
// segment's file holds its new batches and then the old segment's. Recover
// keeps exactly the new ones and cuts the rest; LoadTail, which trusts
// lengths rather than CRCs, refuses the stale batches instead of reading
// them as data; the verifier reports the tail as stale.
func TestRecycledSegmentStaleTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const base, n = 1000, 5
	s, sent := recycledSegment(t, dir, base, n)
	written := s.Size()
	s.Close() // a crash: no seal, the file keeps its full length

	r, err := VerifyFile(filepath.Join(dir, FileName(base, ".log")), 0)
	if err != nil || r.Batches != n || r.StaleTail != r.Bytes-written || r.NextOffset != base+n {
		t.Fatalf("verify before recovery: %+v, %v; want %d batches and a stale tail from %d", r, err, n, written)
	}

	// LoadTail walks from the last index entry to the file's end.
	s2, err := Open(dir, base, recycleOpts, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.LoadTail(); !errors.Is(err, index.ErrCorrupt) {
		t.Fatalf("LoadTail over a stale tail: %v (next offset %d), want ErrCorrupt", err, s2.NextOffset())
	}
	s2.Close()

	s3, err := Open(dir, base, recycleOpts, true)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	truncated, err := s3.Recover(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !truncated {
		t.Fatal("Recover cut a stale tail and did not report it")
	}
	if s3.NextOffset() != base+n || s3.Size() != written {
		t.Fatalf("recovered next offset %d size %d, want %d and %d", s3.NextOffset(), s3.Size(), base+n, written)
	}
	st, err := os.Stat(filepath.Join(dir, FileName(base, ".log")))
	if err != nil || st.Size() != written {
		t.Fatalf("file after recovery: %v, %v; want size %d", st, err, written)
	}
	s3.Publish(s3.Size())
	data := s3.Read(0, s3.Size())
	for i, b := range sent {
		n, err := batch.Size(data)
		if err != nil {
			t.Fatal(err)
		}
		got := batch.Batch(data[:n])
		if got.BaseOffset() != base+int64(i) || string(got[8:]) != string(b[8:]) {
			t.Fatalf("batch %d differs after recovery", i)
		}
		data = data[n:]
	}
}

// TestRecycledSegmentSealTrims: a clean seal leaves nothing of the old
// file, so a clean reopen (LoadTail) reads exactly the new batches, and
// the offline verifier finds no tail.
func TestRecycledSegmentSealTrims(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const base, n = 500, 5
	s, _ := recycledSegment(t, dir, base, n)
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	size := s.Size()
	s.Close()
	s2, err := Open(dir, base, recycleOpts, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s2.LoadTail(); err != nil {
		t.Fatal(err)
	}
	if s2.NextOffset() != base+n || s2.Size() != size {
		t.Fatalf("next offset %d size %d after seal, want %d and %d", s2.NextOffset(), s2.Size(), base+n, size)
	}
	r, err := VerifyFile(filepath.Join(dir, FileName(base, ".log")), 0)
	if err != nil || r.ZeroTail != 0 || r.StaleTail != 0 || r.Batches != n {
		t.Fatalf("verify: %+v, %v", r, err)
	}
}

// TestVerifyStaleTail: the offline verifier tells a recycled file's stale
// tail that starts inside an old batch from a corrupt batch of the
// segment's own.
func TestVerifyStaleTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const base = 1000
	rf, _ := recycledFile(t, dir, recycleOpts, equalOld(t))
	s := activate(t, dir, recycleOpts, rf, base)
	// Larger batches than the old: the new data ends inside an old batch.
	for i := range 3 {
		if _, err := s.Append(testBatch(t, 9, 1, recycleValue+3000), base+int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	end := s.Size()
	s.Close()
	path := filepath.Join(dir, FileName(base, ".log"))
	r, err := VerifyFile(path, 0)
	if err != nil || r.Batches != 3 || r.StaleTail != r.Bytes-end {
		t.Fatalf("verify: %+v, %v; want 3 batches, then a stale tail", r, err)
	}
	// A flipped byte in the last new batch: the walk stops there, and the
	// old batches ahead make the rest look stale, so the corrupt batch
	// must never count as data: the verifier fails or stops before it,
	// and callers see the offsets fall short.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xee}, end-10); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r, err = VerifyFile(path, 0)
	if err == nil && (r.Batches != 2 || r.NextOffset != base+2) {
		t.Fatalf("verify with a corrupt last batch: %+v; want an error or 2 batches", r)
	}
}
