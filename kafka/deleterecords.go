package kafka

// DeleteRecords (key 21), versions 0-2: a partition's log start moved up to
// an offset (kafka-delete-records, kadm), answered with the new low
// watermark.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// deleteRecords answers DeleteRecords v0-2 (kafka-delete-records, kadm):
// each partition's log start moves up to the offset asked (-1: the high
// watermark), and the answer is the log start after it, the low
// watermark; -1 with an error (an offset above the high watermark is
// OFFSET_OUT_OF_RANGE, an internal topic INVALID_TOPIC_EXCEPTION).
func (s *Server) deleteRecords(r *kmsg.DeleteRecordsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range r.Topics {
		t := kmsg.NewDeleteRecordsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			out := kmsg.NewDeleteRecordsResponseTopicPartition()
			out.Partition, out.LowWatermark = rp.Partition, -1
			p, err := s.eng.Partition(rt.Topic, int(rp.Partition))
			if err == nil {
				var low int64
				if low, err = p.DeleteRecordsBefore(rp.Offset); err == nil {
					out.LowWatermark = low
					s.log.Info("deleted records", "topic", rt.Topic, "partition", rp.Partition, "log_start", low)
				}
			}
			out.ErrorCode = s.code(kmsg.DeleteRecords, err)
			t.Partitions = append(t.Partitions, out)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
