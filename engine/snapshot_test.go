package engine

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/producer"
	"github.com/idemlog/idemlog/segment"
)

// snapshotBases lists the segment base offsets in a partition directory.
func snapshotBases(t *testing.T, dir string) []int64 {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var bases []int64
	for _, e := range es {
		if b, ok := segment.ParseName(e.Name(), ".log"); ok {
			bases = append(bases, b)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases
}

// TestMissingIndexAfterRetentionForgetsProducer: docs/SEMANTICS.md §2.5
// ("deleting segments by retention or DeleteRecords does NOT remove producer
// entries"), §2.6 (load takes the newest snapshot) and §4.5 (a missing
// .index only triggers recovery of that segment). A producer whose only
// batch lies in a segment DeleteRecords removed is still known after a
// clean restart (its entry is in the clean-shutdown snapshot), so a retry of
// that batch is a duplicate. When the first remaining segment's .index is
// missing at the next open, the engine must still load that snapshot; it
// instead looks for a snapshot at or below the recovered segment, finds
// none (writeSnapshot keeps only the newest three), starts empty and
// writes the retry a second time.
func TestMissingIndexAfterRetentionForgetsProducer(t *testing.T) {
	t.Parallel()
	dir, opts, e, p, retry := snapshotRetentionSetup(t, 8)
	pdir := filepath.Join(dir, "t-0")
	bases := snapshotBases(t, pdir)
	first := bases[2]
	if err := p.log.DeleteRecordsBefore(first); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	// Control: a clean reopen knows producer 1.
	e = openEngine(t, dir, opts)
	p, _ = e.Partition("t", 0)
	if r, err := p.Append(retry); err != nil || !r.Duplicate || r.BaseOffset != 0 {
		t.Fatalf("setup: retry after a clean restart: %+v %v, want a duplicate at 0", r, err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	snaps, _ := producer.ListSnapshots(pdir)
	t.Logf("segments %v, snapshots %v", snapshotBases(t, pdir), snaps)

	// The first remaining segment's offset index goes missing.
	if err := os.Remove(filepath.Join(pdir, segment.FileName(first, ".index"))); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, opts)
	defer e.Close()
	p, _ = e.Partition("t", 0)
	leo := p.log.LogEndOffset()
	r, err := p.Append(retry)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Duplicate || r.BaseOffset != 0 {
		t.Fatalf("retry of producer 1's batch after the reopen: written again at %d (duplicate %v, log end was %d); want a duplicate of offset 0: the producer's entry was dropped", r.BaseOffset, r.Duplicate, leo)
	}
}

// snapshotRetentionSetup opens an engine in a fresh dir with 1 KiB segments, writes
// producer 1's only batch at offset 0 (returned, for retries) and then
// producer 9's batches until the partition has segments segments.
func snapshotRetentionSetup(t *testing.T, segments int) (dir string, opts Options, e *Engine, p *Partition, retry []byte) {
	t.Helper()
	dir = t.TempDir()
	opts = Options{Partition: partition.Options{Segment: segment.Options{MaxBytes: 1024, IndexMaxBytes: 1024}}}
	e = openEngine(t, dir, opts)
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ = e.Partition("t", 0)
	now := time.Now().UnixMilli()
	retry = idem(t, 1, 0, 0, 1, now)
	if r, err := p.Append(retry); err != nil || r.BaseOffset != 0 {
		t.Fatal(r, err)
	}
	pdir := filepath.Join(dir, "t-0")
	for seq := int32(0); len(snapshotBases(t, pdir)) < segments; seq += 20 {
		if _, err := p.Append(idem(t, 9, 0, seq, 20, now)); err != nil {
			t.Fatal(err)
		}
	}
	return dir, opts, e, p, retry
}

// TestProducerLostAfterRollSnapshotCrashAndDeleteRecords: spec
// §2.5 (retention and DeleteRecords do not remove producer entries), §2.6
// (a snapshot at every segment base) and §2.7 (a rebuild finishes with a
// snapshot at its end offset). A crash between a roll's seal (its fsync)
// and the roll's snapshot write (rollSnaps is in memory) leaves the new
// segment without a snapshot; here the files are put in exactly that
// state: Kill, then the new base's snapshot and the recovery-point
// checkpoint the seal would have moved are taken away. The next open
// rebuilds producer state from offset 0 but writes no snapshot, so the
// segment stays without one. DeleteRecords up to it retires segment 0 and
// every snapshot below; after a second crash the engine finds no snapshot
// at or above the first segment, starts empty there, and producer 1's
// retry of its only batch is written a second time.
func TestProducerLostAfterRollSnapshotCrashAndDeleteRecords(t *testing.T) {
	t.Parallel()
	dir, opts, e, _, retry := snapshotRetentionSetup(t, 2) // one roll
	pdir := filepath.Join(dir, "t-0")
	second := snapshotBases(t, pdir)[1]
	e.kill()
	// The crash came after the seal's fsync, before the roll's snapshot
	// and the recovery point's checkpoint were written.
	for _, name := range []string{segment.FileName(second, ".snapshot"), "recovery-point-offset-checkpoint"} {
		if err := os.Remove(filepath.Join(pdir, name)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}

	e = openEngine(t, dir, opts)
	p, _ := e.Partition("t", 0)
	if r, err := p.Append(retry); err != nil || !r.Duplicate || r.BaseOffset != 0 {
		t.Fatalf("setup: retry after the first crash: %+v %v, want a duplicate at 0", r, err)
	}
	if err := p.log.DeleteRecordsBefore(second); err != nil {
		t.Fatal(err)
	}
	snaps, _ := producer.ListSnapshots(pdir)
	t.Logf("after DeleteRecordsBefore(%d): segments %v, snapshots %v", second, snapshotBases(t, pdir), snaps)
	e.kill()

	e = openEngine(t, dir, opts)
	defer e.Close()
	p, _ = e.Partition("t", 0)
	leo := p.log.LogEndOffset()
	r, err := p.Append(retry)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Duplicate || r.BaseOffset != 0 {
		t.Fatalf("retry of producer 1's batch after the second crash: written again at %d (duplicate %v, log end was %d); want a duplicate of offset 0: no snapshot at or above the first segment %d survived", r.BaseOffset, r.Duplicate, leo, second)
	}
}

// TestProducerLostAfterPurgeRollCrash: docs/SEMANTICS.md §2.5 (DeleteRecords
// does not remove producer entries), §2.6, §4.4. DeleteRecords up to the
// log end (a purge) leaves the one segment wholly below the log start; the
// next append rolls it by age (segment.ms), and the roll's snapshot waits
// in memory for the seal. A crash before the seal wrote it (here: Kill,
// then the checkpoints put back and the snapshot taken away as they were
// before the seal) leaves the old segment below the log start; Open
// deletes it with its snapshot, the engine finds none at or above the
// first segment, starts empty, and producer 1's retry is written again.
func TestProducerLostAfterPurgeRollCrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{Partition: partition.Options{RollAge: time.Hour}}
	e := openEngine(t, dir, opts)
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 0)
	now := time.Now().UnixMilli()
	retry := idem(t, 1, 0, 0, 1, now)
	if r, err := p.Append(retry); err != nil || r.BaseOffset != 0 {
		t.Fatal(r, err)
	}
	if err := p.log.DeleteRecordsBefore(1); err != nil { // purge
		t.Fatal(err)
	}
	pdir := filepath.Join(dir, "t-0")
	saved := map[string][]byte{}
	for _, name := range []string{"recovery-point-offset-checkpoint", "log-start-offset-checkpoint"} {
		b, err := os.ReadFile(filepath.Join(pdir, name))
		if err != nil {
			t.Fatal(err)
		}
		saved[name] = b
	}
	// Another producer's batch, past segment.ms: a roll at 1.
	if r, err := p.Append(idem(t, 9, 0, 0, 1, now+2*time.Hour.Milliseconds())); err != nil || r.BaseOffset != 1 {
		t.Fatal(r, err)
	}
	if bases := snapshotBases(t, pdir); len(bases) != 2 || bases[1] != 1 {
		t.Fatalf("setup: segments %v, want a roll at 1", bases)
	}
	// The roll wrote its snapshot itself, synced (a roll at the log
	// start): a crash before the seal cannot lose it. (Before the fix it
	// waited in memory for the seal.)
	if _, err := os.Stat(filepath.Join(pdir, segment.FileName(1, ".snapshot"))); err != nil {
		t.Fatalf("no snapshot at the roll's base 1 when the roll returned: %v", err)
	}
	e.kill()
	// As the files were before the roll's seal ran.
	for name, b := range saved {
		if err := os.WriteFile(filepath.Join(pdir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	e = openEngine(t, dir, opts)
	defer e.Close()
	p, _ = e.Partition("t", 0)
	snaps, _ := producer.ListSnapshots(pdir)
	r, err := p.Append(retry)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Duplicate || r.BaseOffset != 0 {
		t.Fatalf("retry of producer 1's batch after the crash: written again at %d (duplicate %v; segments %v, snapshots %v); want a duplicate of offset 0", r.BaseOffset, r.Duplicate, snapshotBases(t, pdir), snaps)
	}
}
