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
	if _, err := ts.eng.Frontend().OffsetGroups(); err != nil { // creates __consumer_offsets
		t.Fatal(err)
	}
	rc := dial(t, ts.addr)
	for p := int32(0); p < 2; p++ {
		if codes := produceCodes(t, rc, produceReq("t", map[int32][]byte{p: buildBatch(t, -1, 0, 0, 5)})); codes[p] != 0 {
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
	if s := p0.LogStartOffset(); s != 3 {
		t.Fatalf("log start %d, want 3", s)
	}
	req = kmsg.NewPtrDeleteRecordsRequest()
	add("t", map[int32]int64{0: 6})
	resp = rc.roundTrip(req).(*kmsg.DeleteRecordsResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LowWatermark != -1 {
		t.Fatalf("delete above the high watermark: code %d, low %d", p.ErrorCode, p.LowWatermark)
	}
}
