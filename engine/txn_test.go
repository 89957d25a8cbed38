package engine

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/producer"
	"github.com/idemlog/idemlog/segment"
	"github.com/idemlog/idemlog/txnindex"
)

func txnBatch(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	b := batch.NewBuilder(batch.CodecNone)
	b.SetProducer(pid, epoch, seq)
	b.SetTransactional(true)
	for i := range n {
		b.Append(time.Now().UnixMilli(), nil, []byte{byte(i)}, nil)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(out)
}

func TestLastStableOffsetAndMarkers(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	e.CreateTopic("t", 1)
	p, _ := e.Partition("t", 0)
	// Non-transactional data: LSO follows the high watermark.
	if _, err := p.Append(idem(t, 9, 0, 0, 2, time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	if p.LastStableOffset() != 2 {
		t.Fatalf("LSO %d, want 2", p.LastStableOffset())
	}
	// Producer 1 opens a transaction at 2; producer 2 at 4.
	if _, err := p.Append(txnBatch(t, 1, 0, 0, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(txnBatch(t, 2, 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if p.LastStableOffset() != 2 || p.Log().HighWatermark() != 5 {
		t.Fatalf("LSO %d hw %d, want 2 and 5", p.LastStableOffset(), p.Log().HighWatermark())
	}
	// A non-transactional batch from a producer inside a transaction: 48.
	if _, err := p.Append(idem(t, 1, 0, 2, 1, time.Now().UnixMilli())); !errors.Is(err, producer.ErrInvalidTxnState) {
		t.Fatalf("non-transactional write in a transaction: %v", err)
	}
	// Commit producer 1: the LSO moves to producer 2's transaction.
	r, err := p.WriteMarker(producer.Marker{ProducerID: 1, Epoch: 0, CoordinatorEpoch: 0, Commit: true})
	if err != nil || r.BaseOffset != 5 {
		t.Fatalf("marker: %+v %v", r, err)
	}
	if p.LastStableOffset() != 4 {
		t.Fatalf("LSO %d after the first commit, want 4", p.LastStableOffset())
	}
	// Restart without closing: open transactions come back from the log.
	e.Kill()
	e = openEngine(t, dir, Options{})
	p, _ = e.Partition("t", 0)
	if p.LastStableOffset() != 4 {
		t.Fatalf("LSO %d after a crash, want 4", p.LastStableOffset())
	}
	// An abort with a bumped epoch fences producer 2's old instance.
	if _, err := p.WriteMarker(producer.Marker{ProducerID: 2, Epoch: 1, CoordinatorEpoch: 0}); err != nil {
		t.Fatal(err)
	}
	if p.LastStableOffset() != p.Log().HighWatermark() {
		t.Fatalf("LSO %d with nothing open, hw %d", p.LastStableOffset(), p.Log().HighWatermark())
	}
	if _, err := p.Append(txnBatch(t, 2, 0, 1, 1)); !errors.Is(err, producer.ErrInvalidProducerEpoch) {
		t.Fatalf("zombie after a fencing abort: %v", err)
	}
	// The marker is in the log as a control batch.
	c, err := p.Log().Read(5, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	mb := batch.Batch(c.Data[:78])
	ctl, err := mb.Control()
	if err != nil || !mb.IsControl() || ctl.Type != batch.ControlCommit || mb.ProducerID() != 1 {
		t.Fatalf("marker batch: %v %+v", err, ctl)
	}
	c.Release()
	// Clean restart with a transaction open: the snapshot carries it, and
	// the LSO stays pinned at its first offset.
	r3, err := p.Append(txnBatch(t, 3, 0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, Options{})
	defer e.Close()
	p, _ = e.Partition("t", 0)
	if p.LastStableOffset() != r3.BaseOffset {
		t.Fatalf("LSO %d after a clean restart, want %d (open transaction)", p.LastStableOffset(), r3.BaseOffset)
	}
	if _, err := p.Append(txnBatch(t, 2, 0, 1, 1)); !errors.Is(err, producer.ErrInvalidProducerEpoch) {
		t.Fatalf("zombie after a clean restart: %v", err)
	}
}

// readCommittedValues reads a partition as a read_committed consumer and
// returns the first byte of every visible record's value.
func readCommittedValues(t *testing.T, p *Partition) []byte {
	t.Helper()
	var out []byte
	var aborted []txnindex.Entry
	var d batch.Decoder
	for off := p.Log().LogStartOffset(); off < p.LastStableOffset(); {
		c, ab, err := p.ReadCommitted(off, 300, aborted[:0])
		if err != nil {
			t.Fatal(err)
		}
		aborted = ab
		f := txnindex.NewFilter(aborted)
		for data := c.Data; len(data) > 0; {
			n, _ := batch.Size(data)
			b := batch.Batch(data[:n])
			data = data[n:]
			isAbort := false
			if b.IsControl() {
				ctl, _ := b.Control()
				isAbort = ctl.Type == batch.ControlAbort
			}
			if f.Skip(txnindex.Batch{ProducerID: b.ProducerID(), LastOffset: b.LastOffset(), Transactional: b.IsTransactional(), Control: b.IsControl(), AbortMarker: isAbort}) {
				continue
			}
			it, err := d.Records(b)
			if err != nil {
				t.Fatal(err)
			}
			var r batch.Record
			for it.Next(&r) {
				out = append(out, r.Value[0])
			}
		}
		off = c.NextOffset
		c.Release()
	}
	return out
}

func valueBatch(t *testing.T, pid int64, seq int32, txn bool, values ...byte) []byte {
	t.Helper()
	b := batch.NewBuilder(batch.CodecNone)
	if pid >= 0 {
		b.SetProducer(pid, 0, seq)
	}
	b.SetTransactional(txn)
	for _, v := range values {
		b.Append(time.Now().UnixMilli(), nil, []byte{v}, nil)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(out)
}

func TestReadCommittedHidesAborted(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Partition: partition.Options{Segment: segment.Options{MaxBytes: 600, IndexMaxBytes: 1024}}}
	e := openEngine(t, dir, opts)
	e.CreateTopic("t", 1)
	p, _ := e.Partition("t", 0)
	must := func(_ AppendResult, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(p.Append(valueBatch(t, -1, 0, false, 'a')))    // plain
	must(p.Append(valueBatch(t, 1, 0, true, 'x', 'x'))) // p1: will abort
	must(p.Append(valueBatch(t, 2, 0, true, 'b')))      // p2: will commit
	must(p.Append(valueBatch(t, 1, 2, true, 'x')))      // p1 again
	must(p.Append(valueBatch(t, -1, 0, false, 'c')))    // plain
	must(p.WriteMarker(producer.Marker{ProducerID: 1})) // ABORT p1
	must(p.Append(valueBatch(t, 2, 1, true, 'd')))      // p2
	must(p.WriteMarker(producer.Marker{ProducerID: 2, Commit: true}))
	must(p.Append(valueBatch(t, 3, 0, true, 'y')))      // p3: will abort
	must(p.WriteMarker(producer.Marker{ProducerID: 3})) // ABORT p3
	must(p.Append(valueBatch(t, 4, 0, true, 'z')))      // p4: still open
	must(p.Append(valueBatch(t, -1, 0, false, 'e')))    // after the LSO
	want := "abcd"
	if got := string(readCommittedValues(t, p)); got != want {
		t.Fatalf("read_committed saw %q, want %q", got, want)
	}
	// The aborted transactions are in Kafka's .txnindex files.
	idx, _ := filepath.Glob(filepath.Join(dir, "t-0", "*.txnindex"))
	var entries []txnindex.Entry
	for _, path := range idx {
		x, err := txnindex.Open(path, mustBase(t, path))
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, x.Entries()...)
		x.Close()
	}
	if len(entries) != 2 || entries[0].ProducerID != 1 || entries[0].FirstOffset != 1 || entries[1].ProducerID != 3 {
		t.Fatalf("aborted index entries %+v", entries)
	}
	// p1 aborted while p2's transaction (first offset 3) was open.
	if entries[0].LastStableOffset != 3 {
		t.Fatalf("last stable offset of p1's abort %d, want 3", entries[0].LastStableOffset)
	}
	// The same view after a crash (recovery rebuilds what it scans) and
	// after a clean restart; committing p4 then shows its record and 'e'.
	e.Kill()
	e = openEngine(t, dir, opts)
	p, _ = e.Partition("t", 0)
	if got := string(readCommittedValues(t, p)); got != want {
		t.Fatalf("after a crash, read_committed saw %q, want %q", got, want)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, opts)
	defer e.Close()
	p, _ = e.Partition("t", 0)
	must(p.WriteMarker(producer.Marker{ProducerID: 4, Commit: true}))
	if got := string(readCommittedValues(t, p)); got != "abcdze" {
		t.Fatalf("after committing p4, read_committed saw %q, want %q", got, "abcdze")
	}
}

func mustBase(t *testing.T, path string) int64 {
	base, ok := segment.ParseName(filepath.Base(path), ".txnindex")
	if !ok {
		t.Fatalf("bad txnindex name %s", path)
	}
	return base
}

func TestVerifyChecksTxnIndex(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	e.CreateTopic("t", 1)
	p, _ := e.Partition("t", 0)
	if _, err := p.Append(valueBatch(t, 1, 0, true, 'x')); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WriteMarker(producer.Marker{ProducerID: 1}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "t-0", segment.FileName(0, ".log"))
	r, err := segment.VerifyFile(logPath, 0)
	if err != nil || r.AbortedTxns != 1 {
		t.Fatalf("verify: %+v %v", r, err)
	}
	// An entry pointing at a data batch instead of a marker is caught.
	ix, err := txnindex.Open(filepath.Join(dir, "t-0", segment.FileName(0, ".txnindex")), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Append(txnindex.Entry{ProducerID: 1, FirstOffset: 0, LastOffset: 5, LastStableOffset: 6}); err != nil {
		t.Fatal(err)
	}
	ix.Close()
	if _, err := segment.VerifyFile(logPath, 0); !errors.Is(err, segment.ErrVerify) {
		t.Fatalf("verify of a bad txnindex entry: %v", err)
	}
}
