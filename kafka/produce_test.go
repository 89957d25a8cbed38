package kafka

import (
	"net"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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

// TestLogAppendTimeOverTheWire: on a LogAppendTime topic a kgo producer's
// records come back with the broker's append time, and the produce
// response carries it.
func TestLogAppendTimeOverTheWire(t *testing.T) {
	ts := startServer(t, Options{})
	rc := dial(t, ts.addr)
	if got := createWithConfigs(rc, "lat", false, strp("message.timestamp.type"), strp("LogAppendTime")); got.ErrorCode != 0 {
		t.Fatal(got.ErrorCode)
	}
	cl := ts.client(t)
	old := time.UnixMilli(1000)
	before := time.Now().Add(-time.Second)
	res := cl.ProduceSync(ctxT(t), &kgo.Record{Topic: "lat", Partition: 0, Value: []byte("v"), Timestamp: old})
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := consume(t, ts, "lat", 1)
	if ts := got[0].Timestamp; ts.Before(before) || ts.After(time.Now().Add(time.Second)) || got[0].Attrs.TimestampType() != 1 {
		t.Fatalf("consumed timestamp %v type %d, want the append time (type 1)", ts, got[0].Attrs.TimestampType())
	}
}

// TestProduceToInternalTopicRejected: Kafka's
// ReplicaManager.appendToLocalLog refuses client appends to internal topics
// (__consumer_offsets, __transaction_state) with INVALID_TOPIC_EXCEPTION
// (17). idemlog appends the client's bytes into the offsets log.
func TestProduceToInternalTopicRejected(t *testing.T) {
	ts := startServer(t, Options{})
	if _, err := ts.eng.Frontend().OffsetsPartition("g"); err != nil { // creates __consumer_offsets
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	resp := rc.roundTrip(produceReq(engine.ConsumerOffsetsTopic, map[int32][]byte{0: buildBatch(t, -1, 0, 0, 1)})).(*kmsg.ProduceResponse)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != kerr.InvalidTopicException.Code {
		part, _ := ts.eng.Partition(engine.ConsumerOffsetsTopic, 0)
		t.Fatalf("produce to %s-0: code %d base offset %d (partition HW now %d), want INVALID_TOPIC_EXCEPTION (17)",
			engine.ConsumerOffsetsTopic, p.ErrorCode, p.BaseOffset, part.HighWatermark())
	}
}

// TestAcksZeroErrorClosesConnection: with acks=0 Kafka closes the
// connection when any partition of the produce failed (KafkaApis
// handleProduceRequest: "the server will close socket server so that the
// producer client will know that some error has happened"). idemlog drops
// the error silently and keeps the connection.
func TestAcksZeroErrorClosesConnection(t *testing.T) {
	ts := startServer(t, Options{})
	rc := dial(t, ts.addr)
	req := produceReq("missing", map[int32][]byte{0: buildBatch(t, -1, 0, 0, 1)})
	req.Acks = 0
	rc.send(req)
	// expectClosed accepts a read timeout as "closed"; require EOF/reset.
	rc.c.SetReadDeadline(time.Now().Add(3 * time.Second))
	var b [1]byte
	n, err := rc.c.Read(b[:])
	if ne, ok := err.(net.Error); err == nil || n > 0 || (ok && ne.Timeout()) {
		t.Fatalf("connection still open after a failed acks=0 produce (read %d bytes, %v)", n, err)
	}
}
