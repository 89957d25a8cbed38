package kafka

import (
	"errors"
	"fmt"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/kafka/group"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetCommit stores a group's offsets at once (no transaction). A member
// must be current (generation and member id, KIP-345's instance id); a
// commit with generation -1 and no member id is a standalone consumer's,
// accepted only while the group has no members.
func (s *Server) offsetCommit(r *kmsg.OffsetCommitRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	offsets := map[engine.TopicPartition]engine.OffsetAndMetadata{}
	unknown := map[engine.TopicPartition]error{}
	for _, rt := range r.Topics {
		for _, p := range rt.Partitions {
			s.admitOffset(offsets, unknown, rt.Topic, p.Partition, p.Offset, p.Metadata)
		}
	}
	// The write runs under the group's lock, after its check (Commit).
	err := s.groups.Commit(r.Group, r.Generation, r.MemberID, r.InstanceID, false, func() error {
		if len(offsets) == 0 {
			return nil
		}
		return s.eng.Frontend().CommitOffsets(r.Group, offsets)
	})
	if r.Version >= 9 && errors.Is(err, group.ErrGroupIDNotFound) {
		// Kafka 3.x+ answers a member commit to a group it does not know
		// with GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION before.
		err = group.ErrGroupIDNotFound
	}
	code := s.code(kmsg.OffsetCommit, err)
	for _, rt := range r.Topics {
		t := kmsg.NewOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		for _, p := range rt.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			if uerr := unknown[engine.TopicPartition{Topic: rt.Topic, Partition: p.Partition}]; uerr != nil && (err == nil || errors.Is(uerr, engine.ErrUnknownTopicOrPartition)) {
				rp.ErrorCode = s.code(kmsg.OffsetCommit, uerr)
			}
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

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

// admitOffset sorts one partition of an offset commit: into unknown with
// its error if the engine does not have the partition (as Kafka answers
// UNKNOWN_TOPIC_OR_PARTITION there, whatever the group's answer: its API
// layer filters those before the group coordinator sees the request) or
// its metadata is over MaxOffsetMetadata (OFFSET_METADATA_TOO_LARGE, that
// partition only, as Kafka's offset.metadata.max.bytes, once the group's
// check passed), else into offsets.
func (s *Server) admitOffset(offsets map[engine.TopicPartition]engine.OffsetAndMetadata, unknown map[engine.TopicPartition]error,
	topic string, partition int32, offset int64, metadata *string) {
	tp := engine.TopicPartition{Topic: topic, Partition: partition}
	if _, err := s.eng.Partition(topic, int(partition)); err != nil {
		unknown[tp] = err
		return
	}
	md := deref(metadata)
	if len(md) > s.opts.MaxOffsetMetadata {
		unknown[tp] = fmt.Errorf("cannot commit %s-%d: metadata of %d bytes (max %d): %w", topic, partition, len(md), s.opts.MaxOffsetMetadata, ErrOffsetMetadataTooLarge)
		return
	}
	offsets[tp] = engine.OffsetAndMetadata{Offset: offset, Metadata: md}
}
