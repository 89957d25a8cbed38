package kafka

import (
	"fmt"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Several transactional producers, each with many batches in flight to
// several partitions at once (async produce, small batches), commit every
// transaction: no produce may be refused by the verification guard.
func TestTxnManyInFlight(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 4); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := ts.client(t, kgo.TransactionalID(fmt.Sprintf("tx%d", w)), kgo.ProducerBatchMaxBytes(600),
				kgo.ProducerLinger(0))
			ctx := ctxT(t)
			for range 20 {
				if err := cl.BeginTransaction(); err != nil {
					t.Error(err)
					return
				}
				var pwg sync.WaitGroup
				var mu sync.Mutex
				var firstErr error
				for i := range 100 {
					pwg.Add(1)
					cl.Produce(ctx, &kgo.Record{Topic: "t", Partition: int32(i % 4), Value: []byte(fmt.Sprintf("v%03d-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", i))}, func(r *kgo.Record, err error) {
						if err != nil {
							mu.Lock()
							if firstErr == nil {
								firstErr = err
							}
							mu.Unlock()
						}
						pwg.Done()
					})
				}
				pwg.Wait()
				if firstErr != nil {
					t.Errorf("produce in transaction: %v", firstErr)
					cl.AbortBufferedRecords(ctx)
					cl.EndTransaction(ctx, kgo.TryAbort)
					return
				}
				if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// A TxnOffsetCommit from a fenced producer: Kafka's verification maps the
// coordinator's PRODUCER_FENCED to INVALID_PRODUCER_EPOCH
// (AddPartitionsToTxnManager; spec 3.10), and clients older than KIP-588
// (TxnOffsetCommit v0-v2 among them) do not know code 90 at all. The
// verification added to Coordinator.TxnCommitOffsets (d6c9665) answers 90
// to every version (txnOffsetCommit uses s.code, not fencedCode).
func TestTxnOffsetCommitFencedCode(t *testing.T) {
	ts := startServer(t, Options{})
	// The topic exists: unknown partitions are answered before the
	// coordinator's verification, as Kafka does.
	if err := ts.eng.CreateTopic("in", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	id := "tx"
	var pid int64
	for i := range 2 {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 1, &id, 60000
		rc.send(req)
		resp := kmsg.NewPtrInitProducerIDResponse()
		resp.Version = 1
		rc.recv(resp)
		if resp.ErrorCode != 0 || resp.ProducerEpoch != int16(i) {
			t.Fatalf("InitProducerID: code %d epoch %d", resp.ErrorCode, resp.ProducerEpoch)
		}
		pid = resp.ProducerID
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = 2, id, "g", pid, 0
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "in"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Offset = 5
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rc.send(req)
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	resp.Version = 2
	rc.recv(resp)
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != kerr.InvalidProducerEpoch.Code {
		t.Errorf("TxnOffsetCommit v2 at a fenced epoch: code %d (%v), want %d INVALID_PRODUCER_EPOCH", c, kerr.ErrorForCode(c), kerr.InvalidProducerEpoch.Code)
	}
}
