package kafka

// AddPartitionsToTxn (key 24), versions 0-3: partitions added to a
// transactional id's ongoing transaction.

import (
	"github.com/idemlog/idemlog/engine"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// addPartitionsToTxn adds partitions to the ongoing transaction. Unknown
// partitions fail the request: they get UNKNOWN_TOPIC_OR_PARTITION and the
// others OPERATION_NOT_ATTEMPTED, as Kafka does.
func (s *Server) addPartitionsToTxn(r *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	var refs []engine.TopicPartition
	unknown := map[engine.TopicPartition]error{}
	for _, rt := range r.Topics {
		for _, p := range rt.Partitions {
			ref := engine.TopicPartition{Topic: rt.Topic, Partition: p}
			refs = append(refs, ref)
			if isInternal(rt.Topic) {
				// A client may not write the internal topics, nor put them
				// in a transaction: a COMMIT marker in
				// __transaction_state failed its next load, and the
				// engine's Open. (Kafka: TOPIC_AUTHORIZATION_FAILED.) AddOffsetsToTxn adds the offsets partition.
				unknown[ref] = errInternalTopicTxn
			} else if _, err := s.eng.Partition(rt.Topic, int(p)); err != nil {
				unknown[ref] = err
			}
		}
	}
	var err error
	switch {
	case r.TransactionalID == "":
		err = ErrInvalidTxnRequest // Kafka checks it first
	case len(unknown) == 0:
		err = s.coord.AddPartitions(r.TransactionalID, r.ProducerID, r.ProducerEpoch, refs, false)
	}
	for _, rt := range r.Topics {
		t := kmsg.NewAddPartitionsToTxnResponseTopic()
		t.Topic = rt.Topic
		for _, p := range rt.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition = p
			ref := engine.TopicPartition{Topic: rt.Topic, Partition: p}
			switch {
			case unknown[ref] != nil:
				rp.ErrorCode = s.code(kmsg.AddPartitionsToTxn, unknown[ref])
			case len(unknown) > 0:
				rp.ErrorCode = s.code(kmsg.AddPartitionsToTxn, ErrOperationNotAttempts)
			default:
				rp.ErrorCode = s.fencedCode(kmsg.AddPartitionsToTxn, r.Version, 2, err)
			}
			t.Partitions = append(t.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
