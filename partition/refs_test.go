package partition

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemlog/idemlog/segment"
)

// TestDroppedPrefaultLeaksSegmentRef: writeLocked takes a reference
// on the active segment for each prefault request (seg.acquire) and hands
// it to submit, which drops prefault tasks when the maintainer's queue is
// full, without releasing that reference. Each dropped request pins the
// segment forever: once retention takes it off the list its count never
// reaches zero, so its files are never deleted (disk space never freed),
// its mapping never unmapped, its descriptors never closed.
func TestDroppedPrefaultLeaksSegmentRef(t *testing.T) {
	t.Parallel()
	opts := Options{
		Segment:      segment.Options{MaxBytes: 4 << 20, IndexMaxBytes: 64 << 10, IndexIntervalBytes: 4096, ReserveAhead: 4096},
		RetentionAge: -1,
		RollAge:      time.Millisecond,
	}
	dir := t.TempDir()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(makeBatch(t, 0, 2, 200, 1)); err != nil {
		t.Fatal(err)
	}
	// A roll (by age) whose seal the maintainer will be stuck in.
	if _, err := l.Append(makeBatch(t, 1, 2, 200, 100)); err != nil {
		t.Fatal(err)
	}
	seg := l.active
	l.unsealedMu.Lock() // the maintainer's seal waits here: a slow seal
	// Appends into seg ask for a prefault every ReserveAhead/2 bytes; more
	// than the queue's 64 are dropped.
	for i := range 600 {
		if _, err := l.Append(makeBatch(t, 2+i, 2, 200, 100)); err != nil {
			l.unsealedMu.Unlock()
			t.Fatal(err)
		}
	}
	if l.active != seg {
		l.unsealedMu.Unlock()
		t.Fatal("rolled during the flood")
	}
	l.unsealedMu.Unlock()
	l.waitIdle()
	if got := seg.refs.Load(); got != 1 {
		t.Errorf("active segment holds %d references with no reader and the maintainer idle, want 1 (the list's)", got)
	}
	// Roll past seg (by age), then delete it: its files must go.
	if _, err := l.Append(makeBatch(t, 9999, 2, 200, 200)); err != nil {
		t.Fatal(err)
	}
	l.waitIdle()
	if err := l.DeleteRecordsBefore(l.HighWatermark()); err != nil {
		t.Fatal(err)
	}
	l.waitIdle()
	path := filepath.Join(dir, segment.FileName(seg.Base(), ".log"))
	if _, err := os.Stat(path); err == nil {
		t.Errorf("segment %d retired by DeleteRecordsBefore but %s is still on disk (%d references left)", seg.Base(), filepath.Base(path), seg.refs.Load())
	}
}
