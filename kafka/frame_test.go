package kafka

import (
	"encoding/binary"
	"errors"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/internal/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func frameOf(key, version int16, corr int32, body []byte) []byte {
	f := binary.BigEndian.AppendUint16(nil, uint16(key))
	f = binary.BigEndian.AppendUint16(f, uint16(version))
	f = binary.BigEndian.AppendUint32(f, uint32(corr))
	f = binary.BigEndian.AppendUint16(f, 0xffff) // null client id
	return append(f, body...)
}

func TestParseRequestErrors(t *testing.T) {
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 4
	good := frameOf(3, 4, 7, meta.AppendTo(nil))
	if h, req, err := parseRequest(good); err != nil || h.correlation != 7 || req.Key() != 3 {
		t.Fatalf("good frame: %v %v %v", h, req, err)
	}
	cases := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"short", good[:5], ErrFrameTruncated},
		{"client id cut", good[:9], ErrFrameTruncated},
		{"body cut", good[:len(good)-1], ErrFrameTruncated},
		{"unknown key", frameOf(9999, 0, 1, nil), ErrUnknownKey},
		{"negative key", frameOf(-1, 0, 1, nil), ErrUnknownKey},
		{"unadvertised key", frameOf(kmsg.DescribeACLs.Int16(), 0, 1, nil), ErrUnsupportedVersion},
		{"version above", frameOf(3, 13, 1, meta.AppendTo(nil)), ErrUnsupportedVersion},
		{"version below", frameOf(0, 2, 1, nil), ErrUnsupportedVersion},
		{"negative version", frameOf(3, -1, 1, nil), ErrUnsupportedVersion},
	}
	for _, c := range cases {
		if _, _, err := parseRequest(c.frame); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// TestBadFramesCloseOnlyTheirConnection: a garbled, oversized or
// unsupported frame closes its connection, writes nothing, and the server
// keeps answering everyone else.
func TestBadFramesCloseOnlyTheirConnection(t *testing.T) {
	ts := startServer(t, Options{MaxFrameSize: 1 << 20})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	bystander := dial(t, ts.addr)
	bad := map[string][]byte{
		"oversized":     binary.BigEndian.AppendUint32(nil, 1<<20+1),
		"negative size": binary.BigEndian.AppendUint32(nil, 0xfffffff0),
		"tiny":          append(binary.BigEndian.AppendUint32(nil, 3), 1, 2, 3),
		"unknown key":   sized(frameOf(4242, 0, 1, nil)),
		"bad version":   sized(frameOf(0, 99, 1, nil)),
		"garbled produce": sized(frameOf(0, 7, 1, []byte{0xff, 0xff, 0, 1, 0, 0, 0, 1, 0, 0, 0, 9,
			0, 1, 'x'})),
	}
	for name, b := range bad {
		rc := dial(t, ts.addr)
		if _, err := rc.c.Write(b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rc.expectClosed()
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 9
		if resp := bystander.roundTrip(req).(*kmsg.MetadataResponse); len(resp.Brokers) != 1 {
			t.Fatalf("after %s: bystander got %d brokers", name, len(resp.Brokers))
		}
	}
	p, _ := ts.eng.Partition("t", 0)
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("bad frames wrote %d offsets", hw)
	}
}

func sized(frame []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)
}

// TestProduceBadBatches: every malformed batch gets its typed code and
// writes nothing; a good batch in the same request is appended.
func TestProduceBadBatches(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	good := buildBatch(t, -1, 0, 0, 3)
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)-1] ^= 1
	badMagic := append([]byte(nil), good...)
	badMagic[16] = 1
	two := append(append([]byte(nil), good...), good...)
	cases := []struct {
		name    string
		records []byte
		code    int16
	}{
		{"crc", corrupt, kerr.CorruptMessage.Code},
		{"magic", badMagic, kerr.InvalidRecord.Code},
		{"truncated", good[:len(good)-3], kerr.CorruptMessage.Code},
		{"two batches", two, kerr.CorruptMessage.Code},
		{"nil", nil, kerr.CorruptMessage.Code},
	}
	rc := dial(t, ts.addr)
	for _, c := range cases {
		req := produceReq("t", map[int32][]byte{0: c.records, 1: good})
		resp := rc.roundTrip(req).(*kmsg.ProduceResponse)
		got := map[int32]kmsg.ProduceResponseTopicPartition{}
		for _, p := range resp.Topics[0].Partitions {
			got[p.Partition] = p
		}
		if got[0].ErrorCode == 0 {
			t.Errorf("%s: accepted", c.name)
		}
		if got[1].ErrorCode != 0 {
			t.Errorf("%s: good partition got %d", c.name, got[1].ErrorCode)
		}
	}
	p0, _ := ts.eng.Partition("t", 0)
	if hw := p0.HighWatermark(); hw != 0 {
		t.Fatalf("bad batches wrote %d offsets", hw)
	}
	req := produceReq("t", map[int32][]byte{0: good})
	req.Acks = 2
	if resp := rc.roundTrip(req).(*kmsg.ProduceResponse); resp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRequiredAcks.Code {
		t.Fatalf("acks=2: code %d", resp.Topics[0].Partitions[0].ErrorCode)
	}
	req = produceReq("nope", map[int32][]byte{0: good})
	if resp := rc.roundTrip(req).(*kmsg.ProduceResponse); resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: code %d", resp.Topics[0].Partitions[0].ErrorCode)
	}
}

func produceReq(topic string, parts map[int32][]byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	for p := range int32(len(parts) + 8) {
		b, ok := parts[p]
		if !ok {
			continue
		}
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, b
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	return req
}

func buildBatch(t testing.TB, pid int64, epoch int16, seq int32, n int) []byte {
	t.Helper()
	return testutil.Batch(t, testutil.BatchSpec{Producer: true, PID: pid, Epoch: epoch, Seq: seq, Records: n,
		Value: func(i int) []byte { return []byte("v" + string(rune('a'+i))) }, Timestamp: 1700000000000, TimestampStep: 1})
}

// TestProduceRetryReturnsOriginalOffsets: the exact retry of a batch gets
// the original base offset and writes nothing; a gap is out of order; an
// old epoch is fenced.
func TestProduceRetryReturnsOriginalOffsets(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	ip := rc.roundTrip(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	if ip.ErrorCode != 0 {
		t.Fatal(ip.ErrorCode)
	}
	first := buildBatch(t, ip.ProducerID, 0, 0, 4)
	second := buildBatch(t, ip.ProducerID, 0, 4, 2)
	code := func(b []byte) (int16, int64) {
		resp := rc.roundTrip(produceReq("t", map[int32][]byte{0: b})).(*kmsg.ProduceResponse)
		p := resp.Topics[0].Partitions[0]
		return p.ErrorCode, p.BaseOffset
	}
	if c, off := code(first); c != 0 || off != 0 {
		t.Fatalf("first: %d at %d", c, off)
	}
	if c, off := code(second); c != 0 || off != 4 {
		t.Fatalf("second: %d at %d", c, off)
	}
	if c, off := code(first); c != 0 || off != 0 {
		t.Fatalf("retry of first: %d at %d, want the original offset 0", c, off)
	}
	if c, _ := code(buildBatch(t, ip.ProducerID, 0, 9, 1)); c != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("gap: code %d", c)
	}
	if c, _ := code(buildBatch(t, ip.ProducerID, 1, 0, 1)); c != 0 {
		t.Fatalf("new epoch at 0: code %d", c)
	}
	if c, _ := code(buildBatch(t, ip.ProducerID, 0, 6, 1)); c != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("old epoch: code %d", c)
	}
	p, _ := ts.eng.Partition("t", 0)
	if hw := p.HighWatermark(); hw != 7 {
		t.Fatalf("high watermark %d, want 7", hw)
	}
}

// TestProduceTransactionalMixedRecords: a transactional produce whose other
// partition carries a truncated batch gets a typed error for that
// partition (and INVALID_TXN_STATE for the one not added to the
// transaction), and the connection stays up. (The verification once read
// the epoch of the truncated records: a panic.)
func TestProduceTransactionalMixedRecords(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	id := "tx"
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = &id, 10000
	ipr := rc.roundTrip(ip).(*kmsg.InitProducerIDResponse)
	if ipr.ErrorCode != 0 {
		t.Fatal(ipr.ErrorCode)
	}
	bld := batch.NewBuilder(batch.CodecNone)
	bld.SetProducer(ipr.ProducerID, ipr.ProducerEpoch, 0)
	bld.SetTransactional(true)
	bld.Append(1, nil, []byte("v"), nil)
	txb, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	req := produceReq("t", map[int32][]byte{0: append([]byte(nil), txb...), 1: []byte{1, 2, 3}})
	req.TransactionID = &id
	resp := rc.roundTrip(req).(*kmsg.ProduceResponse)
	codes := map[int32]int16{}
	for _, p := range resp.Topics[0].Partitions {
		codes[p.Partition] = p.ErrorCode
	}
	// Three bytes hold no batch: INVALID_RECORD, as Kafka's
	// ProduceRequest.validateRecords answers.
	if codes[0] != kerr.InvalidTxnState.Code || codes[1] != kerr.InvalidRecord.Code {
		t.Fatalf("codes %v", codes)
	}
	if resp := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatal("connection unusable after the request")
	}
}

// A frame's size prefix alone (4 bytes) makes the server allocate the
// whole claimed frame before any of it arrives: a few idle connections
// pin gigabytes.
func TestFramePrefixAllocatesUpfront(t *testing.T) {
	ts := quietServer(t, Options{})
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	const conns = 16
	for range conns {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(binary.BigEndian.AppendUint32(nil, 100<<20)) // and nothing else
	}
	time.Sleep(500 * time.Millisecond)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap grew by %d MiB for %d connections that sent 4 bytes each", grew>>20, conns)
	if grew > 256<<20 {
		t.Errorf("heap grew by %d MiB from %d bytes of input", grew>>20, conns*4)
	}
}
