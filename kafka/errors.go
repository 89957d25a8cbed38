package kafka

// The listener's own sentinel errors and the mapping of every error a
// response carries to its Kafka code.

import (
	"errors"
	"syscall"

	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/errcode"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Listener-side errors, with their Kafka codes.
var (
	ErrTopicAlreadyExists   = errcode.New(kerr.TopicAlreadyExists.Code, "topic already exists")
	ErrInvalidPartitions    = errcode.New(kerr.InvalidPartitions.Code, "invalid partition count")
	ErrInvalidReplication   = errcode.New(kerr.InvalidReplicationFactor.Code, "replication factor must be 1 (or -1)")
	ErrInvalidRequiredAcks  = errcode.New(kerr.InvalidRequiredAcks.Code, "acks must be -1, 0 or 1")
	ErrUnknownTopicID       = errcode.New(kerr.UnknownTopicID.Code, "unknown topic id")
	ErrOperationNotAttempts = errcode.New(kerr.OperationNotAttempted.Code, "operation not attempted")
	ErrInvalidRecord        = errcode.New(kerr.InvalidRecord.Code, "produce must carry exactly one record batch per partition")
	ErrInvalidTxnRequest    = errcode.New(kerr.InvalidRequest.Code, "invalid transactional request")
	// ErrOffsetMetadataTooLarge: a committed offset's metadata is longer
	// than Options.MaxOffsetMetadata (Kafka's offset.metadata.max.bytes).
	ErrOffsetMetadataTooLarge = errcode.New(kerr.OffsetMetadataTooLarge.Code, "offset metadata too large")
)

// errCode maps an error to its Kafka code. Every sentinel carries one
// (errcode); an engine that is closing answers like a broker that is
// shutting down, so clients retry elsewhere or later.
//
// A file-system error that no sentinel wraps (the engine's topic creation
// returns them as they come) is KAFKA_STORAGE_ERROR when it says the disk
// cannot take the write, as Kafka answers for a log directory that failed,
// not UNKNOWN_SERVER_ERROR, which tells the client nothing.
func errCode(err error) int16 {
	if errors.Is(err, engine.ErrClosed) {
		return kerr.NotLeaderForPartition.Code
	}
	c := errcode.Code(err)
	if c == errcode.UnknownServerError && isStorageFailure(err) {
		return errcode.KafkaStorageError
	}
	return c
}

// isStorageFailure reports whether err is the disk refusing: no space, no
// quota, an I/O error or a read-only file system.
func isStorageFailure(err error) bool {
	for _, e := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EROFS} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
