package partition

import (
	"os"
	"testing"

	"github.com/idemlog/idemlog/segment"
)

// TestReview16RollSnapshotLostByCrashAfterDeleteRecords: spec §2.6 (1) and
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
func TestReview16RollSnapshotLostByCrashAfterDeleteRecords(t *testing.T) {
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
