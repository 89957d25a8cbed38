package partition

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/segment"
)

// tearFirstBase simulates a torn WriteMmap append of a segment's
// first batch: Append copies the client's batch into the mapping (the
// client's own base offset with it) and then stamps the assigned base with
// a second store. A crash after the page holding the copy was written back
// but before the stamp was leaves the client's base offset at position 0.
func tearFirstBase(t *testing.T, dir string, segBase int64, client []byte) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, segment.FileName(segBase, ".log")), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(client[:8], 0); err != nil {
		t.Fatal(err)
	}
}

// checkServedFromBase reads the whole log and checks that every batch it
// serves is served at the base offset Append assigned to it (matched by
// body: the CRC covers everything after the length), and that the served
// offsets run without a gap from the log start.
func checkServedFromBase(t *testing.T, l *Log, assigned map[string]int64) {
	t.Helper()
	next := l.LogStartOffset()
	for _, b := range readAll(t, l) {
		want, ok := assigned[string(b[12:])]
		if !ok {
			t.Fatalf("served a batch at %d that was never appended", b.BaseOffset())
		}
		if b.BaseOffset() != want {
			t.Fatalf("batch appended at offset %d is served at offset %d (records %d..%d hold data of %d..%d)",
				want, b.BaseOffset(), b.BaseOffset(), b.LastOffset(), want, want+int64(b.LastOffsetDelta()))
		}
		if b.BaseOffset() != next {
			t.Fatalf("gap in the log: next offset %d, batch served at %d", next, b.BaseOffset())
		}
		next = b.NextOffset()
	}
	if next != l.LogEndOffset() {
		t.Fatalf("batches end at %d, log end %d", next, l.LogEndOffset())
	}
}

// TestRecoverFirstBatchAboveBaseSingle: the active segment's first
// batch, torn as above, carries a base offset above the segment's base.
// Recover refuses only a base below it (open.go: BaseOffset() < nextOffset
// at pos 0), so the batch is kept at the client's offset: Open serves its
// records at offsets they were never assigned and leaves a gap from the
// log start up to them.
func TestRecoverFirstBatchAboveBaseSingle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := smallSegments(1 << 20)
	opts.Segment.Mode = segment.WriteMmap
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	client := makeBatch(t, 1, 2, 50, 1)
	batch.Batch(client).SetBaseOffset(40) // what the client sent
	assigned := map[string]int64{}
	res, err := l.Append(bytes.Clone(client))
	if err != nil || res.BaseOffset != 0 {
		t.Fatalf("append: %+v %v", res, err)
	}
	assigned[string(client[12:])] = res.BaseOffset
	l.abandon()
	tearFirstBase(t, dir, 0, client)

	l2, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	checkServedFromBase(t, l2, assigned)
}

// TestRecoverFirstBatchAboveBaseRolled: the same tear in a rolled
// segment whose torn first batch's wrong base happens to make it end
// exactly at the next segment's base. Recover keeps the torn batch, cuts
// the one after it (its base no longer follows), and the continuity check
// in partition.Open (NextOffset == next base) passes, so the later segment
// is kept: the log serves batch 0's records as offsets 3..4, silently
// loses offsets 2..4 as written, and has a gap 0..2.
func TestRecoverFirstBatchAboveBaseRolled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := smallSegments(1 << 20)
	opts.Segment.Mode = segment.WriteMmap
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	assigned := map[string]int64{}
	a := makeBatch(t, 1, 2, 50, 1)
	batch.Batch(a).SetBaseOffset(3) // the client's base offset
	for i, b := range [][]byte{a, makeBatch(t, 2, 3, 50, 1)} {
		res, err := l.Append(bytes.Clone(b))
		if err != nil {
			t.Fatal(err)
		}
		assigned[string(b[12:])] = res.BaseOffset
		if i == 1 && res.LastOffset != 4 {
			t.Fatalf("append: %+v", res)
		}
	}
	l.mu.Lock()
	err = l.roll(5)
	l.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	c := makeBatch(t, 3, 1, 50, 1)
	res, err := l.Append(bytes.Clone(c))
	if err != nil || res.BaseOffset != 5 {
		t.Fatalf("append: %+v %v", res, err)
	}
	assigned[string(c[12:])] = res.BaseOffset
	l.waitIdle() // the seal of segment 0 has run: undo it below
	l.abandon()
	// The crash came before segment 0's seal and before any sync: its file
	// still runs on past its data (reserved zeros), and the recovery point
	// is 0.
	if err := os.Truncate(filepath.Join(dir, segment.FileName(0, ".log")), 4096); err != nil {
		t.Fatal(err)
	}
	if err := writeCheckpoint(filepath.Join(dir, recoveryPointFile), dir, 0); err != nil {
		t.Fatal(err)
	}
	tearFirstBase(t, dir, 0, a)

	l2, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	checkServedFromBase(t, l2, assigned)
}
