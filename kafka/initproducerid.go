package kafka

// InitProducerId (key 22), versions 0-5: a producer id and epoch, fresh for
// an idempotent producer, stable with a bumped epoch for a transactional
// id (fencing older instances), KIP-360's expected id and epoch from v3.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

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
