package kafka

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listOffsetsWant is Kafka's answer by brute force: the first record at or
// above the log start, below limit, with timestamp >= ts.
func listOffsetsWant(t *testing.T, p *engine.Partition, ts, limit int64) (int64, int64) {
	l := p
	start := l.LogStartOffset()
	var d batch.Decoder
	var r batch.Record
	for off := start; off < l.HighWatermark(); {
		c, err := p.Read(off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for data := c.Data; len(data) > 0; {
			n, _ := batch.Size(data)
			it, err := d.Records(batch.Batch(data[:n]))
			if err != nil {
				t.Fatal(err)
			}
			for it.Next(&r) {
				if r.Offset >= start && r.Timestamp >= ts {
					c.Release()
					if r.Offset >= limit {
						return -1, -1
					}
					return r.Offset, r.Timestamp
				}
			}
			data = data[n:]
		}
		off = c.NextOffset
		c.Release()
	}
	return -1, -1
}

func TestOffsetForTimeRecordsModel(t *testing.T) {
	opts := engine.Options{Partition: partition.Options{RetentionAge: -1,
		Segment: segment.Options{MaxBytes: 4096, IndexMaxBytes: 240, IndexIntervalBytes: 150, ReserveAhead: 4096}}}
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			e, err := engine.Open(t.TempDir(), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if err := e.CreateTopic("t", 1); err != nil {
				t.Fatal(err)
			}
			p, _ := e.Partition("t", 0)
			clock := int64(1000)
			codecs := []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd}
			for step := 0; step < 200; step++ {
				if rng.IntN(15) == 0 {
					l := p
					if hw := l.HighWatermark(); hw > l.LogStartOffset() {
						if _, err := l.DeleteRecordsBefore(l.LogStartOffset() + rng.Int64N(hw-l.LogStartOffset()+1)); err != nil {
							t.Fatal(err)
						}
					}
				} else {
					b := batch.NewBuilder(codecs[rng.IntN(len(codecs))])
					for range 1 + rng.IntN(6) {
						clock += int64(rng.IntN(10))
						b.Append(clock-int64(rng.IntN(200)), nil, bytes.Repeat([]byte{'v'}, 10+rng.IntN(100)), nil)
					}
					raw, err := b.Build()
					if err != nil {
						t.Fatal(err)
					}
					if _, err := p.Append(bytes.Clone(raw)); err != nil {
						t.Fatal(err)
					}
				}
				for range 4 {
					ts := rng.Int64N(clock + 20)
					off, gotTs, err := offsetForTime(e.Frontend(), p, ts, false)
					if err != nil {
						t.Fatal(err)
					}
					wo, wts := listOffsetsWant(t, p, ts, p.HighWatermark())
					if off != wo || gotTs != wts {
						t.Fatalf("step %d: offsetForTime(%d) = (%d, %d), want (%d, %d)", step, ts, off, gotTs, wo, wts)
					}
				}
			}
		})
	}
}

func listOffsetsReq(t *testing.T, rc *rawConn, version int16, topic string, when ...int64) []kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = version
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, w := range when {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = w
		rt.Partitions = append(rt.Partitions, rp)
	}
	lo.Topics = append(lo.Topics, rt)
	return rc.roundTrip(lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions
}

// A timestamp with no record at or after it: Kafka answers through
// KafkaApis.buildErrorResponse(Errors.NONE, ...), which sets only the
// timestamp and offset (-1, -1) and leaves LeaderEpoch at the schema's
// default, -1 (ListOffsetsResponse.json, "default": "-1"; kmsg's Default()
// agrees). A found offset carries its batch's epoch. idemlog overwrites the
// default with 0 for every partition, "not found" and errors included, so a
// client sees leader epoch 0 attached to offset -1.
func TestListOffsetsNotFoundLeaderEpoch(t *testing.T) {
	ts := quietServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := ts.eng.Partition("t", 0)
	if _, err := p.Append(buildBatch(t, -1, 0, 0, 2)); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	for _, v := range []int16{4, 6} {
		out := listOffsetsReq(t, rc, v, "t", 1700000000000+5) // past every record
		if out[0].ErrorCode != 0 || out[0].Offset != -1 || out[0].Timestamp != -1 {
			t.Fatalf("v%d: code %d offset %d ts %d, want 0, -1, -1", v, out[0].ErrorCode, out[0].Offset, out[0].Timestamp)
		}
		if out[0].LeaderEpoch != -1 {
			t.Errorf("v%d: not-found answer has leader epoch %d, want -1 (UNKNOWN, as Kafka)", v, out[0].LeaderEpoch)
		}
	}
	// An unknown partition (an error answer) too.
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 6
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 7, -1
	rt.Partitions = append(rt.Partitions, rp)
	lo.Topics = append(lo.Topics, rt)
	out := rc.roundTrip(lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions
	if out[0].ErrorCode == 0 || out[0].LeaderEpoch != -1 {
		t.Errorf("unknown partition: code %d leader epoch %d, want an error with leader epoch -1", out[0].ErrorCode, out[0].LeaderEpoch)
	}
}

// A client batch whose header maxTimestamp is below one of its records'
// timestamps. Kafka's LogValidator recomputes maxTimestamp from the
// records for CreateTime (assignOffsetsNonCompressed and the compressed
// in-place path both call batch.setMaxTimestamp(CREATE_TIME,
// maxBatchTimestamp)), so ListOffsets by timestamp then finds the record
// (FileRecords.searchForTimestamp filters batches by maxTimestamp, then
// records). idemlog stores the header as sent and filters batches by it,
// so the record is never found: offset -1.
func TestListOffsetsHeaderMaxTimestampBelowRecord(t *testing.T) {
	ts := quietServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	bld := batch.NewBuilder(batch.CodecNone)
	bld.Append(1000, nil, []byte("a"), nil)
	bld.Append(5000, nil, []byte("b"), nil)
	raw, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	b := batch.Batch(bytes.Clone(raw))
	binary.BigEndian.PutUint64(b[35:], 1000) // maxTimestamp: the client's (wrong) header
	binary.BigEndian.PutUint32(b[17:], b.ComputeCRC())
	rc := dial(t, ts.addr)
	if c := rc.roundTrip(produceReq("t", map[int32][]byte{0: b})).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("produce: code %d", c)
	}
	out := listOffsetsReq(t, rc, 6, "t", 3000)
	if out[0].ErrorCode != 0 || out[0].Offset != 1 || out[0].Timestamp != 5000 {
		t.Fatalf("ListOffsets(3000) = code %d offset %d ts %d; want offset 1 ts 5000 (record 1 has timestamp 5000)",
			out[0].ErrorCode, out[0].Offset, out[0].Timestamp)
	}
}

// A partition named twice in one ListOffsets request: Kafka
// (KafkaApis.handleListOffsetRequestV1AndAbove) answers INVALID_REQUEST
// for each entry of a partition in offsetRequest.duplicatePartitions.
// idemlog answers every entry as if it were alone.
func TestListOffsetsDuplicatePartition(t *testing.T) {
	ts := quietServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	out := listOffsetsReq(t, rc, 6, "t", -1, -2)
	for i, p := range out {
		if p.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("entry %d (partition %d named twice): code %d offset %d, want INVALID_REQUEST (42)", i, p.Partition, p.ErrorCode, p.Offset)
		}
	}
}

// ListOffsets by timestamp must answer an offset at or above the log start
// (Kafka: searchForTimestamp(target, position, startingOffset = log start)
// takes the first record with timestamp >= target AND offset >= log start).
// A multi-record batch straddling the log start whose first record
// qualifies makes offsetForTime answer that record, below the log start.
func TestListOffsetsByTimeBelowLogStart(t *testing.T) {
	e, err := engine.Open(t.TempDir(), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("t", 0)
	b := batch.NewBuilder(batch.CodecNone)
	for _, ts := range []int64{100, 10, 10, 100, 10} {
		b.Append(ts, nil, []byte("v"), nil)
	}
	raw, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(bytes.Clone(raw)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	off, ts, err := offsetForTime(e.Frontend(), p, 50, false)
	if err != nil {
		t.Fatal(err)
	}
	if off != 3 || ts != 100 {
		t.Fatalf("offsetForTime(50) with log start 2 = offset %d ts %d; want offset 3 ts 100", off, ts)
	}
}

// TestListOffsetsTimestampReadCommitted: a timestamp lookup under
// read_committed only finds offsets below the last stable offset (Kafka
// Partition.fetchOffsetForTimestamp filters offset < lastFetchableOffset,
// the LSO for READ_COMMITTED). idemlog returns an offset inside the open
// transaction.
func TestListOffsetsTimestampReadCommitted(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	id := "tx"
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = &id, 60000
	ipr := rc.roundTrip(ip).(*kmsg.InitProducerIDResponse)
	if ipr.ErrorCode != 0 {
		t.Fatal(ipr.ErrorCode)
	}
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = id, ipr.ProducerID, ipr.ProducerEpoch
	at := kmsg.NewAddPartitionsToTxnRequestTopic()
	at.Topic, at.Partitions = "t", []int32{0}
	ap.Topics = append(ap.Topics, at)
	if c := rc.roundTrip(ap).(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatal(c)
	}
	bld := batch.NewBuilder(batch.CodecNone)
	bld.SetProducer(ipr.ProducerID, ipr.ProducerEpoch, 0)
	bld.SetTransactional(true)
	bld.Append(1700000000000, nil, []byte("v"), nil)
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	preq := produceReq("t", map[int32][]byte{0: append([]byte(nil), b...)})
	preq.TransactionID = &id
	if c := rc.roundTrip(preq).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatal(c)
	}
	// One request per lookup: a partition named twice in one request is
	// INVALID_REQUEST (Kafka's duplicatePartitions).
	var out []kmsg.ListOffsetsResponseTopicPartition
	for _, when := range []int64{-1, 0} {
		lo := kmsg.NewPtrListOffsetsRequest()
		lo.Version, lo.IsolationLevel = 4, 1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = when
		rt.Partitions = append(rt.Partitions, rp)
		lo.Topics = append(lo.Topics, rt)
		out = append(out, rc.roundTrip(lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0])
	}
	if out[0].Offset != 0 {
		t.Fatalf("latest under read_committed: %d, want LSO 0", out[0].Offset)
	}
	if out[1].ErrorCode != 0 || out[1].Offset != -1 {
		t.Fatalf("timestamp lookup under read_committed: code %d offset %d ts %d, want offset -1 (only record is above the LSO 0)",
			out[1].ErrorCode, out[1].Offset, out[1].Timestamp)
	}
}

// TestListOffsetsTimestampBelowLogStart: a timestamp lookup never
// answers an offset below the log start offset (Kafka
// LogSegment.findOffsetByTimestamp(ts, startingOffset = logStartOffset)
// requires record.offset >= startingOffset).
func TestListOffsetsTimestampBelowLogStart(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := ts.eng.Partition("t", 0)
	if _, err := p.Append(buildBatch(t, -1, 0, 0, 4)); err != nil { // ts base+0..3 at offsets 0..3
		t.Fatal(err)
	}
	if _, err := p.DeleteRecordsBefore(2); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 4
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = 0
	rt.Partitions = append(rt.Partitions, rp)
	lo.Topics = append(lo.Topics, rt)
	out := rc.roundTrip(lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if out.ErrorCode != 0 || out.Offset != 2 || out.Timestamp != 1700000000002 {
		t.Fatalf("lookup ts 0 with log start 2: code %d offset %d ts %d, want offset 2 ts 1700000000002",
			out.ErrorCode, out.Offset, out.Timestamp)
	}
}

// TestListOffsetsByTime: the first record at or after a timestamp, with
// its timestamp, found inside a batch; -1 past the end.
func TestListOffsetsByTime(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	p, _ := ts.eng.Partition("t", 0)
	for range 2 {
		if _, err := p.Append(buildBatch(t, -1, 0, 0, 4)); err != nil { // timestamps base+0..3
			t.Fatal(err)
		}
	}
	rc := dial(t, ts.addr)
	lookup := func(when int64) (int64, int64) {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 4
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = when
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		out := rc.roundTrip(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if out.ErrorCode != 0 {
			t.Fatalf("lookup %d: code %d", when, out.ErrorCode)
		}
		return out.Offset, out.Timestamp
	}
	const base = 1700000000000
	for _, c := range []struct{ when, off, ts int64 }{
		{0, 0, base}, {base + 2, 2, base + 2}, {base + 3, 3, base + 3}, {base + 4, -1, -1}, {-2, 0, -1}, {-1, 8, -1},
	} {
		if off, gotTS := lookup(c.when); off != c.off || gotTS != c.ts {
			t.Errorf("lookup %d: offset %d ts %d, want %d %d", c.when, off, gotTS, c.off, c.ts)
		}
	}
}
