package kafka

import (
	"errors"
	"github.com/twmb/franz-go/pkg/kerr"
	"math"
	"time"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/errcode"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newCodeErr(code int16, msg string) error { return errcode.New(code, msg) }

// errInternalTopicTxn: AddPartitionsToTxn of an internal topic's partition.
var errInternalTopicTxn = newCodeErr(kerr.TopicAuthorizationFailed.Code, "internal topics cannot join a client's transaction")

// fencedCode is a coordinator error's code for a request version: clients
// older than PRODUCER_FENCED (InitProducerId < v4; AddPartitions,
// AddOffsets and EndTxn < v2) know it as INVALID_PRODUCER_EPOCH.
func (s *Server) fencedCode(key kmsg.Key, version, firstFenced int16, err error) int16 {
	if version < firstFenced && errors.Is(err, engine.ErrProducerFenced) {
		err = errInvalidProducerEpoch
	}
	return s.code(key, err)
}

// initProducerID: no transactional id gives a fresh producer id at epoch 0
// (Kafka ignores an expected id and epoch there); a transactional id gets
// its stable id with a bumped epoch, fencing older instances and aborting
// their open transaction, with KIP-360's expected (id, epoch) from v3.
func (s *Server) initProducerID(r *kmsg.InitProducerIDRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	var pid int64
	var epoch int16
	var err error
	switch {
	case r.Version >= 3 && (r.ProducerID == -1) != (r.ProducerEpoch == -1):
		// Half of KIP-360's expected pair: Kafka answers INVALID_REQUEST.
		// (Without this: (pid, -1) was taken as a retry and handed out the
		// live producer's epoch without fencing anything.)
		err = ErrInvalidTxnRequest
	case r.TransactionalID == nil:
		pid, epoch, err = s.eng.Frontend().InitProducerID()
	case *r.TransactionalID == "":
		err = ErrInvalidTxnRequest
	default:
		timeout := time.Duration(r.TransactionTimeoutMillis) * time.Millisecond
		if r.Version >= 3 && r.ProducerID >= 0 {
			pid, epoch, err = s.coord.InitProducerIDExpected(*r.TransactionalID, timeout, r.ProducerID, r.ProducerEpoch)
		} else {
			pid, epoch, err = s.coord.InitProducerID(*r.TransactionalID, timeout)
		}
	}
	if err != nil {
		pid, epoch = -1, -1
		resp.ErrorCode = s.fencedCode(kmsg.InitProducerID, r.Version, 4, err)
	}
	resp.ProducerID, resp.ProducerEpoch = pid, epoch
	return resp
}

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

// addOffsetsToTxn adds the group's consumer-offsets partition to the
// transaction, so the commit's markers reach its pending offsets.
func (s *Server) addOffsetsToTxn(r *kmsg.AddOffsetsToTxnRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if r.TransactionalID == "" {
		resp.ErrorCode = s.code(kmsg.AddOffsetsToTxn, ErrInvalidTxnRequest)
		return resp
	}
	ref, err := s.eng.Frontend().OffsetsPartition(r.Group)
	if err == nil {
		err = s.coord.AddPartitions(r.TransactionalID, r.ProducerID, r.ProducerEpoch, []engine.TopicPartition{ref}, false)
	}
	resp.ErrorCode = s.fencedCode(kmsg.AddOffsetsToTxn, r.Version, 2, err)
	return resp
}

// endTxn commits or aborts: the decision is made durable, then markers go
// to every partition of the transaction (and the group's pending offsets
// become current or are dropped). The fetches parked on those partitions
// wake at the markers' appends, as the last stable offset moves.
func (s *Server) endTxn(r *kmsg.EndTxnRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	if r.TransactionalID == "" {
		resp.ErrorCode = s.code(kmsg.EndTxn, ErrInvalidTxnRequest)
		return resp
	}
	_, _, err := s.coord.EndTxn(r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit)
	resp.ErrorCode = s.fencedCode(kmsg.EndTxn, r.Version, 2, err)
	return resp
}

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

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
