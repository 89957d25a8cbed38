package kafka

import (
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceCodes sends req and returns each partition's error code of topic.
func produceCodes(t *testing.T, rc *rawConn, req *kmsg.ProduceRequest) map[int32]int16 {
	t.Helper()
	resp := rc.roundTrip(req).(*kmsg.ProduceResponse)
	codes := map[int32]int16{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			codes[p.Partition] = p.ErrorCode
		}
	}
	return codes
}

// TestProduceZstdBelowV7: Kafka's ProduceRequest.validateRecords
// refuses a zstd batch in a Produce below v7 with
// UNSUPPORTED_COMPRESSION_TYPE (KIP-110); the other partition of the
// request is still appended.
func TestProduceZstdBelowV7(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	bld := batch.NewBuilder(batch.CodecZstd)
	bld.SetProducer(-1, -1, -1)
	bld.Append(1700000000000, nil, []byte("zstd value"), nil)
	zb, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	zstd := append([]byte(nil), zb...)
	good := buildBatch(t, -1, 0, 0, 1)
	rc := dial(t, ts.addr)
	req := produceReq("t", map[int32][]byte{0: zstd, 1: good})
	req.Version = 6
	codes := produceCodes(t, rc, req)
	if codes[0] != kerr.UnsupportedCompressionType.Code || codes[1] != 0 {
		t.Fatalf("produce v6: codes %v, want partition 0 UNSUPPORTED_COMPRESSION_TYPE (%d), partition 1 0",
			codes, kerr.UnsupportedCompressionType.Code)
	}
	p0, _ := ts.eng.Partition("t", 0)
	if hw := p0.HighWatermark(); hw != 0 {
		t.Fatalf("zstd batch of a v6 produce was written: high watermark %d", hw)
	}
}

// TestProduceRecordsShapeIsInvalidRecord: from v3 Kafka's
// ProduceRequest.validateRecords answers INVALID_RECORD (87, not
// retriable) for a partition whose records are not exactly one batch of
// magic 2: none at all, a magic-1 batch, or two batches. CORRUPT_MESSAGE
// (2) is retriable: a client retries the same bytes until its delivery
// timeout.
func TestProduceRecordsShapeIsInvalidRecord(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	good := buildBatch(t, -1, 0, 0, 2)
	magic1 := append([]byte(nil), good...)
	magic1[16] = 1 // magic is outside the CRC's range
	two := append(append([]byte(nil), good...), good...)
	cases := []struct {
		name    string
		records []byte
	}{
		{"empty", []byte{}},
		{"magic 1", magic1},
		{"two batches", two},
	}
	rc := dial(t, ts.addr)
	for _, c := range cases {
		codes := produceCodes(t, rc, produceReq("t", map[int32][]byte{0: c.records, 1: good}))
		if codes[0] != kerr.InvalidRecord.Code || codes[1] != 0 {
			t.Errorf("%s: codes %v, want partition 0 INVALID_RECORD (%d), partition 1 0", c.name, codes, kerr.InvalidRecord.Code)
		}
	}
}

// produceTxnBatch is a hand-driven transactional producer over rc.
type produceTxnBatch struct {
	t     *testing.T
	rc    *rawConn
	id    string
	pid   int64
	epoch int16
	seq   map[int32]int32
}

func produceInitTxn(t *testing.T, rc *rawConn, id string, timeoutMs int32) *produceTxnBatch {
	t.Helper()
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = &id, timeoutMs
	r := rc.roundTrip(ip).(*kmsg.InitProducerIDResponse)
	if r.ErrorCode != 0 {
		t.Fatalf("InitProducerID: code %d", r.ErrorCode)
	}
	return &produceTxnBatch{t: t, rc: rc, id: id, pid: r.ProducerID, epoch: r.ProducerEpoch, seq: map[int32]int32{}}
}

func (x *produceTxnBatch) add(topic string, parts ...int32) {
	x.t.Helper()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 3
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = x.id, x.pid, x.epoch
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic, rt.Partitions = topic, parts
	req.Topics = append(req.Topics, rt)
	resp := x.rc.roundTrip(req).(*kmsg.AddPartitionsToTxnResponse)
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 {
				x.t.Fatalf("AddPartitionsToTxn %s-%d: code %d", tp.Topic, p.Partition, p.ErrorCode)
			}
		}
	}
}

// batch builds the next transactional batch of n records for partition p.
func (x *produceTxnBatch) batch(p int32, n int) []byte {
	x.t.Helper()
	bld := batch.NewBuilder(batch.CodecNone)
	bld.SetProducer(x.pid, x.epoch, x.seq[p])
	bld.SetTransactional(true)
	for i := range n {
		bld.Append(1700000000000+int64(i), nil, []byte("txn"), nil)
	}
	b, err := bld.Build()
	if err != nil {
		x.t.Fatal(err)
	}
	x.seq[p] += int32(n)
	return append([]byte(nil), b...)
}

// TestTransactionalWithoutID: Kafka's handleProduceRequest answers
// a request carrying transactional records but no transactional id with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition.
func TestTransactionalWithoutID(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	x := produceInitTxn(t, rc, "tx", 60000)
	x.add("t", 0)
	req := produceReq("t", map[int32][]byte{0: x.batch(0, 1)})
	if c := produceCodes(t, rc, req); c[0] != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("codes %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED (%d)", c, kerr.TransactionalIDAuthorizationFailed.Code)
	}
}
