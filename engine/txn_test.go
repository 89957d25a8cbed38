package engine

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/internal/testutil"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/producer"
	"github.com/idemlog/idemlog/segment"
	"github.com/idemlog/idemlog/txnindex"
)

func txnBatch(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	return testutil.Batch(t, testutil.BatchSpec{Producer: true, PID: pid, Epoch: epoch, Seq: seq, Transactional: true, Records: n, Timestamp: time.Now().UnixMilli()})
}

func TestLastStableOffsetAndMarkers(t *testing.T) {
	t.Parallel()
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
	if p.LastStableOffset() != 2 || p.log.HighWatermark() != 5 {
		t.Fatalf("LSO %d hw %d, want 2 and 5", p.LastStableOffset(), p.log.HighWatermark())
	}
	// A non-transactional batch from a producer inside a transaction: 48.
	if _, err := p.Append(idem(t, 1, 0, 2, 1, time.Now().UnixMilli())); !errors.Is(err, producer.ErrInvalidTxnState) {
		t.Fatalf("non-transactional write in a transaction: %v", err)
	}
	// Commit producer 1: the LSO moves to producer 2's transaction.
	r, err := p.writeMarkerDurable(producer.Marker{ProducerID: 1, Epoch: 0, CoordinatorEpoch: 0, Commit: true})
	if err != nil || r.BaseOffset != 5 {
		t.Fatalf("marker: %+v %v", r, err)
	}
	if p.LastStableOffset() != 4 {
		t.Fatalf("LSO %d after the first commit, want 4", p.LastStableOffset())
	}
	// Restart without closing: open transactions come back from the log.
	e.kill()
	e = openEngine(t, dir, Options{})
	p, _ = e.Partition("t", 0)
	if p.LastStableOffset() != 4 {
		t.Fatalf("LSO %d after a crash, want 4", p.LastStableOffset())
	}
	// An abort with a bumped epoch fences producer 2's old instance.
	if _, err := p.writeMarkerDurable(producer.Marker{ProducerID: 2, Epoch: 1, CoordinatorEpoch: 0}); err != nil {
		t.Fatal(err)
	}
	if p.LastStableOffset() != p.log.HighWatermark() {
		t.Fatalf("LSO %d with nothing open, hw %d", p.LastStableOffset(), p.log.HighWatermark())
	}
	if _, err := p.Append(txnBatch(t, 2, 0, 1, 1)); !errors.Is(err, producer.ErrInvalidProducerEpoch) {
		t.Fatalf("zombie after a fencing abort: %v", err)
	}
	// The marker is in the log as a control batch.
	c, err := p.log.Read(5, 1<<20)
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
	for off := p.log.LogStartOffset(); off < p.LastStableOffset(); {
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
	return testutil.Batch(t, testutil.BatchSpec{Producer: pid >= 0, PID: pid, Seq: seq, Transactional: txn, Records: len(values),
		Value: func(i int) []byte { return []byte{values[i]} }, Timestamp: time.Now().UnixMilli()})
}

func TestReadCommittedHidesAborted(t *testing.T) {
	t.Parallel()
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
	must(p.Append(valueBatch(t, -1, 0, false, 'a')))           // plain
	must(p.Append(valueBatch(t, 1, 0, true, 'x', 'x')))        // p1: will abort
	must(p.Append(valueBatch(t, 2, 0, true, 'b')))             // p2: will commit
	must(p.Append(valueBatch(t, 1, 2, true, 'x')))             // p1 again
	must(p.Append(valueBatch(t, -1, 0, false, 'c')))           // plain
	must(p.writeMarkerDurable(producer.Marker{ProducerID: 1})) // ABORT p1
	must(p.Append(valueBatch(t, 2, 1, true, 'd')))             // p2
	must(p.writeMarkerDurable(producer.Marker{ProducerID: 2, Commit: true}))
	must(p.Append(valueBatch(t, 3, 0, true, 'y')))             // p3: will abort
	must(p.writeMarkerDurable(producer.Marker{ProducerID: 3})) // ABORT p3
	must(p.Append(valueBatch(t, 4, 0, true, 'z')))             // p4: still open
	must(p.Append(valueBatch(t, -1, 0, false, 'e')))           // after the LSO
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
	e.kill()
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
	must(p.writeMarkerDurable(producer.Marker{ProducerID: 4, Commit: true}))
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
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	e.CreateTopic("t", 1)
	p, _ := e.Partition("t", 0)
	if _, err := p.Append(valueBatch(t, 1, 0, true, 'x')); err != nil {
		t.Fatal(err)
	}
	if _, err := p.writeMarkerDurable(producer.Marker{ProducerID: 1}); err != nil {
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

// Kafka's ongoingTxns is ordered by first offset (TreeMap). After a clean
// restart the snapshot's open transactions come back in table order, not
// first-offset order: the LSO must still be the oldest first offset.
func TestBLSOAfterCleanRestartSeveralOpenTxns(t *testing.T) {
	t.Parallel()
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
func TestAbortIndexLSOAfterRestartLeaksAbortedData(t *testing.T) {
	t.Parallel()
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
	must(p.Append(valueBatch(t, 3, 0, true, 'Y')))             // offset 2: pid 3
	must(p.writeMarkerDurable(producer.Marker{ProducerID: 3})) // offset 3: ABORT pid 3
	var ent []txnindex.Entry
	ent = p.log.AbortedTxns(0, 4, ent)
	if len(ent) != 1 || ent[0].LastStableOffset != 0 {
		t.Errorf("abort index entry of pid 3: %+v, want LastStableOffset 0 (pid 2's open txn at 0)", ent)
	}
	must(p.writeMarkerDurable(producer.Marker{ProducerID: 1, Commit: true}))
	// Roll: a large plain batch fills the first segment.
	big := batch.NewBuilder(batch.CodecNone)
	big.Append(time.Now().UnixMilli(), nil, bytes.Repeat([]byte{'p'}, 1500), nil)
	bb, _ := big.Build()
	must(p.Append(bytes.Clone(bb)))
	must(p.Append(bytes.Clone(bb)))
	r, err := p.writeMarkerDurable(producer.Marker{ProducerID: 2}) // ABORT pid 2, in a later segment
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
func TestBV1MarkerFailureNeverRetried(t *testing.T) {
	t.Parallel()
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
	c, err := e.coordinator()
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := c.InitProducerID("tx", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	parts := []TopicPartition{{"out", 0}, {"out", 1}}
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
	if n := p1.expireProducers(); n != 1 {
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
func TestOrphanSweepCommitsUncommittedTV1Txn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, alwaysOptions)
	e.CreateTopic("out", 1)
	p, _ := e.Partition("out", 0)
	c, err := e.coordinator()
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := c.InitProducerID("tx", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ref := []TopicPartition{{"out", 0}}
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
	sl := c.log.log
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
	e.kill()
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
	if _, err := e.coordinator(); err != nil {
		t.Fatal(err)
	}
	p, _ = e.Partition("out", 0)
	if got := string(readCommittedValues(t, p)); got != "a" {
		t.Fatalf("read_committed after recovery: %q, want %q (transaction 2 was never committed)", got, "a")
	}
}

// A TxnOffsetCommit that arrives after its transaction ended (a delayed
// request of a TV1 producer, same pid and epoch: what kafka/txn.go passed
// straight to TxnCommitOffsets before this check) must be refused (KIP-890 part 1 verification:
// INVALID_TXN_STATE / TRANSACTION_ABORTABLE; spec 3.10, 6.1). Here it is
// accepted: the group's offsets stay pending for ever (UNSTABLE_OFFSET_COMMIT,
// spec 3.4) and the __consumer_offsets partition's LSO is pinned: no timeout
// or later EndTxn ends it, since the coordinator does not know about it.
func TestLateTxnOffsetCommitAfterAbortHangs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := openEngine(t, dir, Options{})
	defer e.Close()
	c, err := e.coordinator()
	if err != nil {
		t.Fatal(err)
	}
	const group = "g"
	ref, err := e.offsetsTopicPartition(group)
	if err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := c.InitProducerID("tx", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddPartitions("tx", pid, epoch, []TopicPartition{ref}, false); err != nil {
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
	if _, err := e.fetchOffsets(group, []TopicPartition{tp}, true); err != nil {
		t.Errorf("FetchOffsets(requireStable) with no transaction in progress: %v", err)
	}
	p, _ := e.Partition(ref.Topic, int(ref.Partition))
	if lso, hw := p.LastStableOffset(), p.log.HighWatermark(); lso != hw {
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
func TestOffsetsStoreMissesMarkerAppendedDuringOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{Partition: partition.Options{Sync: partition.SyncPolicy{Kind: partition.SyncAlways}, DurableVisibility: true}}
	e := openEngine(t, dir, opts)
	const group = "g"
	tp := TopicPartition{"in", 0}
	pid, epoch, err := e.initProducerID()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Frontend().TxnCommitOffsets(group, pid, epoch, map[TopicPartition]OffsetAndMetadata{tp: {42, ""}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, opts)
	defer e.Close()
	p, err := e.Partition(ConsumerOffsetsTopic, groupPartition(group))
	if err != nil {
		t.Fatal(err)
	}
	// The coordinator's recovery appends the COMMIT marker (its sync follows).
	res, wait, err := p.writeMarker(producer.Marker{ProducerID: pid, Epoch: epoch, Commit: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("marker at %d, wait %v, hw %d", res.BaseOffset, wait, p.log.HighWatermark())
	// Meanwhile a consumer opens the store.
	if _, err := e.fetchOffsets(group, []TopicPartition{tp}, false); err != nil {
		t.Fatal(err)
	}
	if wait {
		if err := p.log.WaitDurable(res.LastOffset + 1); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.fetchOffsets(group, []TopicPartition{tp}, true)
	if err != nil || got[tp].Offset != 42 {
		t.Fatalf("after the COMMIT marker: %v %v, want offset 42", got, err)
	}
}

// TestRestartCompletesDecidedWithoutCoordinatorCall: after a
// crash between a commit's decision and its markers, the partitions'
// transactions are completed when the engine opens, not when the program
// first asks for the coordinator (which one that only reads may never do):
// until then their LSO hid everything after them from read_committed.
func TestRestartCompletesDecidedWithoutCoordinatorCall(t *testing.T) {
	t.Parallel()
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
	c, _ := e.coordinator()
	c.stopAfterMarkers = 1 // decided, one marker of two written
	if err := tp.Commit(); !errors.Is(err, errCrashTest) {
		t.Fatalf("commit with a crash after one marker: %v", err)
	}
	e.kill()
	e = openEngine(t, dir, Options{})
	defer e.Close()
	for i := range 2 {
		p, _ := e.Partition("out", i)
		if lso, hw := p.LastStableOffset(), p.log.HighWatermark(); lso != hw {
			t.Fatalf("out-%d after the reopen: LSO %d, HW %d: the decided commit was not completed", i, lso, hw)
		}
		if got := string(readCommittedValues(t, p)); got != string(rune('a'+i)) {
			t.Fatalf("out-%d after the reopen: %q", i, got)
		}
	}
}
