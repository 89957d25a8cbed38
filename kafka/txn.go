package kafka

// What the transactional APIs share (initproducerid.go,
// addpartitionstotxn.go, addoffsetstotxn.go, endtxn.go, txnoffsetcommit.go):
// their error codes per request version.

import (
	"errors"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/errcode"
	"github.com/twmb/franz-go/pkg/kerr"
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

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
