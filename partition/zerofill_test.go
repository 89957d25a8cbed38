package partition

import (
	"testing"

	"github.com/idemlog/idemlog/segment"
)

// TestZeroFillFollowsSyncSize: under SyncAlways a log zero-fills its next
// run while syncs are small (one 2 KB batch per sync) and goes back to
// fallocate once they are large (one 200 KB batch per sync); under
// SyncNever it never zero-fills. Everything appended reads back.
func TestZeroFillFollowsSyncSize(t *testing.T) {
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
			return l.maint.zeroFill.Load()
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
