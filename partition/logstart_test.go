package partition

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/idemlog/idemlog/segment"
)

// TestLogStartCheckpointedBeforeFirstSnapshotSync: retireStart
// syncs the new first segment's snapshot "first: once the checkpoint
// moves the start past the older segments, their snapshots go with them"
// (retention.go). But the log start moves in memory under mu before that
// sync, and every other checkpoint writer (a Flush, the interval flusher,
// a seal's writeCheckpoints) persists l.logStart as it finds it. Here a
// Flush runs while DeleteRecordsBefore is still in syncFirstSnapshot (held
// there: the snapshot's path is a FIFO, whose open blocks): the log-start
// checkpoint on disk already says B. A power loss at that point leaves a
// log start that makes Open delete segment A with its snapshot while the
// snapshot at B, the only record of producers seen below it, was never
// synced.
func TestLogStartCheckpointedBeforeFirstSnapshotSync(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := smallSegments(4096)
	opts.Snapshot = func(off int64) []byte { return []byte{1} }
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	// Open 1: a roll, then a crash before its seal: the roll's
	// snapshot was written unsynced and nothing syncs it afterwards.
	l.maint.drop.Store(true)
	for i := 0; len(*l.segs.Load()) < 2; i++ {
		if _, err := l.Append(makeBatch(t, i, 1, 300, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	l.Kill()
	// Open 2, recovered as the engine does.
	if l, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	defer l.Kill()
	if err := l.FinishRecovery(); err != nil {
		t.Fatal(err)
	}
	l.waitIdle()
	b := (*l.segs.Load())[1].Base()
	snap := filepath.Join(dir, segment.FileName(b, ".snapshot"))
	if f, err := os.Open(snap); err == nil {
		var cs unix.Cachestat_t
		if unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{Off: 0, Len: 0}, &cs, 0) == nil {
			t.Logf("snapshot at %d before DeleteRecordsBefore: %d dirty pages (unsynced)", b, cs.Dirty)
		}
		f.Close()
	}
	if err := os.Remove(snap); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(snap, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.DeleteRecordsBefore(b) }()
	for l.LogStartOffset() != b {
		time.Sleep(time.Millisecond)
	}
	// DeleteRecordsBefore is between its in-memory move and the end of
	// syncFirstSnapshot: it cannot return until a writer opens the FIFO.
	// A Flush meanwhile (the interval flusher's, a seal's checkpoint):
	flushed := make(chan error, 1)
	go func() { flushed <- l.Flush() }()
	onDisk, ckErr := int64(-1), error(nil)
	select {
	case err := <-flushed:
		onDisk, ckErr = readCheckpoint(filepath.Join(dir, logStartFile))
		if err != nil || ckErr != nil {
			t.Errorf("setup: flush %v, checkpoint %v", err, ckErr)
		}
		flushed <- nil
	case <-time.After(2 * time.Second):
		// The Flush waits for the snapshot sync too: what a fix may do.
	}
	select {
	case err := <-done:
		t.Fatalf("setup: DeleteRecordsBefore returned (%v) before its snapshot sync", err)
	default:
	}
	// Let every open of the FIFO through until both calls are done.
	for drb, fl := false, false; !drb || !fl; {
		if f, err := os.OpenFile(snap, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		select {
		case <-done:
			drb = true
		case <-flushed:
			fl = true
		case <-time.After(time.Millisecond):
		}
	}
	if onDisk >= b {
		t.Fatalf("log-start checkpoint on disk is %d while DeleteRecordsBefore(%d) has not yet synced the first segment's snapshot (the Flush wrote the in-memory log start): a power loss now lets Open delete segment 0 and its snapshot before the snapshot at %d is durable", onDisk, b, b)
	}
}
