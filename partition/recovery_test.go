package partition

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/idemlog/idemlog/segment"
)

// dirtyPages returns the number of dirty or under-writeback page-cache
// pages of path (cachestat(2), Linux 6.5+): bytes that a power loss at
// this moment would lose. It skips the test where cachestat is missing.
func dirtyPages(t *testing.T, path string) (dirty int64, ranges [][2]int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	page := int64(os.Getpagesize())
	type crange struct{ off, len uint64 }
	type cstat struct{ cache, dirty, writeback, evicted, recentlyEvicted uint64 }
	one := func(off, n int64) int64 {
		r := crange{uint64(off), uint64(n)}
		var c cstat
		_, _, e := unix.Syscall6(451, f.Fd(), uintptr(unsafe.Pointer(&r)), uintptr(unsafe.Pointer(&c)), 0, 0, 0)
		if e != 0 {
			t.Skipf("cachestat: %v", e)
		}
		return int64(c.dirty + c.writeback)
	}
	dirty = one(0, 0)
	var cur [2]int64
	in := false
	for p := int64(0); p < st.Size(); p += page {
		d := one(p, page) > 0
		switch {
		case d && !in:
			cur, in = [2]int64{p, p + page}, true
		case d && in:
			cur[1] = p + page
		case !d && in:
			ranges, in = append(ranges, cur), false
		}
	}
	if in {
		ranges = append(ranges, cur)
	}
	return dirty, ranges
}

// syncedImage records the .log files of dir as they are on the device
// right after a sync covered all of them (the caller knows it did).
func syncedImage(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".log" {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			m[e.Name()] = b
		}
	}
	return m
}

// powerLossImage copies dir to a new directory as a power loss now could
// leave it, as far as the .log files go: the first page of each run of a
// .log's pages that are dirty in the page cache (not written back since
// synced) holds what it held when synced (synced; zeros past it: the
// blocks were fallocated, unwritten on disk), while the kernel's writeback
// reached the device with the rest of the run before the power went
// (nothing orders unsynced writes).
func powerLossImage(t *testing.T, dir string, synced map[string][]byte) string {
	t.Helper()
	img := t.TempDir()
	copyDir(t, dir, img)
	entries, _ := os.ReadDir(dir)
	page := int64(os.Getpagesize())
	for _, e := range entries {
		if filepath.Ext(e.Name()) != ".log" {
			continue
		}
		_, ranges := dirtyPages(t, filepath.Join(dir, e.Name()))
		if len(ranges) == 0 {
			continue
		}
		f, err := os.OpenFile(filepath.Join(img, e.Name()), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range ranges {
			old := make([]byte, page)
			if s := synced[e.Name()]; int64(len(s)) > r[0] {
				copy(old, s[r[0]:])
			}
			if _, err := f.WriteAt(old, r[0]); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
	}
	return img
}

// TestRecoveredRolledSegmentSynced: a process crash right after a roll
// leaves the rolled segment's tail in the page cache only (no seal and no
// group sync covered it, so nothing there was acknowledged). Open recovers
// it into the log, shows it to readers, and takes it as durable: the
// recovery point (checkpointed at once) and the group sync's durable mark
// are the log end. But nothing ever syncs that segment again (only the
// active one and rolled ones on the unsealed list are synced). A retry of
// one of its batches is acknowledged as a duplicate after WaitDurable,
// which returns at once; a power loss then loses it, and since the
// checkpointed recovery point is past the segment, the next Open does
// not even scan it and keeps a hole in the middle of the log. Open now
// syncs what it recovered above the recovery point.
func TestRecoveredRolledSegmentSynced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// No visibility syncer: a sync in flight would stage the appends
	// below, out of the file at the crash.
	opts := Options{Sync: SyncPolicy{Kind: SyncAlways}, DurableVisibility: true, NoRecycle: true, noVisibilitySyncer: true,
		Segment: segment.Options{MaxBytes: 64 << 10, IndexMaxBytes: 4096, IndexIntervalBytes: 1024, ReserveAhead: 16 << 10}}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	// No seal, no spare, no prefault: the rolled segment stays as the
	// writer left it, as if the process died before the maintainer ran.
	l.maint.drop.Store(true)
	i := 0
	for ; i < 5; i++ {
		if _, err := l.Append(makeBatch(t, i, 1, 3000, 1)); err != nil {
			t.Fatal(err)
		}
	}
	synced := syncedImage(t, dir)
	for ; len(*l.segs.Load()) < 2; i++ {
		appendNoWait(t, l, makeBatch(t, i, 1, 3000, 1))
	}
	rolled := (*l.segs.Load())[0]
	rolledPath := filepath.Join(dir, segment.FileName(rolled.Base(), ".log"))
	end := l.written.Load()
	l.Kill()

	l2, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if l2.LogEndOffset() != end {
		t.Fatalf("log end %d after the process crash, want %d", l2.LogEndOffset(), end)
	}
	// What the engine does for a producer's retry of batch 10 (a duplicate
	// in its replayed state): WaitDurable, then acknowledge.
	if err := l2.WaitDurable(11); err != nil {
		t.Fatal(err)
	}
	acked, err := l2.Append(makeBatch(t, 999, 1, 100, 2))
	if err != nil {
		t.Fatal(err)
	}
	n, ranges := dirtyPages(t, rolledPath)
	t.Logf("recovery point %d; rolled segment %s: %d pages not on disk after the acknowledgements: %v",
		l2.RecoveryPoint(), filepath.Base(rolledPath), n, ranges)
	img := powerLossImage(t, dir, synced)
	l2.Kill()
	l3, err := Open(img, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l3.Close()
	var offs []int64
	for _, b := range readAll(t, l3) {
		offs = append(offs, b.BaseOffset())
	}
	t.Logf("after the power loss: log %d..%d, batches at %v", l3.LogStartOffset(), l3.LogEndOffset(), offs)
	if l3.LogEndOffset() <= acked.LastOffset {
		t.Fatalf("acknowledged batch at %d lost: log end %d", acked.BaseOffset, l3.LogEndOffset())
	}
	for k, off := range offs {
		if off != int64(k) {
			t.Fatalf("offsets below %d were reported durable (WaitDurable(11) returned, recovery point %d), "+
				"but after a power loss offset %d is gone: batches at %v", end, end, k, offs)
		}
	}
}

// TestRecoverAfterIndexMaxBytesLowered: segment.index.bytes
// (Options.Segment.IndexMaxBytes) lowered between runs. A segment written
// under the old value holds more index entries than the new one allows;
// recovery rebuilt the indexes at max(new limit, entries on disk), and the
// time index keeps its last slot for the final entry, so the rebuild failed
// one entry short and Recover cut the valid, acknowledged batch there, as
// a torn write: a rolled segment cut so took every later segment with it.
// Now a full index leaves the remaining batches unindexed.
func TestRecoverAfterIndexMaxBytesLowered(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{Sync: SyncPolicy{Kind: SyncAlways}, NoRecycle: true,
		Segment: segment.Options{MaxBytes: 80 << 10, IndexMaxBytes: 64 << 10, IndexIntervalBytes: 256, ReserveAhead: 64 << 10}}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	// The maintainer does not get to seal the rolled segment before the
	// crash (the recovery point stays below it, so Open scans it).
	l.maint.drop.Store(true)
	var last AppendResult
	for i := 0; len(*l.segs.Load()) < 2 || i%10 != 0; i++ {
		if last, err = l.Append(makeBatch(t, i, 1, 300, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	firstEnd := (*l.segs.Load())[1].Base()
	l.Kill() // a process crash: everything acknowledged was synced
	opts.Segment.IndexMaxBytes = 1 << 10
	l2, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.LogEndOffset() <= last.LastOffset {
		t.Fatalf("acknowledged offsets up to %d (first segment up to %d), log end %d after recovery with a smaller index limit",
			last.LastOffset, firstEnd-1, l2.LogEndOffset())
	}
}

// TestFailedLogSyncsNothing: once the log failed (a seal's
// fsync failed, say), no later sync may count bytes durable under any
// policy: a sync of the remaining segments would have moved the recovery
// point past the failed one, and a Flush checkpointed it.
func TestFailedLogSyncsNothing(t *testing.T) {
	t.Parallel()
	for _, kind := range []SyncKind{SyncNever, SyncInterval, SyncBytes} {
		dir := t.TempDir()
		opts := smallSegments(1 << 20)
		opts.Sync = SyncPolicy{Kind: kind, Interval: time.Hour, Bytes: 1 << 30}
		l := openWith30(t, dir, opts, 1)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		for i := 30; i < 35; i++ {
			if _, err := l.Append(makeBatch(t, i, 1, 200, int64(i))); err != nil {
				t.Fatal(err)
			}
		}
		l.fail(errors.New("injected: a seal's fsync failed"))
		if err := l.Flush(); !errors.Is(err, ErrFailed) {
			t.Errorf("policy %v: Flush of a failed log: %v, want ErrFailed", kind, err)
		}
		if rp := l.RecoveryPoint(); rp != 30 {
			t.Errorf("policy %v: recovery point %d after the failure, want 30", kind, rp)
		}
		if v, err := readCheckpoint(filepath.Join(dir, recoveryPointFile)); err != nil || v != 30 {
			t.Errorf("policy %v: recovery point checkpoint %d (%v), want 30", kind, v, err)
		}
		l.Kill()
	}
}

// TestZeroTailOfRolledSegmentDropsLaterSegments: after a
// power loss a rolled segment's unsynced tail can read back as zeros
// (unwritten blocks), which Recover does not count as cut. The segments
// after it must go all the same, or the log has a gap of offsets.
func TestZeroTailOfRolledSegmentDropsLaterSegments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := smallSegments(1024)
	l := openWith30(t, dir, opts, 1)
	segs := *l.segs.Load()
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	first := segs[0]
	firstEnd := segs[1].Base()
	l.Kill()
	// A crash before any checkpoint: everything is scanned.
	if err := os.Remove(filepath.Join(dir, recoveryPointFile)); err != nil {
		t.Fatal(err)
	}
	// The first segment's last batch never reached the disk: zeros.
	path := filepath.Join(dir, segment.FileName(first.Base(), ".log"))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	last := len(data) - len(makeBatch(t, 0, 1, 200, 1))
	if err := os.WriteFile(path, append(data[:last:last], make([]byte, len(data)-last)...), 0o644); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if got := l2.LogEndOffset(); got != firstEnd-1 {
		t.Fatalf("log end %d after the first segment lost its last batch, want %d (later segments dropped)", got, firstEnd-1)
	}
	for i, b := range readAll(t, l2) {
		if b.BaseOffset() != int64(i) {
			t.Fatalf("batch %d at offset %d: a gap", i, b.BaseOffset())
		}
	}
}
