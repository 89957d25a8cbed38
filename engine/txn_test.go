package engine

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/producer"
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
