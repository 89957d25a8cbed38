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

// review16Bases lists the segment base offsets in a partition directory.
func review16Bases(t *testing.T, dir string) []int64 {
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

// TestReview16MissingIndexAfterRetentionForgetsProducer: spec §2.5
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
func TestReview16MissingIndexAfterRetentionForgetsProducer(t *testing.T) {
	dir, opts, e, p, retry := review16Setup(t, 8)
	pdir := filepath.Join(dir, "t-0")
	bases := review16Bases(t, pdir)
	first := bases[2]
	if err := p.Log().DeleteRecordsBefore(first); err != nil {
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
	t.Logf("segments %v, snapshots %v", review16Bases(t, pdir), snaps)

	// The first remaining segment's offset index goes missing.
	if err := os.Remove(filepath.Join(pdir, segment.FileName(first, ".index"))); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, opts)
	defer e.Close()
	p, _ = e.Partition("t", 0)
	leo := p.Log().LogEndOffset()
	r, err := p.Append(retry)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Duplicate || r.BaseOffset != 0 {
		t.Fatalf("retry of producer 1's batch after the reopen: written again at %d (duplicate %v, log end was %d); want a duplicate of offset 0: the producer's entry was dropped", r.BaseOffset, r.Duplicate, leo)
	}
}

// review16Setup opens an engine in a fresh dir with 1 KiB segments, writes
// producer 1's only batch at offset 0 (returned, for retries) and then
// producer 9's batches until the partition has segments segments.
func review16Setup(t *testing.T, segments int) (dir string, opts Options, e *Engine, p *Partition, retry []byte) {
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
	for seq := int32(0); len(review16Bases(t, pdir)) < segments; seq += 20 {
		if _, err := p.Append(idem(t, 9, 0, seq, 20, now)); err != nil {
			t.Fatal(err)
		}
	}
	return dir, opts, e, p, retry
}
