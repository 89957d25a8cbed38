package partition

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/idemlog/idemlog/segment"
)

// TestZeroFillFollowsSyncSize: under SyncAlways a log zero-fills its next
// run while syncs are small (one 2 KB batch per sync) and goes back to
// fallocate once they are large (one 200 KB batch per sync); under
// SyncNever it never zero-fills. Everything appended reads back.
func TestZeroFillFollowsSyncSize(t *testing.T) {
	t.Parallel()
	for _, kind := range []SyncKind{SyncAlways, SyncNever} {
		opts := Options{Sync: SyncPolicy{Kind: kind}, Segment: segment.Options{MaxBytes: 64 << 20, ReserveAhead: 256 << 10}}
		l, err := Open(t.TempDir(), opts)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		phase := func(batches, records int) bool {
			for i := range batches {
				if _, err := l.Append(makeBatch(t, i, records, 2000, 1)); err != nil {
					t.Fatal(err)
				}
				n++
			}
			l.waitIdle()
			return l.maint.zeroRun.Load() > 0
		}
		small := phase(300, 1) // 600 KB: a few prefault requests
		large := phase(12, 100)
		if got, want := small, kind == SyncAlways; got != want {
			t.Errorf("%v, 2 KB per sync: zero fill %v, want %v", kind, got, want)
		}
		if large {
			t.Errorf("%v, 200 KB per sync: still zero-filling", kind)
		}
		if got := len(readAll(t, l)); got != n {
			t.Errorf("%v: %d batches read back, want %d", kind, got, n)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestZeroFillBoundedByAppends: a log that appends little gets little
// zero-filled ahead (at most minZeroRun past what it wrote, where the
// reservation used to run a whole ReserveAhead), and one that keeps
// appending gets up to ReserveAhead: many quiet partitions under
// SyncAlways must not cost the device ReserveAhead of zeros each.
func TestZeroFillBoundedByAppends(t *testing.T) {
	t.Parallel()
	const ahead = 4 << 20
	dir := t.TempDir()
	l, err := Open(dir, Options{Sync: SyncPolicy{Kind: SyncAlways}, Segment: segment.Options{MaxBytes: 64 << 20, ReserveAhead: ahead}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fileSize := func() int64 {
		st, err := os.Stat(filepath.Join(dir, segment.FileName(0, ".log")))
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	for i := range 10 {
		if _, err := l.Append(makeBatch(t, i, 1, 2000, 1)); err != nil {
			t.Fatal(err)
		}
	}
	l.waitIdle()
	if got, max := fileSize(), int64(20<<10+minZeroRun+4096); got > max || l.maint.zeroRun.Load() == 0 {
		t.Fatalf("after 20 KB: file %d bytes (want <= %d), zero run %d", got, max, l.maint.zeroRun.Load())
	}
	for i := range 3000 { // 6 MB
		if _, err := l.Append(makeBatch(t, i, 1, 2000, 1)); err != nil {
			t.Fatal(err)
		}
	}
	l.waitIdle()
	if got, min := fileSize(), int64(6<<20+ahead/2); got < min {
		t.Fatalf("after 6 MB: file %d bytes, want >= %d (a full run ahead)", got, min)
	}
}
