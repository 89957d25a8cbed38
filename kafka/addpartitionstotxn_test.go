package kafka

import (
	"testing"

	"github.com/idemlog/idemlog/engine"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Kafka's handleAddPartitionsToTxnRequest leaves internal topics out of the
// topics a client may write (filterByAuthorized over
// partitionsToAdd.filterNot(Topic.isInternal)): a client's
// AddPartitionsToTxn naming __transaction_state gets
// TOPIC_AUTHORIZATION_FAILED there, and the other partitions
// OPERATION_NOT_ATTEMPTED; the transaction does not start.
func TestAddPartitionsInternalTopicRefused(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	init := txnInitProducer(rc, 3, txnStr("tx"), -1, -1)
	if init.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(init.ErrorCode))
	}
	resp := txnAddPartitions(rc, 3, "tx", init.ProducerID, init.ProducerEpoch, map[string][]int32{"t": {0}, "__transaction_state": {0}})
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
