package kafka

// OffsetFetch (key 9), versions 1-9: a group's committed offsets, one group
// (v0-7) or many (v8+), with require_stable (v7+) answering
// UNSTABLE_OFFSET_COMMIT while a transaction's offsets are pending.

import (
	"errors"

	"github.com/idemlog/idemlog/engine"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchedOffset is one partition's answer to OffsetFetch.
type fetchedOffset struct {
	tp   engine.TopicPartition
	om   engine.OffsetAndMetadata
	code int16
}

// groupOffsets answers one group of an OffsetFetch. topics nil means all the
// group's committed partitions. With requireStable (KIP-447), a partition
// with a transactional commit still pending gets UNSTABLE_OFFSET_COMMIT,
// which the client retries until the transaction ends.
func (s *Server) groupOffsets(group string, topics map[string][]int32, all, requireStable bool) ([]fetchedOffset, int16) {
	var tps []engine.TopicPartition
	if !all {
		for t, ps := range topics {
			for _, p := range ps {
				tps = append(tps, engine.TopicPartition{Topic: t, Partition: p})
			}
		}
		if len(tps) == 0 {
			return nil, 0
		}
	}
	got, err := s.eng.Frontend().FetchOffsets(group, tps, false)
	if err != nil {
		return nil, s.code(kmsg.OffsetFetch, err)
	}
	// UNSTABLE_OFFSET_COMMIT goes on each partition with a pending
	// commit, never on the group, for a fetch of all partitions too (Kafka
	// 3.x ignores requireStable there; a group-level 88 left the client
	// with no offsets at all).
	out := make([]fetchedOffset, 0, len(got))
	for tp, om := range got {
		f := fetchedOffset{tp: tp, om: om}
		if requireStable {
			if _, err := s.eng.Frontend().FetchOffsets(group, []engine.TopicPartition{tp}, true); errors.Is(err, engine.ErrUnstableOffsetCommit) {
				f.code = s.code(kmsg.OffsetFetch, err)
				f.om.Offset = -1
			}
		}
		out = append(out, f)
	}
	return out, 0
}

func (s *Server) offsetFetch(r *kmsg.OffsetFetchRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	type req struct {
		group  string
		topics map[string][]int32
		all    bool
	}
	var reqs []req
	if r.Version < 8 {
		q := req{group: r.Group, topics: map[string][]int32{}, all: r.Topics == nil}
		for _, t := range r.Topics {
			q.topics[t.Topic] = append(q.topics[t.Topic], t.Partitions...)
		}
		reqs = append(reqs, q)
	} else {
		for _, g := range r.Groups {
			q := req{group: g.Group, topics: map[string][]int32{}, all: g.Topics == nil}
			for _, t := range g.Topics {
				q.topics[t.Topic] = append(q.topics[t.Topic], t.Partitions...)
			}
			reqs = append(reqs, q)
		}
	}
	for _, q := range reqs {
		got, code := s.groupOffsets(q.group, q.topics, q.all, r.RequireStable)
		byTopic := map[string][]fetchedOffset{}
		var order []string
		for _, f := range got {
			if _, ok := byTopic[f.tp.Topic]; !ok {
				order = append(order, f.tp.Topic)
			}
			byTopic[f.tp.Topic] = append(byTopic[f.tp.Topic], f)
		}
		if r.Version < 8 {
			resp.ErrorCode = code
			if code != 0 && r.Version < 2 {
				// v0 and v1 have no top-level error: Kafka puts it on
				// every requested partition. (Without this: it vanished.)
				for t, ps := range q.topics {
					order = append(order, t)
					for _, p := range ps {
						byTopic[t] = append(byTopic[t], fetchedOffset{tp: engine.TopicPartition{Topic: t, Partition: p},
							om: engine.OffsetAndMetadata{Offset: -1}, code: code})
					}
				}
			}
			for _, t := range order {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t
				for _, f := range byTopic[t] {
					p := kmsg.NewOffsetFetchResponseTopicPartition()
					p.Partition, p.Offset, p.LeaderEpoch, p.ErrorCode = f.tp.Partition, f.om.Offset, -1, f.code
					md := f.om.Metadata
					p.Metadata = &md
					rt.Partitions = append(rt.Partitions, p)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			continue
		}
		g := kmsg.NewOffsetFetchResponseGroup()
		g.Group, g.ErrorCode = q.group, code
		for _, t := range order {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic = t
			for _, f := range byTopic[t] {
				p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				p.Partition, p.Offset, p.LeaderEpoch, p.ErrorCode = f.tp.Partition, f.om.Offset, -1, f.code
				md := f.om.Metadata
				p.Metadata = &md
				rt.Partitions = append(rt.Partitions, p)
			}
			g.Topics = append(g.Topics, rt)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}
