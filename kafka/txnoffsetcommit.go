package kafka

// TxnOffsetCommit (key 28), versions 0-4: a transaction's offsets, pending
// until it ends, the committer fenced like a plain commit from v3
// (KIP-447).

import (
	"errors"
	"math"

	"github.com/idemlog/idemlog/engine"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnOffsetCommit writes a transaction's offsets, pending until its end.
// From v3 the group fences the committing member like a plain commit does
// (KIP-447), so a producer that lost its partitions in a rebalance cannot
// commit their offsets.
func (s *Server) txnOffsetCommit(r *kmsg.TxnOffsetCommitRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	// Partitions the engine does not have answer UNKNOWN_TOPIC_OR_PARTITION
	// and are not committed, as offsetCommit and Kafka's
	// handleTxnOffsetCommitRequest do.
	offsets := map[engine.TopicPartition]engine.OffsetAndMetadata{}
	unknown := map[engine.TopicPartition]error{}
	for _, rt := range r.Topics {
		for _, p := range rt.Partitions {
			s.admitOffset(offsets, unknown, rt.Topic, p.Partition, p.Offset, p.Metadata)
		}
	}
	write := func() error {
		if len(offsets) == 0 {
			return nil
		}
		return s.coord.TxnCommitOffsets(r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch, offsets)
	}
	var err error
	if r.Version >= 3 {
		// The write runs under the group's lock, after its check.
		err = s.groups.Commit(r.Group, r.Generation, r.MemberID, r.InstanceID, true, write)
	} else {
		err = write()
	}
	// A verification refusal of a fenced producer answers
	// INVALID_PRODUCER_EPOCH, as KIP-890's verification maps it for every
	// version (spec 3.10; older clients do not know PRODUCER_FENCED at
	// all).
	code := s.fencedCode(kmsg.TxnOffsetCommit, r.Version, math.MaxInt16, err)
	for _, rt := range r.Topics {
		t := kmsg.NewTxnOffsetCommitResponseTopic()
		t.Topic = rt.Topic
		for _, p := range rt.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			if uerr := unknown[engine.TopicPartition{Topic: rt.Topic, Partition: p.Partition}]; uerr != nil && (err == nil || errors.Is(uerr, engine.ErrUnknownTopicOrPartition)) {
				rp.ErrorCode = s.code(kmsg.TxnOffsetCommit, uerr)
			}
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
