package engine

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
)

// With the watermark file gone while the partitions survive, new producer
// ids must still be above every id a partition holds state for: otherwise
// a new producer's first batch is taken as an old producer's retry of the
// same sequence, acknowledged with the old offsets and never written.
func TestPIDWatermarkLostAbovePartitionState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p := mustPartition(t, e, "t", 0)
	old, err := e.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	bld := batch.NewBuilder(batch.CodecNone)
	bld.Append(time.Now().UnixMilli(), nil, []byte("old"), nil)
	if _, err := old.Send(p, bld); err != nil {
		t.Fatal(err)
	}
	oldPID, _ := old.ID()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, pidFile)); err != nil {
		t.Fatal(err)
	}

	e = openEngine(t, dir, Options{})
	p = mustPartition(t, e, "t", 0)
	fresh, err := e.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	if pid, _ := fresh.ID(); pid <= oldPID {
		t.Fatalf("new producer id %d, want above %d, which partition t-0 holds", pid, oldPID)
	}
	bld.Reset(batch.CodecNone)
	bld.Append(time.Now().UnixMilli(), nil, []byte("new"), nil)
	res, err := fresh.Send(p, bld)
	if err != nil {
		t.Fatal(err)
	}
	if res.BaseOffset != 1 {
		t.Fatalf("new producer's batch at offset %d, want 1 (written after the old one)", res.BaseOffset)
	}
	if hw := p.log.HighWatermark(); hw != 2 {
		t.Fatalf("high watermark %d, want 2", hw)
	}
}

// The same for the transaction coordinator's records: a transactional id's
// producer id must not be handed to another producer.
func TestPIDWatermarkLostAboveTransactionalIDs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	c, err := e.coordinator()
	if err != nil {
		t.Fatal(err)
	}
	txnPID, _, err := c.InitProducerID("tx", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, pidFile)); err != nil {
		t.Fatal(err)
	}

	e = openEngine(t, dir, Options{})
	pid, _, err := e.initProducerID()
	if err != nil {
		t.Fatal(err)
	}
	if pid <= txnPID {
		t.Fatalf("new producer id %d, want above transactional id tx's %d", pid, txnPID)
	}
	// The watermark is written again before the id is used.
	if _, err := os.Stat(filepath.Join(dir, pidFile)); err != nil {
		t.Fatalf("watermark not rewritten: %v", err)
	}
}
