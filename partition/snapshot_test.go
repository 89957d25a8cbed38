package partition

import (
	"os"
	"testing"

	"github.com/idemlog/idemlog/segment"
)

// TestRollSnapshotLostByCrashAfterDeleteRecords: docs/SEMANTICS.md §2.6 (1) and
// §4.4: on a roll the producer snapshot is written at the new base offset
// right away ("written without fsync, then fsynced by the async flush of
// the old segment"), so a process crash after the roll leaves it on disk.
// Here the roll only hands the image to the maintainer, which writes it
// after the old segment's seal (an fsync of up to a whole segment under
// SyncNever). DeleteRecordsBefore (or retention) in that window
// checkpoints the new log start and retires every older segment with its
// snapshot; a crash then leaves no snapshot at or above the first segment,
// and the engine (loadProducers) restarts with every producer whose last
// batch was below it forgotten (§2.5: retention must not remove producer
// entries), so their retries are written twice.
func TestRollSnapshotLostByCrashAfterDeleteRecords(t *testing.T) {
	t.Parallel()
	opts := smallSegments(1024)
	opts.Snapshot = func(off int64) []byte { return []byte{1} }
	dir := t.TempDir()
	l := openWith30(t, dir, opts, 1) // several rolls, their seals done below
	l.waitIdle()
	l.maint.drop.Store(true) // the process dies before the next seal completes
	before := len(*l.segs.Load())
	for i := 30; len(*l.segs.Load()) == before; i++ { // one more roll
		if _, err := l.Append(makeBatch(t, i, 1, 200, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	segs := *l.segs.Load()
	newBase := segs[len(segs)-1].Base()
	if err := l.DeleteRecordsBefore(newBase); err != nil {
		t.Fatal(err)
	}
	l.Kill()

	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	first := (*l.segs.Load())[0].Base()
	leo := l.LogEndOffset()
	var snaps []int64
	es, _ := os.ReadDir(dir)
	found := false
	for _, e := range es {
		if off, ok := segment.ParseName(e.Name(), ".snapshot"); ok {
			snaps = append(snaps, off)
			if off >= first && off <= leo {
				found = true
			}
		}
	}
	if !found {
		t.Fatalf("after the crash: first segment %d, log end %d, snapshots %v: none in [%d, %d], so the producer state of everything below %d is lost; the roll's snapshot at %d was never written", first, leo, snaps, first, leo, first, newBase)
	}
}

// snapshotFiles lists the snapshot offsets in dir.
func snapshotFiles(t *testing.T, dir string) []int64 {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var snaps []int64
	for _, e := range es {
		if off, ok := segment.ParseName(e.Name(), ".snapshot"); ok {
			snaps = append(snaps, off)
		}
	}
	return snaps
}

// TestRollSnapshotLostToCrashNeverRewritten: docs/SEMANTICS.md §2.6 (a
// snapshot at every segment base, the one at a segment going only with
// it), §2.7 ("Finish with mapEndOffset = X and a snapshot at X") and §2.5
// (retention does not remove producer entries). A crash between a roll
// and its seal loses the roll's queued snapshot (rollSnaps lives in
// memory). The next session recovers (the owner replays from an older
// snapshot) but writes no snapshot: the segment stays without one for
// good. When a DeleteRecordsBefore then makes it the first segment, the
// older segments go with every snapshot at or below it, and a crash
// leaves none in [first segment, log end]: the engine starts empty there
// and forgets every producer seen only below.
func TestRollSnapshotLostToCrashNeverRewritten(t *testing.T) {
	t.Parallel()
	opts := smallSegments(1024)
	opts.Snapshot = func(off int64) []byte { return []byte{1} }
	dir := t.TempDir()
	l := openWith30(t, dir, opts, 1) // several rolls, their seals and snapshots done
	l.waitIdle()
	l.maint.drop.Store(true) // the process dies before the next seal runs
	before := len(*l.segs.Load())
	for i := 30; len(*l.segs.Load()) == before; i++ {
		if _, err := l.Append(makeBatch(t, i, 1, 200, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	segs := *l.segs.Load()
	newBase := segs[len(segs)-1].Base()
	l.Kill()

	// Open 2: recovered as the engine does (Open, FinishRecovery), then
	// DeleteRecords up to the segment whose snapshot was lost, then a crash.
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.FinishRecovery(); err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteRecordsBefore(newBase); err != nil {
		t.Fatal(err)
	}
	l.waitIdle()
	l.Kill()

	l, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	first := (*l.segs.Load())[0].Base()
	leo := l.LogEndOffset()
	snaps := snapshotFiles(t, dir)
	for _, s := range snaps {
		if s >= first && s <= leo {
			return
		}
	}
	t.Fatalf("first segment %d, log end %d, snapshots %v: none in [%d, %d]; the roll snapshot at %d lost to the first crash was never written again, and the producer state below %d is gone", first, leo, snaps, first, leo, newBase, first)
}

// TestRollAfterDeleteAllThenCrash: docs/SEMANTICS.md §2.5, §2.6 and §4.7.
// DeleteRecordsBefore(log end) leaves the active segment wholly below the
// log start but in place (no later segment yet). The next roll queues its
// snapshot (rollSnaps, in memory) for the seal; a crash before the seal
// leaves it unwritten, and Open deletes the old segment as wholly below
// the log start, its snapshot with it: no snapshot is left in [first
// segment, log end], so the engine starts empty at the new first segment
// and forgets every producer (the missing-index rule only covers a log-start
// move after the roll, not one before it).
func TestRollAfterDeleteAllThenCrash(t *testing.T) {
	t.Parallel()
	opts := smallSegments(1024)
	opts.Snapshot = func(off int64) []byte { return []byte{1} }
	dir := t.TempDir()
	l := openWith30(t, dir, opts, 1)
	l.waitIdle()
	end := l.LogEndOffset()
	if err := l.DeleteRecordsBefore(end); err != nil { // a purge of the partition
		t.Fatal(err)
	}
	l.waitIdle()
	if snaps := snapshotFiles(t, dir); len(snaps) == 0 {
		t.Fatalf("setup: no snapshot after the purge")
	}
	l.maint.drop.Store(true) // the process dies before the next seal runs
	before := len(*l.segs.Load())
	for i := 30; len(*l.segs.Load()) == before; i++ { // appends until a roll
		if _, err := l.Append(makeBatch(t, i, 1, 200, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	l.Kill()

	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	first := (*l.segs.Load())[0].Base()
	leo := l.LogEndOffset()
	snaps := snapshotFiles(t, dir)
	for _, s := range snaps {
		if s >= first && s <= leo {
			return
		}
	}
	t.Fatalf("after DeleteRecordsBefore(%d), a roll and a crash: first segment %d, log end %d, snapshots %v: none in [%d, %d]; producer state below %d is lost", end, first, leo, snaps, first, leo, first)
}
