package engine

import (
	"bytes"
	"errors"
	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/producer"
	"github.com/idemlog/idemlog/segment"
	"github.com/idemlog/idemlog/txnindex"
	"os"
	"path/filepath"
	"sync/atomic"
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

// Transactions version 1: when writing a marker fails, EndTxn returns the
// error and leaves the id in PrepareCommit. Kafka's marker channel keeps
// retrying the markers until every partition has them and then writes
// CompleteCommit (TransactionMarkerChannelManager; spec 3.7: "retries until
// every partition acknowledges"). Here nothing ever retries them for a
// version-1 transaction: EndTxn retries answer CONCURRENT_TRANSACTIONS
// for ever (endTxnV2 retries the markers, endTxnV1 does not), InitProducerID
// too, and the timeout sweep skips Prepare states, so the partition that
// missed its marker keeps its LSO pinned until a restart.
func TestReviewBV1MarkerFailureNeverRetried(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	dir := t.TempDir()
	e := openEngine(t, dir, Options{MaxProducersPerPartition: 1, ProducerIDExpiration: time.Hour, Now: clock})
	defer e.Close()
	e.CreateTopic("out", 2)
	p0, _ := e.Partition("out", 0)
	p1, _ := e.Partition("out", 1)
	// Another producer fills out-1's producer table.
	if _, err := p1.Append(idem(t, 99, 0, 0, 1, now.Load())); err != nil {
		t.Fatal(err)
	}
	c, err := e.Coordinator()
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := c.InitProducerID("tx", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	parts := []TopicPartitionRef{{"out", 0}, {"out", 1}}
	if err := c.AddPartitions("tx", pid, epoch, parts, false); err != nil {
		t.Fatal(err)
	}
	if _, err := p0.Append(txnBatch(t, pid, epoch, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.EndTxn("tx", pid, epoch, true); err == nil {
		t.Fatal("expected the out-1 marker to fail (producer table full)")
	} else {
		t.Logf("first EndTxn: %v", err)
	}
	// The cause goes away: out-1's idle producer expires.
	now.Add((2 * time.Hour).Milliseconds())
	if n := p1.ExpireProducers(); n != 1 {
		t.Fatalf("expired %d", n)
	}
	// The client retries EndTxn, as it does on CONCURRENT_TRANSACTIONS.
	for i := range 5 {
		_, _, err = c.EndTxn("tx", pid, epoch, true)
		if err == nil {
			break
		}
		t.Logf("retry %d: %v", i, err)
		if _, err := c.AbortTimedOut(); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, st, _ := c.State("tx"); st != TxnCompleteCommit {
		t.Errorf("state %v after the markers became writable and EndTxn was retried, want CompleteCommit", st)
	}
	if _, _, err := c.InitProducerID("tx", time.Minute); err != nil {
		t.Errorf("InitProducerID afterwards: %v", err)
	}
}

// Under SyncAlways (the policy the coordinator's doc says gives atomicity
// across machine crashes) the Ongoing record of AddPartitions is not
// synced, while the transaction's data is. A machine crash that loses that
// record leaves the previous transaction's CompleteCommit at the same
// epoch (version 1 keeps the epoch), and the orphan sweep then COMMITS the
// new, never-committed transaction's data: read_committed shows records the
// client never committed (it would have aborted or retried).
func TestReviewBOrphanSweepCommitsUncommittedTV1Txn(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, alwaysOptions)
	e.CreateTopic("out", 1)
	p, _ := e.Partition("out", 0)
	c, err := e.Coordinator()
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := c.InitProducerID("tx", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ref := []TopicPartitionRef{{"out", 0}}
	// Transaction 1: committed.
	if err := c.AddPartitions("tx", pid, epoch, ref, false); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(valueBatch(t, pid, 0, true, 'a')); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.EndTxn("tx", pid, epoch, true); err != nil {
		t.Fatal(err)
	}
	// Transaction 2: started, data written (and synced), never ended.
	if err := c.AddPartitions("tx", pid, epoch, ref, false); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(valueBatch(t, pid, 1, true, 'X')); err != nil {
		t.Fatal(err)
	}
	// Where the unsynced Ongoing record starts in __transaction_state.
	sl := c.log.Log()
	ch, err := sl.Read(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	pos := 0
	for data := ch.Data; len(data) > 0; {
		n, _ := batch.Size(data)
		if len(data) == n {
			break // the last batch: transaction 2's Ongoing record
		}
		pos += n
		data = data[n:]
	}
	ch.Release()
	e.Kill()
	// Machine crash: the unsynced tail of __transaction_state is lost.
	f, err := os.OpenFile(filepath.Join(dir, txnStateTopic+"-0", segment.FileName(0, ".log")), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 512), int64(pos)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	e = openEngine(t, dir, alwaysOptions)
	defer e.Close()
	if _, err := e.Coordinator(); err != nil {
		t.Fatal(err)
	}
	p, _ = e.Partition("out", 0)
	if got := string(readCommittedValues(t, p)); got != "a" {
		t.Fatalf("read_committed after recovery: %q, want %q (transaction 2 was never committed)", got, "a")
	}
}

// A TxnOffsetCommit that arrives after its transaction ended (a delayed
// request of a TV1 producer, same pid and epoch: what kafka/txn.go passed
// straight to TxnCommitOffsets before review) must be refused (KIP-890 part 1 verification:
// INVALID_TXN_STATE / TRANSACTION_ABORTABLE; spec 3.10, 6.1). Here it is
// accepted: the group's offsets stay pending for ever (UNSTABLE_OFFSET_COMMIT,
// spec 3.4) and the __consumer_offsets partition's LSO is pinned: no timeout
// or later EndTxn ends it, since the coordinator does not know about it.
func TestReviewBLateTxnOffsetCommitAfterAbortHangs(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	defer e.Close()
	c, err := e.Coordinator()
	if err != nil {
		t.Fatal(err)
	}
	const group = "g"
	ref, err := e.OffsetsPartition(group)
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := c.InitProducerID("tx", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddPartitions("tx", pid, epoch, []TopicPartitionRef{ref}, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.EndTxn("tx", pid, epoch, false); err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{"in", 0}
	// The late TxnOffsetCommit of the aborted transaction, through the
	// verified entry point the listener (kafka/txn.go) now uses.
	err = c.TxnCommitOffsets("tx", group, pid, epoch, map[TopicPartition]OffsetAndMetadata{tp: {42, ""}})
	if !errors.Is(err, ErrInvalidTxnState) {
		t.Errorf("TxnCommitOffsets after the transaction was aborted: %v, want INVALID_TXN_STATE", err)
	}
	// Time passes; the coordinator's timeout sweep runs.
	if _, err := c.AbortTimedOut(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.FetchOffsets(group, []TopicPartition{tp}, true); err != nil {
		t.Errorf("FetchOffsets(requireStable) with no transaction in progress: %v", err)
	}
	p, _ := e.Partition(ref.Topic, int(ref.Partition))
	if lso, hw := p.LastStableOffset(), p.Log().HighWatermark(); lso != hw {
		t.Errorf("%s-%d LSO %d, HW %d: a hanging transaction no coordinator knows", ref.Topic, ref.Partition, lso, hw)
	}
}

// The consumer-offsets store is opened lazily; its replay reads up to the
// high watermark, and markers appended before its hook was installed but
// not yet below the high watermark (SyncAlways with DurableVisibility:
// HW moves after the sync)
// are seen by neither the replay nor the hook. After a restart, the
// coordinator's recovery writes markers exactly like this (writeMarker,
// then WaitAll) while a consumer may open the store: the committed
// transaction's offsets stay pending for ever (UNSTABLE_OFFSET_COMMIT) and
// never become the group's offsets.
func TestReviewBOffsetsStoreMissesMarkerAppendedDuringOpen(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Partition: partition.Options{Sync: partition.SyncPolicy{Kind: partition.SyncAlways}, DurableVisibility: true}}
	e := openEngine(t, dir, opts)
	const group = "g"
	tp := TopicPartition{"in", 0}
	pid, epoch, err := e.InitProducerID()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.TxnCommitOffsets(group, pid, epoch, map[TopicPartition]OffsetAndMetadata{tp: {42, ""}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, opts)
	defer e.Close()
	p, err := e.Partition(ConsumerOffsetsTopic, GroupPartition(group))
	if err != nil {
		t.Fatal(err)
	}
	// The coordinator's recovery appends the COMMIT marker (its sync follows).
	res, wait, err := p.writeMarker(producer.Marker{ProducerID: pid, Epoch: epoch, Commit: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("marker at %d, wait %v, hw %d", res.BaseOffset, wait, p.Log().HighWatermark())
	// Meanwhile a consumer opens the store.
	if _, err := e.FetchOffsets(group, []TopicPartition{tp}, false); err != nil {
		t.Fatal(err)
	}
	if wait {
		if err := p.Log().WaitDurable(res.LastOffset + 1); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.FetchOffsets(group, []TopicPartition{tp}, true)
	if err != nil || got[tp].Offset != 42 {
		t.Fatalf("after the COMMIT marker: %v %v, want offset 42", got, err)
	}
}

// TestRestartCompletesDecidedWithoutCoordinatorCall (from review): after a
// crash between a commit's decision and its markers, the partitions'
// transactions are completed when the engine opens, not when the program
// first asks for the coordinator (which one that only reads may never do):
// until then their LSO hid everything after them from read_committed.
func TestRestartCompletesDecidedWithoutCoordinatorCall(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	e.CreateTopic("out", 2)
	tp, err := e.NewTransactionalProducer("crashy", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		p, _ := e.Partition("out", i)
		if err := txnSend(t, tp, p, byte('a'+i)); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := e.Coordinator()
	c.stopAfterMarkers = 1 // decided, one marker of two written
	if err := tp.Commit(); !errors.Is(err, errCrashTest) {
		t.Fatalf("commit with a crash after one marker: %v", err)
	}
	e.Kill()
	e = openEngine(t, dir, Options{})
	defer e.Close()
	for i := range 2 {
		p, _ := e.Partition("out", i)
		if lso, hw := p.LastStableOffset(), p.Log().HighWatermark(); lso != hw {
			t.Fatalf("out-%d after the reopen: LSO %d, HW %d: the decided commit was not completed", i, lso, hw)
		}
		if got := string(readCommittedValues(t, p)); got != string(rune('a'+i)) {
			t.Fatalf("out-%d after the reopen: %q", i, got)
		}
	}
}
