package partition

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// copyDir copies the files of src into dst: the image a crash would leave
// of a log still running (a file renamed or removed meanwhile is skipped).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	es, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeleteRecordsDurableWhenStartAhead: DeleteRecordsBefore(10) while a
// concurrent DeleteRecordsBefore(20), which already moved the log start in
// memory, is still writing its checkpoint: the second call must not return
// before a checkpoint covers 10, or a crash brings offsets 0..9 back.
// (Without this: it returned at once.)
func TestDeleteRecordsDurableWhenStartAhead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openWith30(t, dir, smallSegments(1024), 1)
	defer l.Close()
	l.ckMu.Lock() // the first caller's checkpoint fsyncs are slow
	done := make(chan error)
	go func() { done <- l.DeleteRecordsBefore(20) }()
	for l.LogStartOffset() != 20 {
		time.Sleep(time.Millisecond)
	}
	second := make(chan error)
	go func() { second <- l.DeleteRecordsBefore(10) }()
	select {
	case err := <-second:
		l.ckMu.Unlock()
		t.Fatalf("DeleteRecordsBefore(10) returned (%v) while the checkpoint was still being written", err)
	case <-time.After(50 * time.Millisecond):
	}
	l.ckMu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	// Both have returned: crash now.
	crash := t.TempDir()
	copyDir(t, dir, crash)
	l2, err := Open(crash, smallSegments(1024))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if got := l2.LogStartOffset(); got < 10 {
		t.Fatalf("log start %d after a crash, though DeleteRecordsBefore(10) returned", got)
	}
}

// TestNoSnapshotBelowStartAfterCrash: a crash after retention's checkpoint,
// before the maintainer deleted the files and before the last detached
// segment's seal wrote the snapshot at the new first base. Open deletes the
// segments below the log start and their snapshots with them, so no
// snapshot below the log start is left for the engine to restore.
func TestNoSnapshotBelowStartAfterCrash(t *testing.T) {
	t.Parallel()
	opts := smallSegments(1024)
	opts.Snapshot = func(off int64) []byte { return []byte{1} }
	dir := t.TempDir()
	l := openWith30(t, dir, opts, 1)
	l.waitIdle()
	l.maint.drop.Store(true)   // crash from here: the next seal never runs
	for i := 30; i < 40; i++ { // at least one roll
		if _, err := l.Append(makeBatch(t, i, 1, 200, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	l.opts.RetentionBytes = 1
	if n, err := l.ApplyRetention(); err != nil || n == 0 {
		t.Fatal(n, err)
	}
	start := l.LogStartOffset()
	l.Kill()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var snaps []int64
	es, _ := os.ReadDir(dir)
	for _, e := range es {
		if filepath.Ext(e.Name()) == ".snapshot" {
			snaps = append(snaps, mustParse(e.Name()))
		}
	}
	t.Logf("log start %d, end %d, snapshots %v", start, l.LogEndOffset(), snaps)
	newest := int64(-1)
	for _, s := range snaps {
		if s <= l.LogEndOffset() {
			newest = max(newest, s)
		}
	}
	if newest >= 0 && newest < start {
		t.Fatalf("newest snapshot %d lies below the log start %d", newest, start)
	}
}

func mustParse(name string) int64 {
	var n int64
	for _, c := range name[:20] {
		n = n*10 + int64(c-'0')
	}
	return n
}

// TestNoRetentionWriteAfterKill: a retention in flight when Kill is called
// must not write its checkpoint after Kill returns (Kill leaves the files
// as a crash would; the directory may be reopened at once).
func TestNoRetentionWriteAfterKill(t *testing.T) {
	t.Parallel()
	opts := smallSegments(1024)
	opts.RetentionBytes = 1
	dir := t.TempDir()
	l := openWith30(t, dir, opts, 1)
	l.waitIdle()
	before, _ := readCheckpoint(filepath.Join(dir, logStartFile))
	l.ckMu.Lock()
	done := make(chan error)
	go func() { _, err := l.ApplyRetention(); done <- err }()
	for l.LogStartOffset() == 0 {
		time.Sleep(time.Millisecond)
	}
	killed := make(chan struct{})
	go func() { l.Kill(); close(killed) }()
	time.Sleep(20 * time.Millisecond) // Kill waits for the retention in flight
	l.ckMu.Unlock()
	<-killed
	atKill, _ := readCheckpoint(filepath.Join(dir, logStartFile))
	<-done
	after, _ := readCheckpoint(filepath.Join(dir, logStartFile))
	if after != atKill {
		t.Fatalf("log-start checkpoint changed after Kill returned: %d -> %d (before the retention: %d)", atKill, after, before)
	}
}

// TestCheckpointRewrittenOnlyWhenMoved: writeCheckpoints leaves a
// checkpoint file whose value has not moved alone (the same inode: no
// write, fsync or rename), rewrites the one that moved, and a log start
// that retention moves reaches its file.
func TestCheckpointRewrittenOnlyWhenMoved(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l := openWith30(t, dir, smallSegments(1024), 1)
	defer l.Close()
	stat := func(name string) os.FileInfo {
		t.Helper()
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	value := func(name string) int64 {
		t.Helper()
		v, err := readCheckpoint(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	rp, ls := stat(recoveryPointFile), stat(logStartFile)
	if got := value(recoveryPointFile); got != 30 {
		t.Fatalf("recovery point checkpoint %d, want 30", got)
	}
	if _, err := l.Append(makeBatch(t, 30, 1, 200, 31)); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if os.SameFile(rp, stat(recoveryPointFile)) || value(recoveryPointFile) != 31 {
		t.Fatalf("recovery point checkpoint not rewritten: %d", value(recoveryPointFile))
	}
	if !os.SameFile(ls, stat(logStartFile)) {
		t.Fatal("log start checkpoint rewritten though the log start did not move")
	}
	if err := l.DeleteRecordsBefore(10); err != nil {
		t.Fatal(err)
	}
	if got := value(logStartFile); got != 10 {
		t.Fatalf("log start checkpoint %d after DeleteRecordsBefore(10)", got)
	}
	// A failed write is written again: the durable values are forgotten.
	l.ckMu.Lock()
	l.ckDurable = [2]int64{-1, -1}
	l.ckMu.Unlock()
	ls = stat(logStartFile)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if os.SameFile(ls, stat(logStartFile)) || value(logStartFile) != 10 {
		t.Fatal("log start checkpoint not rewritten after its durable value was forgotten")
	}
}

// TestRetentionDeletesSegmentsBelowLogStart: DeleteRecordsBefore
// moves the log start to the end of the active segment; the next append
// rolls, which leaves the old segment wholly below the log start. Kafka's
// deleteOldSegments always runs deleteLogStartOffsetBreachedSegments
// (whatever retention.ms / retention.bytes say), so the next retention
// deletes it. Here it stays until the next Open.
func TestRetentionDeletesSegmentsBelowLogStart(t *testing.T) {
	t.Parallel()
	opts := smallSegments(1024)
	opts.RetentionAge = -1 // retention.ms = -1, retention.bytes off
	l, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 3 {
		if _, err := l.Append(makeBatch(t, i, 1, 200, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(*l.segs.Load()); n != 1 {
		t.Fatalf("%d segments before the roll, want 1", n)
	}
	if err := l.DeleteRecordsBefore(3); err != nil {
		t.Fatal(err)
	}
	// Does not fit the first segment: rolls to base 3.
	if _, err := l.Append(makeBatch(t, 3, 1, 600, 3)); err != nil {
		t.Fatal(err)
	}
	segs := *l.segs.Load()
	if len(segs) != 2 || segs[1].Base() != 3 {
		t.Fatalf("no roll to base 3: %d segments", len(segs))
	}
	deleted, err := l.ApplyRetention()
	if err != nil {
		t.Fatal(err)
	}
	if deleted != 1 || l.FirstRetainedOffset() != 3 {
		t.Fatalf("ApplyRetention deleted %d segments, first retained offset %d; want 1 and 3 (segment 0 lies wholly below the log start %d)",
			deleted, l.FirstRetainedOffset(), l.LogStartOffset())
	}
}

// TestRetentionExpiredActiveSegment: all the data is in the active
// segment and it is older than retention.ms. Kafka's deletableSegments
// takes the active segment too when the high watermark reaches the log end
// (rolling first), so the log start moves to the log end and the expired
// records go. Here they stay for as long as nothing is appended (and
// segment.ms, by batch timestamps, never rolls an idle segment).
func TestRetentionExpiredActiveSegment(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_000_000_000)
	opts := smallSegments(1 << 20)
	opts.Now = func() time.Time { return now }
	opts.RetentionAge = time.Hour
	l, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 5 {
		if _, err := l.Append(makeBatch(t, i, 1, 100, now.UnixMilli())); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(2 * time.Hour)
	deleted, err := l.ApplyRetention()
	if err != nil {
		t.Fatal(err)
	}
	if deleted != 1 || l.LogStartOffset() != 5 {
		t.Fatalf("ApplyRetention two hours past retention.ms=1h: deleted %d, log start %d; want 1 and 5 (Kafka rolls the expired active segment and deletes it)",
			deleted, l.LogStartOffset())
	}
	if _, err := l.Read(0, 1000); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("Read(0) after retention: %v; want ErrOffsetOutOfRange", err)
	}
}

// TestRetentionNoTimestampSegments: batches without timestamps
// (NO_TIMESTAMP, -1, legal in a v2 batch). Kafka's
// LogSegment.largestTimestamp falls back to the file's last-modified time
// when maxTimestampSoFar < 0, so closed segments of such batches still
// expire by retention.ms. Here a segment whose max timestamp is -1 never
// expires by age.
func TestRetentionNoTimestampSegments(t *testing.T) {
	t.Parallel()
	now := time.Now().Add(48 * time.Hour) // the files were written "two days ago"
	opts := smallSegments(1024)
	opts.Now = func() time.Time { return now }
	opts.RetentionAge = time.Hour
	l, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 12 {
		if _, err := l.Append(makeBatch(t, i, 1, 200, -1)); err != nil {
			t.Fatal(err)
		}
	}
	nsegs := len(*l.segs.Load())
	if nsegs < 3 {
		t.Fatalf("only %d segments", nsegs)
	}
	deleted, err := l.ApplyRetention()
	if err != nil {
		t.Fatal(err)
	}
	if deleted < nsegs-1 {
		t.Fatalf("ApplyRetention deleted %d of %d segments last modified 48h before now (retention.ms=1h); want at least %d",
			deleted, nsegs, nsegs-1)
	}
}

// TestRollAgeNoTimestamp: Kafka's LogSegment.timeWaitedForRoll
// uses now - the segment's creation time when its first batch has no
// timestamp (maxTimestamp -1). Here a segment whose first batch has no
// timestamp never rolls by segment.ms.
func TestRollAgeNoTimestamp(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_000_000_000)
	opts := smallSegments(1 << 20)
	opts.Now = func() time.Time { return now }
	opts.RollAge = time.Hour
	opts.RetentionAge = -1
	l, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(makeBatch(t, 0, 1, 100, -1)); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Hour)
	if _, err := l.Append(makeBatch(t, 1, 1, 100, -1)); err != nil {
		t.Fatal(err)
	}
	if n := len(*l.segs.Load()); n != 2 {
		t.Fatalf("%d segments after an append two hours past segment.ms=1h into a segment created then; want 2 (rolled)", n)
	}
}
