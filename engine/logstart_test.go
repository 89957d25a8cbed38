package engine

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/producer"
	"github.com/idemlog/idemlog/segment"
)

// Producer state, reads and files around a log start that moved (retention,
// DeleteRecordsBefore), across crashes and topic re-creation.

// TestLateReleaseAfterDeleteTopic: a reader still holding a chunk of a
// retired segment when its topic is deleted and created again lets go
// afterwards: the release must not delete the new topic's files, which sit
// at the old path.
func TestLateReleaseAfterDeleteTopic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{Partition: partition.Options{Segment: segment.Options{MaxBytes: 1024, IndexMaxBytes: 1024}}}
	e := openEngine(t, dir, opts)
	defer e.Close()
	e.CreateTopic("t", 1)
	p, _ := e.Partition("t", 0)
	seq := int32(0)
	for i := 0; i < 40; i++ {
		if _, err := p.Append(idem(t, 9, 0, seq, 20, time.Now().UnixMilli())); err != nil {
			t.Fatal(err)
		}
		seq += 20
	}
	c, err := p.log.Read(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.log.DeleteRecordsBefore(p.log.HighWatermark()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the maintainer drops the list's reference
	if err := e.DeleteTopic("t"); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p2, _ := e.Partition("t", 0)
	if _, err := p2.Append(idem(t, 10, 0, 0, 1, time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "t-0", segment.FileName(0, ".log"))
	if _, err := os.Stat(f); err != nil {
		t.Fatalf("setup: %v", err)
	}
	c.Release() // the old topic's reader lets go of its retired segment 0
	if _, err := os.Stat(f); err != nil {
		t.Fatalf("new topic's segment file removed by the old topic's late release: %v", err)
	}
}

// TestLSONotBelowLogStart: a transaction that began below the log start
// (DeleteRecordsBefore cut into it) and survives a crash's replay does not
// pull the last stable offset below the log start, as in Kafka: a consumer
// that seeks to the LSO must find an offset it can fetch.
func TestLSONotBelowLogStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	e.CreateTopic("t", 1)
	p, _ := e.Partition("t", 0)
	if _, err := p.Append(txnBatch(t, 1, 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	for i := int32(0); i < 5; i++ {
		if _, err := p.Append(idem(t, 9, 0, i, 1, time.Now().UnixMilli())); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.log.DeleteRecordsBefore(4); err != nil {
		t.Fatal(err)
	}
	e.kill()
	e = openEngine(t, dir, Options{})
	defer e.Close()
	p, _ = e.Partition("t", 0)
	if lso, start := p.LastStableOffset(), p.log.LogStartOffset(); lso != start {
		t.Errorf("LSO %d after the crash, want the log start %d (the open transaction began below it)", lso, start)
	}
}

// TestReplayFromSnapshotBelowLogStart: a transaction open at a roll
// snapshot B commits at m (B < m) in the active segment, then
// DeleteRecordsBefore(X > m) in the same segment, then a crash. Reopening
// must replay from B, below the log start (ReadRetained). (Without this: it
// replayed from max(B, X), skipped the commit marker and left the
// transaction open, pinning the LSO below the log start for ever.)
func TestReplayFromSnapshotBelowLogStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{Partition: partition.Options{Segment: segment.Options{MaxBytes: 1024, IndexMaxBytes: 1024}}}
	e := openEngine(t, dir, opts)
	e.CreateTopic("t", 1)
	p, _ := e.Partition("t", 0)
	if _, err := p.Append(txnBatch(t, 1, 0, 0, 1)); err != nil { // txn of pid 1 opens at 0
		t.Fatal(err)
	}
	seq := int32(0)
	pdir := filepath.Join(dir, "t-0")
	var snaps []int64
	for i := 0; i < 100; i++ {
		if _, err := p.Append(idem(t, 9, 0, seq, 20, time.Now().UnixMilli())); err != nil {
			t.Fatal(err)
		}
		seq += 20
		if snaps, _ = producer.ListSnapshots(pdir); len(snaps) > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if len(snaps) == 0 {
		t.Fatal("no roll snapshot")
	}
	B := snaps[len(snaps)-1]
	r, err := p.writeMarkerDurable(producer.Marker{ProducerID: 1, Epoch: 0, Commit: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(idem(t, 9, 0, seq, 1, time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	leo := p.log.LogEndOffset()
	if s, _ := producer.ListSnapshots(pdir); s[len(s)-1] != B || r.BaseOffset < B {
		t.Fatalf("setup: snaps %v, marker at %d", s, r.BaseOffset)
	}
	if lso := p.LastStableOffset(); lso != leo {
		t.Fatalf("LSO %d before crash, want %d", lso, leo)
	}
	X := r.BaseOffset + 1
	if err := p.log.DeleteRecordsBefore(X); err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot at %d, marker at %d, log start %d, end %d", B, r.BaseOffset, X, leo)
	e.kill()
	e = openEngine(t, dir, opts)
	defer e.Close()
	p, _ = e.Partition("t", 0)
	if lso, hw := p.LastStableOffset(), p.log.HighWatermark(); lso != hw {
		t.Fatalf("after crash: LSO %d, hw %d, log start %d: committed txn reopened by replay skipping [%d,%d)", lso, hw, p.log.LogStartOffset(), B, X)
	}
}
