package kafka

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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

// TestFetchMaxBytesZero: Kafka caps a fetch at min(MaxBytes,
// fetch.max.bytes) with only the first batch exempt (KIP-74): MaxBytes 0
// returns exactly one batch. idemlog treats MaxBytes <= 0 as unlimited.
func TestFetchMaxBytesZero(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		p, _ := ts.eng.Partition("t", i)
		for range 2 {
			if _, err := p.Append(buildBatch(t, -1, 0, 0, 2)); err != nil {
				t.Fatal(err)
			}
		}
	}
	rc := dial(t, ts.addr)
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxBytes, req.MaxWaitMillis = 11, 0, 0
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	for i := range int32(2) {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes = i, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
	}
	req.Topics = append(req.Topics, ft)
	resp := rc.roundTrip(req).(*kmsg.FetchResponse)
	batches := 0
	for _, p := range resp.Topics[0].Partitions {
		for data := p.RecordBatches; len(data) > 0; {
			n, err := batch.Size(data)
			if err != nil {
				t.Fatal(err)
			}
			data = data[n:]
			batches++
		}
	}
	if batches != 1 {
		t.Fatalf("fetch with MaxBytes 0 returned %d batches, want 1", batches)
	}
}

var _ = time.Second

// TestOffsetFetchAllRequireStablePlacement: OffsetFetch for all of a
// group's partitions with RequireStable. Kafka never fails the group for a
// pending transactional commit: the 3.x GroupMetadataManager.getOffsets
// ignores requireStable for "all" (UNSTABLE_OFFSET_COMMIT only per
// requested partition), and the 4.x GroupCoordinatorService.fetchAllOffsets
// waits for pending writes instead of returning 88. idemlog puts
// UNSTABLE_OFFSET_COMMIT on the whole group and returns no offsets, so the
// stable partition's offset is lost too.
func TestOffsetFetchAllRequireStablePlacement(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	// A plain commit for t-1.
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Version, oc.Group, oc.Generation = 7, "g", -1
	ot := kmsg.NewOffsetCommitRequestTopic()
	ot.Topic = "t"
	op := kmsg.NewOffsetCommitRequestTopicPartition()
	op.Partition, op.Offset = 1, 7
	ot.Partitions = append(ot.Partitions, op)
	oc.Topics = append(oc.Topics, ot)
	if c := rc.roundTrip(oc).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("commit: %d", c)
	}
	// A pending transactional commit for t-0.
	id := "tx"
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = &id, 60000
	ipr := rc.roundTrip(ip).(*kmsg.InitProducerIDResponse)
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = id, ipr.ProducerID, ipr.ProducerEpoch, "g"
	if c := rc.roundTrip(ao).(*kmsg.AddOffsetsToTxnResponse).ErrorCode; c != 0 {
		t.Fatal(c)
	}
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.Version = 2
	tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch = id, "g", ipr.ProducerID, ipr.ProducerEpoch
	tt := kmsg.NewTxnOffsetCommitRequestTopic()
	tt.Topic = "t"
	tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	tp.Partition, tp.Offset = 0, 5
	tt.Partitions = append(tt.Partitions, tp)
	tc.Topics = append(tc.Topics, tt)
	if c := rc.roundTrip(tc).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatal(c)
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version, of.RequireStable = 8, true
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = "g" // Topics nil: all partitions
	of.Groups = append(of.Groups, g)
	resp := rc.roundTrip(of).(*kmsg.OffsetFetchResponse)
	rg := resp.Groups[0]
	var got []string
	for _, rt := range rg.Topics {
		for _, p := range rt.Partitions {
			got = append(got, fmt.Sprintf("%s-%d:%d/%d", rt.Topic, p.Partition, p.Offset, p.ErrorCode))
		}
	}
	if rg.ErrorCode != 0 {
		t.Fatalf("OffsetFetch(all, requireStable): group error %d, partitions %v; want group error 0 and t-1 offset 7 (any UNSTABLE_OFFSET_COMMIT per partition)", rg.ErrorCode, got)
	}
}

// TestOffsetFetchEmptyGroupID: Kafka serves OffsetFetch for the
// empty group id "for backwards compatibility" (GroupCoordinatorService
// fetchOffsets rejects only a null id; GroupCoordinator.isValidGroupId in
// 3.x allows "" for OFFSET_COMMIT/OFFSET_FETCH): the partition gets offset
// -1 and no error. idemlog answers INVALID_GROUP_ID, and at v1 (no
// top-level error field) an empty topic list.
func TestOffsetFetchEmptyGroupID(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	for _, v := range []int16{1, 5} {
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Version, of.Group = v, ""
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic, ft.Partitions = "t", []int32{0}
		of.Topics = append(of.Topics, ft)
		resp := rc.roundTrip(of).(*kmsg.OffsetFetchResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Offset != -1 {
			t.Errorf("v%d OffsetFetch for group \"\": error %d, topics %+v; want t-0 offset -1, no error", v, resp.ErrorCode, resp.Topics)
		}
	}
}
