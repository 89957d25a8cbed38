package engine

import (
	"bytes"
	"github.com/idemlog/idemlog/batch"
	"sync/atomic"
	"testing"
	"time"
)

// A decided (PrepareCommit) transaction whose completion fails at open
// (a marker refused at its first partition) is left decided by
// openCoordinator, which then runs sweepOrphans. The sweep finds the
// transaction still open in the later partitions, sees the id's state is
// not Ongoing, and writes ABORT markers there. Once the cause goes away the
// coordinator completes the COMMIT: the client is told committed, but the
// data of the second partition was aborted. Atomicity is broken.
func TestOpenSweepAbortsDecidedCommit(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	dir := t.TempDir()
	opts := Options{MaxProducersPerPartition: 1, ProducerIDExpiration: time.Hour, Now: clock}
	e := openEngine(t, dir, opts)
	e.CreateTopic("out", 2)
	p0, _ := e.Partition("out", 0)
	p1, _ := e.Partition("out", 1)
	// Another producer fills out-1's producer table.
	if _, err := p1.Append(idem(t, 99, 0, 0, 1, now.Load())); err != nil {
		t.Fatal(err)
	}
	c, err := e.coordinator()
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := c.InitProducerID("tx", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// out-1 first: its marker fails before out-0 gets one.
	if err := c.AddPartitions("tx", pid, epoch, []TopicPartition{{"out", 1}, {"out", 0}}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := p0.Append(txnBatch(t, pid, epoch, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.EndTxn("tx", pid, epoch, true); err == nil {
		t.Fatal("expected the out-1 marker to fail (producer table full)")
	}
	if _, _, st, _ := c.State("tx"); st != TxnPrepareCommit {
		t.Fatalf("state %v, want PrepareCommit", st)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// Restart: the decision cannot be completed yet (out-1 still full).
	e = openEngine(t, dir, opts)
	defer e.Close()
	p0, _ = e.Partition("out", 0)
	p1, _ = e.Partition("out", 1)
	c, _ = e.coordinator()
	// The cause goes away; the periodic sweep completes the decision.
	now.Add((2 * time.Hour).Milliseconds())
	p1.expireProducers()
	if _, err := c.AbortTimedOut(); err != nil {
		t.Fatal(err)
	}
	if _, _, st, _ := c.State("tx"); st != TxnCompleteCommit {
		t.Fatalf("state %v, want CompleteCommit", st)
	}
	// The client's EndTxn retry is told: committed.
	if _, _, err := c.EndTxn("tx", pid, epoch, true); err != nil {
		t.Fatalf("EndTxn retry: %v", err)
	}
	if got := readCommittedValues(t, p0); len(got) != 1 {
		t.Errorf("read_committed out-0 after a committed transaction: %d records, want 1 (the restart's orphan sweep wrote ABORT over a PrepareCommit transaction)", len(got))
	}
}

// Eager coordinator recovery at Engine.Open (a910e2f): a recovery that
// cannot finish (here, an orphan transaction's ABORT marker, 78 bytes, is
// refused by a partition whose segment.bytes is 70, while its data batch
// fitted) makes the whole engine unopenable, every other topic included.
// Before, only the coordinator's first use failed (Kafka's broker keeps
// serving and keeps retrying the marker).
func TestEngineUnopenableWhenSweepFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	if _, err := e.coordinator(); err != nil { // transactions used here
		t.Fatal(err)
	}
	if err := e.CreateTopic("other", 1); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTopic("small", 1, map[string]string{"segment.bytes": "70"}); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("small", 0)
	b := batch.NewBuilder(batch.CodecNone)
	b.SetProducer(5, 0, 0)
	b.SetTransactional(true)
	b.Append(time.Now().UnixMilli(), nil, nil, nil)
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("txn batch %d bytes", len(out))
	if _, err := p.Append(bytes.Clone(out)); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("Open after a transaction left open in a small-segment topic: %v (the whole engine, topic %q too, is unusable)", err, "other")
	}
	e2.Close()
}
