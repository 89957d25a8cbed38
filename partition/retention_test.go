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
// (From review: it returned at once.)
func TestDeleteRecordsDurableWhenStartAhead(t *testing.T) {
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
// snapshot below the log start is left for the engine to restore. (From
// review.)
func TestNoSnapshotBelowStartAfterCrash(t *testing.T) {
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
// as a crash would; the directory may be reopened at once). (From review.)
func TestNoRetentionWriteAfterKill(t *testing.T) {
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
