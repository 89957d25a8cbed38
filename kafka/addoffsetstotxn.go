package kafka

// AddOffsetsToTxn (key 25), versions 0-4: a group's offsets partition added
// to a transactional id's ongoing transaction.

import (
	"github.com/idemlog/idemlog/engine"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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
