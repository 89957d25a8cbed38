package kafka

// ListOffsets (key 2), versions 1-6: the earliest (-2) and latest (-1)
// offsets of partitions, the latest being the last stable offset under
// read_committed, and the first offset at or after a timestamp.

import (
	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listOffsets answers the earliest (-2) and latest (-1) offsets, the
// latest being the last stable offset under read_committed, and the first
// offset at or after a timestamp.
func (s *Server) listOffsets(r *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	// A partition named twice is refused in every entry (Kafka's
	// duplicatePartitions).
	type tp struct {
		topic string
		part  int32
	}
	named := map[tp]int{}
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			named[tp{rt.Topic, rp.Partition}]++
		}
	}
	for _, rt := range r.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			out := kmsg.NewListOffsetsResponseTopicPartition()
			out.Partition = rp.Partition
			// The leader epoch is set only with an offset found; "not
			// found" and errors keep the default, -1, as Kafka's
			// buildErrorResponse. (Without this: 0 came with offset -1.)
			out.Timestamp, out.Offset, out.LeaderEpoch = -1, -1, -1
			if named[tp{rt.Topic, rp.Partition}] > 1 {
				out.ErrorCode = s.code(kmsg.ListOffsets, errDuplicatePartition)
				t.Partitions = append(t.Partitions, out)
				continue
			}
			p, err := s.eng.Partition(rt.Topic, int(rp.Partition))
			if err == nil && rp.CurrentLeaderEpoch > 0 {
				err = errLeaderEpochAhead
			}
			if err == nil {
				switch ts := rp.Timestamp; {
				case ts == -2:
					out.Offset = p.LogStartOffset()
				case ts == -1 && r.IsolationLevel == 1:
					out.Offset = p.LastStableOffset()
				case ts == -1:
					out.Offset = p.HighWatermark()
				case ts >= 0:
					out.Offset, out.Timestamp, err = offsetForTime(s.eng.Frontend(), p, ts, r.IsolationLevel == 1)
				default:
					err = newCodeErr(kerr.InvalidRequest.Code, "unsupported timestamp")
				}
			}
			if err == nil && out.Offset >= 0 {
				out.LeaderEpoch = 0
			}
			out.ErrorCode = s.code(kmsg.ListOffsets, err)
			t.Partitions = append(t.Partitions, out)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

var errDuplicatePartition = newCodeErr(kerr.InvalidRequest.Code, "partition named more than once")

// offsetForTime is Kafka's lookup by timestamp (LogSegment.findOffsetByTimestamp,
// Partition.fetchOffsetForTimestamp): the first record at or above the log
// start whose timestamp is at or after ts, with that timestamp, if it lies
// below the last fetchable offset (the high watermark, or the last stable
// offset under read_committed); (-1, -1) otherwise. The index finds the
// first batch whose max timestamp qualifies; the scan goes on from there,
// batch by batch (a batch's records need not be in time order, and records
// below the log start do not count). (Without this: it ignored both bounds.)
func offsetForTime(fe engine.Frontend, p *engine.Partition, ts int64, readCommitted bool) (int64, int64, error) {
	l := fe.Log(p)
	limit := l.HighWatermark()
	if readCommitted {
		limit = min(limit, p.LastStableOffset())
	}
	start := l.LogStartOffset()
	off, err := l.OffsetForTime(ts)
	if err != nil {
		return -1, -1, err
	}
	var d batch.Decoder
	var r batch.Record
	for off = max(off, start); off < limit; {
		c, err := p.Read(off, 1<<20) // a deleted partition's error as Kafka's (gone)
		if err != nil {
			return -1, -1, err
		}
		if len(c.Data) == 0 {
			c.Release()
			break
		}
		for data := c.Data; len(data) > 0; {
			n, err := batch.Size(data)
			if err != nil {
				c.Release()
				return -1, -1, err
			}
			b := batch.Batch(data[:n])
			data = data[n:]
			if b.BaseOffset() >= limit {
				c.Release()
				return -1, -1, nil
			}
			if b.MaxTimestamp() < ts {
				continue
			}
			recs, err := d.Records(b)
			if err != nil {
				c.Release()
				return -1, -1, err
			}
			for recs.Next(&r) {
				if r.Offset >= start && r.Timestamp >= ts {
					c.Release()
					if r.Offset >= limit {
						return -1, -1, nil
					}
					return r.Offset, r.Timestamp, nil
				}
			}
			if err := recs.Err(); err != nil {
				c.Release()
				return -1, -1, err
			}
		}
		off = c.NextOffset
		c.Release()
	}
	return -1, -1, nil
}
