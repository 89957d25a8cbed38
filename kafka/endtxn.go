package kafka

// EndTxn (key 26), versions 0-4: a transaction committed or aborted, its
// decision made durable before the markers go to its partitions.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

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
