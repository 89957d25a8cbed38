package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Kafka's handleInitProducerIdRequest answers INVALID_REQUEST when only
// one of producerId and producerEpoch is set (-1 the other), before the
// coordinator sees it, with or without a transactional id.
func TestInitProducerIDHalfPairInvalid(t *testing.T) {
	ts := startServer(t, Options{})
	rc := dial(t, ts.addr)
	init := txnInitProducer(rc, 4, txnStr("tx"), -1, -1)
	if init.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(init.ErrorCode))
	}
	cases := []struct {
		name  string
		id    *string
		pid   int64
		epoch int16
	}{
		{"transactional, producer id without epoch", txnStr("tx"), init.ProducerID, -1},
		{"transactional, epoch without producer id", txnStr("tx"), -1, init.ProducerEpoch},
		{"idempotent, producer id without epoch", nil, init.ProducerID, -1},
		{"idempotent, epoch without producer id", nil, -1, 3},
	}
	for _, c := range cases {
		resp := txnInitProducer(rc, 4, c.id, c.pid, c.epoch)
		if resp.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("%s: %v (producer %d epoch %d), want INVALID_REQUEST", c.name, kerr.ErrorForCode(resp.ErrorCode), resp.ProducerID, resp.ProducerEpoch)
		}
	}
}
