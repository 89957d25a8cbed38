package engine

import (
	"bytes"
	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/producer"
	"github.com/idemlog/idemlog/segment"
	"github.com/idemlog/idemlog/txnindex"
	"testing"
	"time"
)

// Kafka's ongoingTxns is ordered by first offset (TreeMap). After a clean
// restart the snapshot's open transactions come back in table order, not
// first-offset order: the LSO must still be the oldest first offset.
func TestReviewBLSOAfterCleanRestartSeveralOpenTxns(t *testing.T) {
	for _, order := range [][]int64{{1, 2}, {2, 1}, {100, 7}, {7, 100}, {5, 3, 9, 1}} {
		dir := t.TempDir()
		e := openEngine(t, dir, Options{})
		e.CreateTopic("t", 1)
		p, _ := e.Partition("t", 0)
		for _, pid := range order {
			if _, err := p.Append(txnBatch(t, pid, 0, 0, 1)); err != nil {
				t.Fatal(err)
			}
		}
		if p.LastStableOffset() != 0 {
			t.Fatalf("LSO %d before restart", p.LastStableOffset())
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		e = openEngine(t, dir, Options{})
		p, _ = e.Partition("t", 0)
		if got := p.LastStableOffset(); got != 0 {
			t.Errorf("pids opened in order %v: LSO %d after a clean restart, want 0 (oldest open txn)", order, got)
		}
		e.Close()
	}
}

// After a clean restart the open transactions come back out of first-offset
// order, so an abort's index entry gets a lastStableOffset above the oldest
// other open transaction (spec 3.9: "first offset of the oldest open
// transaction of a DIFFERENT PID"). A read_committed fetch then stops its
// txnindex scan too early (TransactionIndex.collectAbortedTxns isComplete)
// and misses a later-indexed abort: aborted records are delivered.
func TestReviewBAbortIndexLSOAfterRestartLeaksAbortedData(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Partition: partition.Options{Segment: segment.Options{MaxBytes: 2048, IndexMaxBytes: 1024}}}
	e := openEngine(t, dir, opts)
	e.CreateTopic("t", 1)
	p, _ := e.Partition("t", 0)
	must := func(_ AppendResult, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(p.Append(valueBatch(t, 2, 0, true, 'X'))) // offset 0: pid 2, will abort
	must(p.Append(valueBatch(t, 1, 0, true, 'b'))) // offset 1: pid 1, will commit
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, opts)
	defer e.Close()
	p, _ = e.Partition("t", 0)
	must(p.Append(valueBatch(t, 3, 0, true, 'Y')))      // offset 2: pid 3
	must(p.WriteMarker(producer.Marker{ProducerID: 3})) // offset 3: ABORT pid 3
	var ent []txnindex.Entry
	ent = p.Log().AbortedTxns(0, 4, ent)
	if len(ent) != 1 || ent[0].LastStableOffset != 0 {
		t.Errorf("abort index entry of pid 3: %+v, want LastStableOffset 0 (pid 2's open txn at 0)", ent)
	}
	must(p.WriteMarker(producer.Marker{ProducerID: 1, Commit: true}))
	// Roll: a large plain batch fills the first segment.
	big := batch.NewBuilder(batch.CodecNone)
	big.Append(time.Now().UnixMilli(), nil, bytes.Repeat([]byte{'p'}, 1500), nil)
	bb, _ := big.Build()
	must(p.Append(bytes.Clone(bb)))
	must(p.Append(bytes.Clone(bb)))
	r, err := p.WriteMarker(producer.Marker{ProducerID: 2}) // ABORT pid 2, in a later segment
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pid 2 abort marker at %d", r.BaseOffset)
	// read_committed, one batch at a time.
	c := e.NewConsumer("", ReadCommitted)
	if err := c.Assign(p); err != nil {
		t.Fatal(err)
	}
	var seen []byte
	for c.Position(p) < p.LastStableOffset() {
		if _, err := c.Poll(p, 1, func(r *batch.Record) error {
			if len(r.Value) == 1 {
				seen = append(seen, r.Value[0])
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if string(seen) != "b" {
		t.Fatalf("read_committed delivered %q, want %q (X and Y were aborted)", seen, "b")
	}
}
