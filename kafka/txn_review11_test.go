package kafka

import (
	"net"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/partition"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// r11Init sends InitProducerId at version v for id (nil: idempotent).
func r11Init(rc *rawConn, v int16, id *string, pid int64, epoch int16) *kmsg.InitProducerIDResponse {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = v
	req.TransactionalID = id
	req.TransactionTimeoutMillis = 60000
	req.ProducerID, req.ProducerEpoch = pid, epoch
	return rc.roundTrip(req).(*kmsg.InitProducerIDResponse)
}

func r11Add(rc *rawConn, v int16, id string, pid int64, epoch int16, parts map[string][]int32) *kmsg.AddPartitionsToTxnResponse {
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

func r11End(rc *rawConn, v int16, id string, pid int64, epoch int16, commit bool) *kmsg.EndTxnResponse {
	req := kmsg.NewPtrEndTxnRequest()
	req.Version = v
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, commit
	return rc.roundTrip(req).(*kmsg.EndTxnResponse)
}

func r11Str(s string) *string { return &s }

// Kafka's handleAddPartitionsToTxnRequest leaves internal topics out of the
// topics a client may write (filterByAuthorized over
// partitionsToAdd.filterNot(Topic.isInternal)): a client's
// AddPartitionsToTxn naming __transaction_state gets
// TOPIC_AUTHORIZATION_FAILED there, and the other partitions
// OPERATION_NOT_ATTEMPTED; the transaction does not start.
func TestReview11AddPartitionsInternalTopicRefused(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	init := r11Init(rc, 3, r11Str("tx"), -1, -1)
	if init.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(init.ErrorCode))
	}
	resp := r11Add(rc, 3, "tx", init.ProducerID, init.ProducerEpoch, map[string][]int32{"t": {0}, "__transaction_state": {0}})
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			want := kerr.OperationNotAttempted.Code
			if rt.Topic == "__transaction_state" {
				want = kerr.TopicAuthorizationFailed.Code
			}
			if p.ErrorCode != want {
				t.Errorf("%s-%d: %v, want %v", rt.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(want))
			}
		}
	}
	if _, _, state, _ := ts.srv.coord.State("tx"); state != engine.TxnEmpty {
		t.Errorf("transaction state %v, want Empty", state)
	}
}

// A client that adds the coordinator's own log, __transaction_state-0, to
// its transaction has EndTxn write a COMMIT marker into it; the next open
// replays that control record as a transaction-state value and the engine
// no longer opens. Whatever the listener answers the client, the engine
// must reopen.
func TestReview11TxnStateMarkerSurvivesRestart(t *testing.T) {
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
	init := r11Init(rc, 3, r11Str("tx"), -1, -1)
	if init.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(init.ErrorCode))
	}
	r11Add(rc, 3, "tx", init.ProducerID, init.ProducerEpoch, map[string][]int32{"__transaction_state": {0}})
	r11End(rc, 3, "tx", init.ProducerID, init.ProducerEpoch, true)
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
	if _, err := e2.Coordinator(); err != nil {
		t.Fatalf("coordinator after reopen: %v", err)
	}
}

// Kafka's handleInitProducerIdRequest answers INVALID_REQUEST when only
// one of producerId and producerEpoch is set (-1 the other), before the
// coordinator sees it, with or without a transactional id.
func TestReview11InitProducerIDHalfPairInvalid(t *testing.T) {
	ts := startServer(t, Options{})
	rc := dial(t, ts.addr)
	init := r11Init(rc, 4, r11Str("tx"), -1, -1)
	if init.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(init.ErrorCode))
	}
	cases := []struct {
		name  string
		id    *string
		pid   int64
		epoch int16
	}{
		{"transactional, producer id without epoch", r11Str("tx"), init.ProducerID, -1},
		{"transactional, epoch without producer id", r11Str("tx"), -1, init.ProducerEpoch},
		{"idempotent, producer id without epoch", nil, init.ProducerID, -1},
		{"idempotent, epoch without producer id", nil, -1, 3},
	}
	for _, c := range cases {
		resp := r11Init(rc, 4, c.id, c.pid, c.epoch)
		if resp.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("%s: %v (producer %d epoch %d), want INVALID_REQUEST", c.name, kerr.ErrorForCode(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch)
		}
	}
}

// Kafka's TransactionCoordinator answers INVALID_REQUEST to
// AddPartitionsToTxn, AddOffsetsToTxn and EndTxn with an empty
// transactional id, as InitProducerId does here.
func TestReview11EmptyTransactionalIDInvalid(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	add := r11Add(rc, 3, "", 0, 0, map[string][]int32{"t": {0}})
	if got := add.Topics[0].Partitions[0].ErrorCode; got != kerr.InvalidRequest.Code {
		t.Errorf("AddPartitionsToTxn: %v, want INVALID_REQUEST", kerr.ErrorForCode(got))
	}
	off := kmsg.NewPtrAddOffsetsToTxnRequest()
	off.Version, off.TransactionalID, off.Group = 3, "", "g"
	if got := rc.roundTrip(off).(*kmsg.AddOffsetsToTxnResponse).ErrorCode; got != kerr.InvalidRequest.Code {
		t.Errorf("AddOffsetsToTxn: %v, want INVALID_REQUEST", kerr.ErrorForCode(got))
	}
	if got := r11End(rc, 3, "", 0, 0, true).ErrorCode; got != kerr.InvalidRequest.Code {
		t.Errorf("EndTxn: %v, want INVALID_REQUEST", kerr.ErrorForCode(got))
	}
}

// r11TxnBatch is a one-record transactional batch.
func r11TxnBatch(t *testing.T, pid int64, epoch int16, seq int32) []byte {
	t.Helper()
	bld := batch.NewBuilder(batch.CodecNone)
	bld.SetProducer(pid, epoch, seq)
	bld.SetTransactional(true)
	bld.Append(1700000000000, nil, []byte("x"), nil)
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), b...)
}

// r11CommitCompletes checks that a commit of the transaction at (pid, epoch)
// completes and leaves t-0's last stable offset at its high watermark.
func r11CommitCompletes(t *testing.T, ts *testServer, rc *rawConn, pid int64, epoch int16) {
	t.Helper()
	if got := r11End(rc, 3, "tx", pid, epoch, true).ErrorCode; got != 0 {
		t.Errorf("EndTxn commit: %v, want success", kerr.ErrorForCode(got))
	}
	if _, _, st, _ := ts.srv.coord.State("tx"); st != engine.TxnCompleteCommit {
		t.Errorf("transaction state %v, want CompleteCommit", st)
	}
	if init := r11Init(rc, 3, r11Str("tx"), -1, -1); init.ErrorCode != 0 {
		t.Errorf("InitProducerId after the commit: %v, want success", kerr.ErrorForCode(init.ErrorCode))
	}
	p, err := ts.eng.Partition("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if lso, hw := p.LastStableOffset(), p.Log().HighWatermark(); lso != hw {
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
func TestReview11ProduceAboveTxnEpochUnverified(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	init := r11Init(rc, 3, r11Str("tx"), -1, -1)
	if init.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(init.ErrorCode))
	}
	pid, epoch := init.ProducerID, init.ProducerEpoch
	r11Add(rc, 3, "tx", pid, epoch, map[string][]int32{"t": {0}})
	produce := func(e int16) int16 {
		req := produceReq("t", map[int32][]byte{0: r11TxnBatch(t, pid, e, 0)})
		req.TransactionID = r11Str("tx")
		return rc.roundTrip(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	if got := produce(epoch); got != 0 {
		t.Fatalf("produce at the transaction's epoch: %v", kerr.ErrorForCode(got))
	}
	if got := produce(epoch + 5); got != kerr.InvalidProducerEpoch.Code {
		t.Errorf("produce at epoch %d (coordinator's %d): %v, want INVALID_PRODUCER_EPOCH", epoch+5, epoch, kerr.ErrorForCode(got))
	}
	r11CommitCompletes(t, ts, rc, pid, epoch)
}

// The same through TxnOffsetCommit: Coordinator.TxnCommitOffsets skips
// verification when TxnOpen(pid) holds, whatever the request's epoch, so
// offsets at a higher epoch than the coordinator's are written and the
// COMMIT marker is refused in __consumer_offsets.
func TestReview11TxnOffsetCommitAboveTxnEpochUnverified(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	init := r11Init(rc, 3, r11Str("tx"), -1, -1)
	if init.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(init.ErrorCode))
	}
	pid, epoch := init.ProducerID, init.ProducerEpoch
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.Version, ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = 3, "tx", pid, epoch, "g"
	if got := rc.roundTrip(ao).(*kmsg.AddOffsetsToTxnResponse).ErrorCode; got != 0 {
		t.Fatalf("AddOffsetsToTxn: %v", kerr.ErrorForCode(got))
	}
	commit := func(e int16) int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.Version = 2
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = "tx", "g", pid, e
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "t"
		p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset = 0, 1
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
		return rc.roundTrip(req).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	if got := commit(epoch); got != 0 {
		t.Fatalf("TxnOffsetCommit at the transaction's epoch: %v", kerr.ErrorForCode(got))
	}
	if got := commit(epoch + 5); got != kerr.InvalidProducerEpoch.Code {
		t.Errorf("TxnOffsetCommit at epoch %d (coordinator's %d): %v, want INVALID_PRODUCER_EPOCH", epoch+5, epoch, kerr.ErrorForCode(got))
	}
	if got := r11End(rc, 3, "tx", pid, epoch, true).ErrorCode; got != 0 {
		t.Errorf("EndTxn commit: %v, want success", kerr.ErrorForCode(got))
	}
	if _, _, st, _ := ts.srv.coord.State("tx"); st != engine.TxnCompleteCommit {
		t.Errorf("transaction state %v, want CompleteCommit", st)
	}
	if init := r11Init(rc, 3, r11Str("tx"), -1, -1); init.ErrorCode != 0 {
		t.Errorf("InitProducerId after the commit: %v, want success", kerr.ErrorForCode(init.ErrorCode))
	}
}
