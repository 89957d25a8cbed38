package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/internal/testutil"
	"github.com/idemlog/idemlog/producer"
)

func producerTestBatch(t *testing.T, pid int64, epoch int16, seq int32, n int, ts int64, txn bool) []byte {
	t.Helper()
	return testutil.Batch(t, testutil.BatchSpec{Producer: true, PID: pid, Epoch: epoch, Seq: seq, Transactional: txn, Records: n, Timestamp: ts})
}

// A clean restart must reproduce the same accept/reject decisions (spec
// §2.6: the snapshot stores lastTimestamp; Kafka writeSnapshot uses
// entry.lastTimestamp(), which a marker sets). idemlog's snapshot stores
// the newest data batch's timestamp instead, so a producer whose last
// activity was a marker expires at load although it was live before.
func TestRestartKeepsProducerLastTimestamp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(t0.UnixMilli())
	opts := Options{ProducerIDExpiration: time.Hour, Now: func() time.Time { return time.UnixMilli(clock.Load()) }}
	e := openEngine(t, dir, opts)
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 0)
	pid := int64(7)
	// Producer clock 50 minutes behind the engine's (docs/SEMANTICS.md §2.5 notes skew).
	if _, err := p.Append(producerTestBatch(t, pid, 0, 0, 2, t0.Add(-50*time.Minute).UnixMilli(), true)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.writeMarkerDurable(producer.Marker{ProducerID: pid, Epoch: 0, CoordinatorEpoch: 0, Commit: true}); err != nil {
		t.Fatal(err)
	}
	clock.Store(t0.Add(30 * time.Minute).UnixMilli())
	if n := p.expireProducers(); n != 0 || p.Producers() != 1 {
		t.Fatalf("before restart: expired %d, producers %d", n, p.Producers())
	}
	// Before restart: a gap is out of order.
	gap := producerTestBatch(t, pid, 0, 10, 1, clock.Load(), false)
	if _, err := p.Append(gap); !errors.Is(err, producer.ErrOutOfOrderSequence) {
		t.Fatalf("before restart: gap got %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, opts)
	defer e.Close()
	p, _ = e.Partition("t", 0)
	if p.Producers() != 1 {
		t.Errorf("after restart at the same clock: %d producers, want 1 (state was live before close)", p.Producers())
	}
	if _, err := p.Append(gap); !errors.Is(err, producer.ErrOutOfOrderSequence) {
		t.Errorf("after restart: same gap batch got %v, want out-of-order (decision changed by restart)", err)
	}
}

// docs/SEMANTICS.md §2.3 rule 5 / Kafka ProducerAppendInfo.checkProducerEpoch: epoch
// below -1 for a new producer is INVALID_PRODUCER_EPOCH, nothing written.
func TestEngineNegativeEpochRejected(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	e.CreateTopic("t", 1)
	p, _ := e.Partition("t", 0)
	r, err := p.Append(producerTestBatch(t, 3, -7, 0, 1, time.Now().UnixMilli(), false))
	if !errors.Is(err, producer.ErrInvalidProducerEpoch) {
		t.Fatalf("epoch -7: result %+v err %v, want ErrInvalidProducerEpoch; LEO %d", r, err, p.log.LogEndOffset())
	}
}

// Engine-level form of producer TestRetryAfterWrapIsDuplicate. Its
// batches claim 1e9 records in a gzip section holding one: the
// engine now decodes a client batch's records before appending it
// (batch.Decoder.CheckRecords), so such a batch is refused outright and
// changes nothing; the producer rule's test keeps the wrap case. A batch
// whose count and records agree but are out of step is refused too.
func TestEngineRetryAfterWrapWrittenTwice(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	e.CreateTopic("t", 1)
	p, _ := e.Partition("t", 0)
	mkz := func(seq, n int32) []byte {
		b := batch.NewBuilder(batch.CodecGzip)
		b.SetProducer(9, 0, seq)
		b.Append(time.Now().UnixMilli(), nil, []byte{1}, nil)
		out, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		c := batch.Batch(bytes.Clone(out))
		binary.BigEndian.PutUint32(c[23:], uint32(n-1))
		binary.BigEndian.PutUint32(c[57:], uint32(n))
		binary.BigEndian.PutUint32(c[17:], c.ComputeCRC())
		return c
	}
	if _, err := p.Append(mkz(0, 1_000_000_001)); !errors.Is(err, batch.ErrInflateLimit) {
		t.Fatalf("batch claiming 1e9 records: %v, want ErrInflateLimit", err)
	}
	if _, err := p.Append(mkz(0, 2)); !errors.Is(err, batch.ErrRecord) {
		t.Fatalf("batch claiming 2 records, holding 1: %v, want ErrRecord", err)
	}
	if leo, n := p.log.LogEndOffset(), p.Producers(); leo != 0 || n != 0 {
		t.Fatalf("refused batches changed the partition: log end %d, %d producers", leo, n)
	}
	if _, err := p.Append(mkz(0, 1)); err != nil {
		t.Fatalf("the well-formed batch: %v", err)
	}
}

// KIP-890 part 1 (docs/SEMANTICS.md §3.10): a verification is valid only while its guard
// holds; any marker clears it, so a transactional append verified before an
// abort marker and applied after it must get INVALID_TXN_STATE instead of
// opening a transaction the coordinator no longer knows (hanging txn).
// kafka/produce.go ran Coordinator.Verify and Partition.AppendNoWait as two
// unguarded steps; this test runs that interleaving
// deterministically through the guarded steps (verify.go), and the cases
// around it.
func TestVerifyThenAbortThenAppendHangs(t *testing.T) {
	t.Parallel()
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 0)
	c, err := e.coordinator()
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := c.InitProducerID("x", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{Topic: "t", Partition: 0}
	if err := c.AddPartitions("x", pid, epoch, []TopicPartition{tp}, false); err != nil {
		t.Fatal(err)
	}
	b := producerTestBatch(t, pid, epoch, 0, 1, time.Now().UnixMilli(), true)
	// Produce handler, step 1: not open in the partition -> verify.
	if p.txnOpen(pid, epoch) {
		t.Fatal("open before any data")
	}
	ver := p.beginVerification(pid)
	if err := c.Verify("x", pid, epoch, tp); err != nil {
		t.Fatal(err)
	}
	// Concurrently the client aborts (TV1: markers keep the epoch).
	if _, _, err := c.EndTxn("x", pid, epoch, false); err != nil {
		t.Fatal(err)
	}
	// Produce handler, step 2: the append.
	_, _, err = p.appendNoWaitVerified(b, ver)
	_, _, state, _ := c.State("x")
	if !errors.Is(err, ErrInvalidTxnState) {
		t.Errorf("append after abort: %v, want INVALID_TXN_STATE; coordinator state %v, partition LSO %d, HW %d",
			err, state, p.LastStableOffset(), p.log.HighWatermark())
	}
	if p.LastStableOffset() != p.log.HighWatermark() {
		t.Fatalf("LSO %d below HW %d: a transaction was left open", p.LastStableOffset(), p.log.HighWatermark())
	}

	// The next transaction, verified with no end in between, appends; a
	// batch that continues it needs no token (the zero Verification).
	if err := c.AddPartitions("x", pid, epoch, []TopicPartition{tp}, false); err != nil {
		t.Fatal(err)
	}
	ver = p.beginVerification(pid)
	if err := c.Verify("x", pid, epoch, tp); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.appendNoWaitVerified(b, ver); err != nil {
		t.Fatalf("verified append: %v", err)
	}
	if !p.txnOpen(pid, epoch) {
		t.Fatal("no transaction open after the verified append")
	}
	b2 := producerTestBatch(t, pid, epoch, 1, 1, time.Now().UnixMilli(), true)
	if _, _, err := p.appendNoWaitVerified(b2, Verification{}); err != nil {
		t.Fatalf("append continuing the open transaction: %v", err)
	}
	// Seen open, then ended before the append: the zero Verification
	// cannot open a new one.
	if _, _, err := c.EndTxn("x", pid, epoch, true); err != nil {
		t.Fatal(err)
	}
	b3 := producerTestBatch(t, pid, epoch, 2, 1, time.Now().UnixMilli(), true)
	if _, _, err := p.appendNoWaitVerified(b3, Verification{}); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("unverified append opening a transaction: %v, want INVALID_TXN_STATE", err)
	}
	// A token taken before the commit's marker is stale too.
	if _, _, err := p.appendNoWaitVerified(b3, ver); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("append with a token older than the last marker: %v, want INVALID_TXN_STATE", err)
	}
	// A refused append changed nothing: the retry with a fresh
	// verification of a new transaction appends at sequence 2.
	if err := c.AddPartitions("x", pid, epoch, []TopicPartition{tp}, false); err != nil {
		t.Fatal(err)
	}
	ver = p.beginVerification(pid)
	if err := c.Verify("x", pid, epoch, tp); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.appendNoWaitVerified(b3, ver); err != nil {
		t.Fatalf("verified append after refusals: %v", err)
	}
}

// TestReopenWithLowerProducerLimit: a partition whose log
// holds more producers than a lowered MaxProducersPerPartition allows still
// opens with all of them (Kafka's rebuild from the log never refuses); the
// cap then applies to new producers only.
func TestReopenWithLowerProducerLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 0)
	now := time.Now().UnixMilli()
	for pid := int64(1); pid <= 3; pid++ {
		if _, err := p.Append(idem(t, pid, 0, 0, 1, now)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, Options{MaxProducersPerPartition: 2})
	defer e.Close()
	p, err := e.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := p.Producers(); n != 3 {
		t.Fatalf("%d producers after the reopen, want 3", n)
	}
	// Known producers go on, their state intact: a gap is still refused.
	if _, err := p.Append(idem(t, 2, 0, 5, 1, now)); !errors.Is(err, producer.ErrOutOfOrderSequence) {
		t.Fatalf("gap of a loaded producer: %v, want out of order", err)
	}
	if _, err := p.Append(idem(t, 2, 0, 1, 1, now)); err != nil {
		t.Fatalf("next batch of a loaded producer: %v", err)
	}
	if _, err := p.Append(idem(t, 4, 0, 0, 1, now)); err == nil {
		t.Fatal("a new producer was taken above the cap")
	}
}

// readAllValues returns the values of p's records, in offset order, as a
// read_uncommitted consumer sees them.
func readAllValues(t *testing.T, e *Engine, p *Partition) []string {
	t.Helper()
	c := e.NewConsumer("", ReadUncommitted)
	if err := c.Assign(p); err != nil {
		t.Fatal(err)
	}
	var vals []string
	for c.Position(p) < p.HighWatermark() {
		if _, err := c.Poll(p, 1<<20, func(r *batch.Record) error {
			vals = append(vals, string(r.Value))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return vals
}

// TestSendClearsBuilder: Send used to leave the builder's records in
// place, so a program that appended more records to the same builder and
// sent again wrote the first records a second time, under new sequence
// numbers the broker rules cannot tell from new data: a duplicate made by
// the API itself. Send now clears the builder once its batch is written.
func TestSendClearsBuilder(t *testing.T) {
	e := openEngine(t, t.TempDir(), Options{})
	defer e.Close()
	if err := e.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	idem, txn := mustPartition(t, e, "t", 0), mustPartition(t, e, "t", 1)
	pr, err := e.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	tp, err := e.NewTransactionalProducer("x", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sends := map[*Partition]func(*Partition, *batch.Builder) (AppendResult, error){idem: pr.Send, txn: tp.Send}
	for p, send := range sends {
		bld := batch.NewBuilder(batch.CodecNone)
		bld.Append(1, nil, []byte("a"), nil)
		if _, err := send(p, bld); err != nil {
			t.Fatal(err)
		}
		if bld.Count() != 0 {
			t.Fatalf("%s-%d: builder holds %d records after Send, want 0", p.topic, p.index, bld.Count())
		}
		bld.Append(2, nil, []byte("b"), nil)
		if _, err := send(p, bld); err != nil {
			t.Fatal(err)
		}
	}
	if err := tp.Commit(); err != nil {
		t.Fatal(err)
	}
	for p := range sends {
		if got := strings.Join(readAllValues(t, e, p), ","); got != "a,b" {
			t.Errorf("%s-%d holds %q, want \"a,b\" (each record once)", p.topic, p.index, got)
		}
	}
}
