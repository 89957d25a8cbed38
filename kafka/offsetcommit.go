package kafka

// OffsetCommit (key 8), versions 2-9: a group's offsets stored at once, the
// committer fenced by generation and member id (or KIP-345's instance id).

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
