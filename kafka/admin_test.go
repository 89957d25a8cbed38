package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDeleteRecords: the log start moves to the offset asked (-1: the high
// watermark) and the answer is the new low watermark; above the high
// watermark OFFSET_OUT_OF_RANGE, an unknown partition
// UNKNOWN_TOPIC_OR_PARTITION, an internal topic INVALID_TOPIC_EXCEPTION,
// each with low watermark -1; a read below the new start is out of range.
func TestDeleteRecords(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopic("t", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.eng.OffsetGroups(); err != nil { // creates __consumer_offsets
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	for p := int32(0); p < 2; p++ {
		if codes := review10Codes(t, rc, produceReq("t", map[int32][]byte{p: buildBatch(t, -1, 0, 0, 5)})); codes[p] != 0 {
			t.Fatalf("produce: %v", codes)
		}
	}
	req := kmsg.NewPtrDeleteRecordsRequest()
	add := func(topic string, offsets map[int32]int64) {
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = topic
		for p, off := range offsets {
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Partition, rp.Offset = p, off
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	add("t", map[int32]int64{0: 3})
	add("t", map[int32]int64{1: -1})
	add("t", map[int32]int64{7: 1})
	add("__consumer_offsets", map[int32]int64{0: 0})
	resp := rc.roundTrip(req).(*kmsg.DeleteRecordsResponse)
	got := map[string][2]int64{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			got[rt.Topic+"/"+string(rune('0'+p.Partition))] = [2]int64{int64(p.ErrorCode), p.LowWatermark}
		}
	}
	want := map[string][2]int64{
		"t/0":                  {0, 3},
		"t/1":                  {0, 5},
		"t/7":                  {int64(kerr.UnknownTopicOrPartition.Code), -1},
		"__consumer_offsets/0": {int64(kerr.InvalidTopicException.Code), -1},
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: code, low watermark = %v, want %v", k, got[k], w)
		}
	}
	p0, _ := ts.eng.Partition("t", 0)
	if s := p0.Log().LogStartOffset(); s != 3 {
		t.Fatalf("log start %d, want 3", s)
	}
	req = kmsg.NewPtrDeleteRecordsRequest()
	add("t", map[int32]int64{0: 6})
	resp = rc.roundTrip(req).(*kmsg.DeleteRecordsResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LowWatermark != -1 {
		t.Fatalf("delete above the high watermark: code %d, low %d", p.ErrorCode, p.LowWatermark)
	}
}

// TestCreatePartitions: the count rises (engine.TestAddPartitions checks
// the new partitions' configs); not above the current count INVALID_PARTITIONS; an
// unknown topic UNKNOWN_TOPIC_OR_PARTITION; an assignment to another node
// INVALID_REPLICA_ASSIGNMENT; a topic named twice INVALID_REQUEST; an
// internal topic refused; ValidateOnly changes nothing.
func TestCreatePartitions(t *testing.T) {
	ts := startServer(t, Options{})
	if err := ts.eng.CreateTopicWithConfig("t", 1, map[string]string{"retention.ms": "60000"}); err != nil {
		t.Fatal(err)
	}
	if err := ts.eng.CreateTopic("u", 1); err != nil {
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	create := func(validate bool, topics ...kmsg.CreatePartitionsRequestTopic) map[string]int16 {
		t.Helper()
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.Topics, req.ValidateOnly = topics, validate
		out := map[string]int16{}
		for _, rt := range rc.roundTrip(req).(*kmsg.CreatePartitionsResponse).Topics {
			out[rt.Topic] = rt.ErrorCode
		}
		return out
	}
	topic := func(name string, count int32, nodes ...int32) kmsg.CreatePartitionsRequestTopic {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = name, count
		for _, n := range nodes {
			a := kmsg.NewCreatePartitionsRequestTopicAssignment()
			a.Replicas = []int32{n}
			rt.Assignment = append(rt.Assignment, a)
		}
		return rt
	}
	if codes := create(true, topic("t", 3)); codes["t"] != 0 || ts.eng.Topics()["t"] != 1 {
		t.Fatalf("validate only: %v, %d partitions", codes, ts.eng.Topics()["t"])
	}
	codes := create(false, topic("t", 3, 0, 0), topic("u", 1), topic("nope", 2), topic("__consumer_offsets", 60))
	if codes["t"] != 0 || codes["u"] != kerr.InvalidPartitions.Code || codes["nope"] != kerr.UnknownTopicOrPartition.Code ||
		codes["__consumer_offsets"] == 0 {
		t.Fatalf("codes %v", codes)
	}
	if n := ts.eng.Topics()["t"]; n != 3 {
		t.Fatalf("t has %d partitions, want 3", n)
	}
	if _, err := ts.eng.Partition("t", 2); err != nil {
		t.Fatal(err)
	}
	if codes := create(false, topic("u", 2, 5)); codes["u"] != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("assignment to node 5: %v", codes)
	}
	if codes := create(false, topic("u", 2), topic("u", 3)); codes["u"] != kerr.InvalidRequest.Code || ts.eng.Topics()["u"] != 1 {
		t.Fatalf("duplicate: %v, %d partitions", codes, ts.eng.Topics()["u"])
	}
}
