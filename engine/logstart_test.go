package engine

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/segment"
)

// TestLateReleaseAfterDeleteTopic: a reader still holding a chunk of a
// retired segment when its topic is deleted and created again lets go
// afterwards: the release must not delete the new topic's files, which sit
// at the old path. (From review.)
func TestLateReleaseAfterDeleteTopic(t *testing.T) {
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
	c, err := p.Log().Read(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Log().DeleteRecordsBefore(p.Log().HighWatermark()); err != nil {
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
// that seeks to the LSO must find an offset it can fetch. (From review.)
func TestLSONotBelowLogStart(t *testing.T) {
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
	if err := p.Log().DeleteRecordsBefore(4); err != nil {
		t.Fatal(err)
	}
	e.Kill()
	e = openEngine(t, dir, Options{})
	defer e.Close()
	p, _ = e.Partition("t", 0)
	if lso, start := p.LastStableOffset(), p.Log().LogStartOffset(); lso != start {
		t.Errorf("LSO %d after the crash, want the log start %d (the open transaction began below it)", lso, start)
	}
}
