package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/internal/testutil"
	"github.com/idemlog/idemlog/partition"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func produceTxn(t testing.TB, cl *kgo.Client, topic string, values []string, commit bool) {
	t.Helper()
	ctx := ctxT(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

// TestReadCommitted: a read_committed consumer sees committed records only
// (the aborted ones are filtered by the client with the aborted list and
// markers the fetch returns); read_uncommitted sees all of them.
func TestReadCommitted(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	cl := ts.client(t, kgo.TransactionalID("tx"))
	produceTxn(t, cl, "t", []string{"c1", "c2"}, true)
	produceTxn(t, cl, "t", []string{"a1", "a2"}, false)
	produceTxn(t, cl, "t", []string{"c3"}, true)

	got := consume(t, ts, "t", 3, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var vals []string
	for _, r := range got {
		vals = append(vals, string(r.Value))
	}
	if fmt.Sprint(vals) != "[c1 c2 c3]" {
		t.Fatalf("read_committed got %v", vals)
	}
	all := consume(t, ts, "t", 5, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if len(all) != 5 {
		t.Fatalf("read_uncommitted got %d records", len(all))
	}
}

// TestFetchWakesOnCommit: a read_committed fetch parked at the last stable
// offset answers when the transaction commits, long before MaxWait.
func TestFetchWakesOnCommit(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	cl := ts.client(t, kgo.TransactionalID("tx"))
	ctx := ctxT(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.IsolationLevel = 11, 10000, 1, 1<<20, 1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	start := time.Now()
	rc.send(req)
	time.Sleep(200 * time.Millisecond)
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 11
	rc.recv(resp)
	p := resp.Topics[0].Partitions[0]
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("fetch took %v: not woken by the commit", took)
	}
	if p.ErrorCode != 0 || len(p.RecordBatches) == 0 || p.LastStableOffset != 2 || p.HighWatermark != 2 {
		t.Fatalf("fetch: code %d, %d bytes, lso %d, hw %d", p.ErrorCode, len(p.RecordBatches), p.LastStableOffset, p.HighWatermark)
	}
}

// TestFencing: a second instance of a transactional id fences the first,
// whose produce and commit are then rejected.
func TestFencing(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	old := ts.client(t, kgo.TransactionalID("tx"))
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fresh := ts.client(t, kgo.TransactionalID("tx"))
	produceTxn(t, fresh, "t", []string{"live"}, true)
	err := old.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("zombie2")}).FirstErr()
	if err == nil {
		err = old.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.InvalidProducerEpoch) && !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("zombie: %v, want fenced", err)
	}
	got := consume(t, ts, "t", 1, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if len(got) != 1 || string(got[0].Value) != "live" {
		t.Fatalf("committed: %v", got)
	}
}

// TestGroupTransactSession runs kgo's consume-transform-produce session:
// every input record becomes exactly one committed output record and the
// group's offset ends at the input's end.
func TestGroupTransactSession(t *testing.T) {
	ts := startServer(t, Options{})
	for _, topic := range []string{"in", "out"} {
		if err := ts.eng.CreateTopic(topic, 2); err != nil {
			t.Fatal(err)
		}
	}
	ctx := ctxT(t)
	prod := ts.client(t, kgo.DefaultProduceTopic("in"))
	const n = 100
	for i := range n {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(ts.addr), kgo.TransactionalID("etl"),
		kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic("out"))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	done := 0
	for done < n {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("transformed %d of %d: %v", done, n, ctx.Err())
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Value: append([]byte("out-"), r.Value...)}, nil)
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatal(err)
		}
		if committed {
			done += len(fs.Records())
		}
	}
	got := consume(t, ts, "out", n, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	seen := map[string]bool{}
	for _, r := range got {
		if seen[string(r.Value)] {
			t.Fatalf("duplicate output %s", r.Value)
		}
		seen[string(r.Value)] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct outputs, want %d", len(seen), n)
	}
	rc := dial(t, ts.addr)
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version, of.Group, of.RequireStable = 7, "g", true
	ofr := rc.roundTrip(of).(*kmsg.OffsetFetchResponse)
	var sum int64
	for _, tp := range ofr.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("offset fetch %s/%d: %d", tp.Topic, p.Partition, p.ErrorCode)
			}
			sum += p.Offset
		}
	}
	if sum != n {
		t.Fatalf("group offsets sum to %d, want %d", sum, n)
	}
}

// TestConsumerGroupCommits: a plain consumer group with autocommit leaves
// its offsets at the end of what it read.
func TestConsumerGroupCommits(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 3); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	prod := ts.client(t, kgo.DefaultProduceTopic("t"))
	for i := range 30 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl := ts.client(t, kgo.ConsumerGroup("plain"), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	got := 0
	for got < 30 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		got += len(fs.Records())
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	offs, err := ts.eng.Frontend().FetchOffsets("plain", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, om := range offs {
		sum += om.Offset
	}
	if sum != 30 {
		t.Fatalf("committed offsets sum to %d, want 30 (%v)", sum, offs)
	}
	_ = context.Background
}

// txnInitProducer sends InitProducerId at version v for id (nil: idempotent).
func txnInitProducer(rc *rawConn, v int16, id *string, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = v
	req.TransactionalID = id
	req.TransactionTimeoutMillis = 60000
	req.ProducerID, req.ProducerEpoch = pid, epoch
	return rc.roundTrip(req).(*kmsg.InitProducerIDResponse)
}

func txnAddPartitions(rc *rawConn, v int16, id string, pid int64, epoch int16, parts map[string][]int32) *kmsg.AddPartitionsToTxnResponse {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = v
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	for topic, ps := range parts {
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = topic, ps
		req.Topics = append(req.Topics, rt)
	}
	return rc.roundTrip(req).(*kmsg.AddPartitionsToTxnResponse)
}

func txnEnd(rc *rawConn, v int16, id string, pid int64, epoch int16, commit bool) *kmsg.EndTxnResponse {
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = v
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return rc.roundTrip(req).(*kmsg.EndTxnResponse)
}

func txnStr(s string) *string { return &s }

// A client that adds the coordinator's own log, __transaction_state-0, to
// its transaction has EndTxn write a COMMIT marker into it; the next open
// replays that control record as a transaction-state value and the engine
// no longer opens. Whatever the listener answers the client, the engine
// must reopen.
func TestTxnStateMarkerSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	e, err := engine.Open(dir, engine.Options{Partition: partition.Options{}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(e, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	rc := dial(t, ln.Addr().String())
	init := txnInitProducer(rc, 3, txnStr("tx"), -1, -1)
	if init.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(init.ErrorCode))
	}
	txnAddPartitions(rc, 3, "tx", init.ProducerID, init.ProducerEpoch, map[string][]int32{"__transaction_state": {0}})
	txnEnd(rc, 3, "tx", init.ProducerID, init.ProducerEpoch, true)
	rc.c.Close()
	srv.Close()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2, err := engine.Open(dir, engine.Options{Partition: partition.Options{}})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer e2.Close()
	if _, err := e2.Frontend().Coordinator(); err != nil {
		t.Fatalf("coordinator after reopen: %v", err)
	}
}

// Kafka's TransactionCoordinator answers INVALID_REQUEST to
// AddPartitionsToTxn, AddOffsetsToTxn and EndTxn with an empty
// transactional id, as InitProducerId does here.
func TestEmptyTransactionalIDInvalid(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	add := txnAddPartitions(rc, 3, "", 0, 0, map[string][]int32{"t": {0}})
	if got := add.Topics[0].Partitions[0].ErrorCode; got != kerr.InvalidRequest.Code {
		t.Errorf("AddPartitionsToTxn: %v, want INVALID_REQUEST", kerr.ErrorForCode(got))
	}
	off := kmsg.NewPtrAddOffsetsToTxnRequest()
	off.Version, off.TransactionalID, off.Group = 3, "", "g"
	if got := rc.roundTrip(off).(*kmsg.AddOffsetsToTxnResponse).ErrorCode; got != kerr.InvalidRequest.Code {
		t.Errorf("AddOffsetsToTxn: %v, want INVALID_REQUEST", kerr.ErrorForCode(got))
	}
	if got := txnEnd(rc, 3, "", 0, 0, true).ErrorCode; got != kerr.InvalidRequest.Code {
		t.Errorf("EndTxn: %v, want INVALID_REQUEST", kerr.ErrorForCode(got))
	}
}

// txnTestBatch is a one-record transactional batch.
func txnTestBatch(t *testing.T, pid int64, epoch int16, seq int32) []byte {
	t.Helper()
	return testutil.Batch(t, testutil.BatchSpec{Producer: true, PID: pid, Epoch: epoch, Seq: seq, Transactional: true,
		Values: testutil.Strings("x"), Timestamp: 1700000000000})
}

// txnCommitCompletes checks that a commit of the transaction at (pid, epoch)
// completes and leaves t-0's last stable offset at its high watermark.
func txnCommitCompletes(t *testing.T, ts *testServer, rc *rawConn, pid int64, epoch int16) {
	t.Helper()
	if got := txnEnd(rc, 3, "tx", pid, epoch, true).ErrorCode; got != 0 {
		t.Errorf("EndTxn commit: %v, want success", kerr.ErrorForCode(got))
	}
	if _, _, st, _ := ts.srv.coord.State("tx"); st != engine.TxnCompleteCommit {
		t.Errorf("transaction state %v, want CompleteCommit", st)
	}
	if init := txnInitProducer(rc, 3, txnStr("tx"), -1, -1); init.ErrorCode != 0 {
		t.Errorf("InitProducerId after the commit: %v, want success", kerr.ErrorForCode(init.ErrorCode))
	}
	p, err := ts.eng.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if lso, hw := p.LastStableOffset(), p.HighWatermark(); lso != hw {
		t.Errorf("t-0: last stable offset %d, high watermark %d", lso, hw)
	}
}

// Kafka's UnifiedLog.hasOngoingTransaction(producerId, producerEpoch)
// skips KIP-890 verification only for a batch at the epoch of the open
// transaction. Here Partition.TxnOpen(pid) ignores the epoch: a
// transactional batch at a made-up higher epoch is appended unverified,
// moves the partition's producer to that epoch, and the coordinator's
// COMMIT marker (at the real epoch) is then refused there: the id stays
// PrepareCommit for good (every InitProducerId answers
// CONCURRENT_TRANSACTIONS) and t-0's last stable offset is pinned.
func TestProduceAboveTxnEpochUnverified(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	init := txnInitProducer(rc, 3, txnStr("tx"), -1, -1)
	if init.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(init.ErrorCode))
	}
	pid, epoch := init.ProducerID, init.ProducerEpoch
	txnAddPartitions(rc, 3, "tx", pid, epoch, map[string][]int32{"t": {0}})
	produce := func(e int16) int16 {
		req := produceReq("t", map[int32][]byte{0: txnTestBatch(t, pid, e, 0)})
		req.TransactionID = txnStr("tx")
		return rc.roundTrip(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	if got := produce(epoch); got != 0 {
		t.Fatalf("produce at the transaction's epoch: %v", kerr.ErrorForCode(got))
	}
	if got := produce(epoch + 5); got != kerr.InvalidProducerEpoch.Code {
		t.Errorf("produce at epoch %d (coordinator's %d): %v, want INVALID_PRODUCER_EPOCH", epoch+5, epoch, kerr.ErrorForCode(got))
	}
	txnCommitCompletes(t, ts, rc, pid, epoch)
}
