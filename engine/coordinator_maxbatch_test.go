package engine

import (
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/partition"
)

// coordStateBatchLen is the size of the __transaction_state batch appendState
// builds for m.
func coordStateBatchLen(t *testing.T, m *txnMeta) int {
	t.Helper()
	b := batch.NewBuilder(batch.CodecNone)
	b.Append(time.Now().UnixMilli(), []byte(m.id), m.encode(nil), nil)
	v, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return len(v)
}

// TestRotatingDecisionTooLargeStuck: the state record of a decision
// that rotates the producer id (version 1 of the value, nextPID) is 8 bytes
// larger than the Ongoing record that AddPartitions wrote for the same
// transaction. When the Ongoing record just fits max.message.bytes, no end
// of that transaction at the exhausted epoch can ever be recorded: COMMIT,
// ABORT, the timeout's fence and a new instance's fence all fail, and the
// transaction stays Ongoing forever, pinning its partition's LSO.
func TestRotatingDecisionTooLargeStuck(t *testing.T) {
	t.Parallel()
	const id = "r13"
	ongoing := &txnMeta{id: id, pid: 0, prevPID: -1, nextPID: -1, epoch: epochExhausted, lastEpoch: -1,
		timeout: time.Second, state: TxnOngoing, start: 0, tv2: true,
		partitions: []TopicPartition{{"out", 0}}}
	limit := coordStateBatchLen(t, ongoing)
	now := time.Now()
	opts := Options{Now: func() time.Time { return now },
		Partition: partition.Options{MaxBatchSize: limit}}
	e := openEngine(t, t.TempDir(), opts)
	defer e.Close()
	if err := e.CreateTopic("out", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("out", 0)
	c, err := e.coordinator()
	if err != nil {
		t.Fatal(err)
	}
	tp, err := e.NewTransactionalProducer(id, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	exhaust(t, c, tp)
	if err := txnSend(t, tp, p, 'x'); err != nil {
		t.Fatalf("send (the Ongoing record fits max.message.bytes %d): %v", limit, err)
	}
	commitErr := tp.Commit()
	abortErr := tp.Abort()
	now = now.Add(time.Minute)
	_, timeoutErr := c.AbortTimedOut()
	_, _, st, _ := c.State(id)
	if st == TxnOngoing {
		t.Fatalf("transaction can never end: still %v; commit: %v; abort: %v; timeout abort: %v; LSO %d < HW %d",
			st, commitErr, abortErr, timeoutErr, p.LastStableOffset(), p.log.HighWatermark())
	}
}
