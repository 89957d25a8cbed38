package kafka

import (
	"testing"

	"github.com/idemlog/idemlog/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTxnOffsetCommitUnknownTopic: Kafka's handleTxnOffsetCommitRequest
// answers UNKNOWN_TOPIC_OR_PARTITION for partitions not in the metadata
// cache (as OffsetCommit does here); idemlog stores them and says NONE.
func TestTxnOffsetCommitUnknownTopic(t *testing.T) {
	ts := startServer(t, Options{})
	rc := dial(t, ts.addr)
	id := "tx"
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = &id, 60000
	ipr := rc.roundTrip(ip).(*kmsg.InitProducerIDResponse)
	if ipr.ErrorCode != 0 {
		t.Fatal(ipr.ErrorCode)
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = id, ipr.ProducerID, ipr.ProducerEpoch, "g"
	if c := rc.roundTrip(ao).(*kmsg.AddOffsetsToTxnResponse).ErrorCode; c != 0 {
		t.Fatal(c)
	}
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.Version = 2
	tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch = id, "g", ipr.ProducerID, ipr.ProducerEpoch
	tt := kmsg.NewTxnOffsetCommitRequestTopic()
	tt.Topic = "no-such-topic"
	tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	tp.Partition, tp.Offset = 0, 5
	tt.Partitions = append(tt.Partitions, tp)
	tc.Topics = append(tc.Topics, tt)
	if c := rc.roundTrip(tc).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; c != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("TxnOffsetCommit for an unknown topic: code %d, want UNKNOWN_TOPIC_OR_PARTITION (3)", c)
	}
}

// The same through TxnOffsetCommit: Coordinator.TxnCommitOffsets skips
// verification when TxnOpen(pid) holds, whatever the request's epoch, so
// offsets at a higher epoch than the coordinator's are written and the
// COMMIT marker is refused in __consumer_offsets.
func TestTxnOffsetCommitAboveTxnEpochUnverified(t *testing.T) {
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
	if got := txnEnd(rc, 3, "tx", pid, epoch, true).ErrorCode; got != 0 {
		t.Errorf("EndTxn commit: %v, want success", kerr.ErrorForCode(got))
	}
	if _, _, st, _ := ts.srv.coord.State("tx"); st != engine.TxnCompleteCommit {
		t.Errorf("transaction state %v, want CompleteCommit", st)
	}
	if init := txnInitProducer(rc, 3, txnStr("tx"), -1, -1); init.ErrorCode != 0 {
		t.Errorf("InitProducerId after the commit: %v, want success", kerr.ErrorForCode(init.ErrorCode))
	}
}
