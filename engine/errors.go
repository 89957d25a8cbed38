package engine

import (
	"errors"

	"github.com/idemlog/idemlog/errcode"
)

// The engine's sentinel errors. Each carries the Kafka code a broker would
// answer with (errcode.Code); errors are returned wrapped ("cannot <verb>
// <thing>: %w"), so errors.Is matches the sentinel.
var (
	// ErrUnknownTopicOrPartition: no such topic or partition.
	ErrUnknownTopicOrPartition = errcode.New(errcode.UnknownTopicOrPartition, "unknown topic or partition")

	// ErrInvalidTopic: a topic name outside Kafka's rules.
	ErrInvalidTopic = errcode.New(errcode.InvalidTopicException, "invalid topic name")

	// ErrInvalidPartitions: a creation with fewer than one partition, or
	// Frontend.AddPartitions to no more partitions than the topic has (Kafka's
	// INVALID_PARTITIONS).
	ErrInvalidPartitions = errcode.New(errcode.InvalidPartitions, "invalid partition count")

	// ErrTopicAlreadyExists: Frontend.CreateTopic of a topic that exists.
	ErrTopicAlreadyExists = errcode.New(errcode.TopicAlreadyExists, "topic already exists")

	// ErrInternalTopic: an operation internal topics refuse (DeleteTopic). It
	// carries Kafka's INVALID_REQUEST (42), what a broker answers for a
	// request it will not apply to a topic whatever the caller's rights.
	ErrInternalTopic = errcode.New(errcode.InvalidRequest, "internal topic")

	// ErrClosed: the engine was closed.
	ErrClosed = errors.New("engine closed")

	// ErrDirLocked: another engine, in this process or another, has the data
	// dir open. Two engines on one dir would hand out the same producer ids and
	// write the same segments. (Without this: nothing stopped them.)
	ErrDirLocked = errors.New("data dir in use by another engine")

	// ErrInvalidConfigRequest: an alteration Kafka refuses as a malformed
	// request (INVALID_REQUEST, 42): a key named twice, an unknown operation.
	ErrInvalidConfigRequest = errcode.New(errcode.InvalidRequest, "invalid config alteration")

	// ErrResourceLimit: a creation of partitions (CreateTopic, a Kafka
	// CreateTopics or auto-creation, AddPartitions) that the machine or the
	// engine's configured limits cannot hold; nothing was created. It carries
	// Kafka's POLICY_VIOLATION (44), what a broker's creation policy answers,
	// and its message names the limit.
	ErrResourceLimit = errcode.New(errcode.PolicyViolation, "resource limit")

	// ErrNoKey: a record without a key for a compacted topic, which keeps
	// records by key (Kafka's INVALID_RECORD, "Compacted topic cannot accept
	// message without key").
	ErrNoKey = errcode.New(errcode.InvalidRecord, "compacted topic cannot accept a record without a key")

	// Errors of the transaction coordinator.
	ErrInvalidRequest            = errcode.ErrInvalidRequest
	ErrInvalidTransactionTimeout = errcode.New(errcode.InvalidTransactionTimeout, "invalid transaction timeout")
	ErrConcurrentTransactions    = errcode.New(errcode.ConcurrentTransactions, "concurrent transactions")
	ErrInvalidProducerIDMapping  = errcode.New(errcode.InvalidProducerIDMapping, "invalid producer id mapping")
	ErrProducerFenced            = errcode.New(errcode.ProducerFenced, "producer fenced")
	ErrInvalidTxnState           = errcode.New(errcode.InvalidTxnState, "invalid transaction state")

	// Errors of the offsets store.
	//
	// ErrUnstableOffsetCommit: FetchOffsets with requireStable while a
	// transactional commit of the group is pending on a requested partition.
	ErrUnstableOffsetCommit = errcode.New(errcode.UnstableOffsetCommit, "unstable offset commit")
	// ErrIllegalGeneration and ErrUnknownMemberID are the group fencing
	// errors of (Txn)OffsetCommit (KIP-447), for the group coordinator.
	ErrIllegalGeneration = errcode.ErrIllegalGeneration
	ErrUnknownMemberID   = errcode.ErrUnknownMemberID
	// ErrInvalidGroupID: an empty group id.
	ErrInvalidGroupID = errcode.ErrInvalidGroupID
	// ErrInvalidOffsetCommit: a malformed commit (negative producer id,
	// string longer than 32767 bytes).
	ErrInvalidOffsetCommit = errcode.New(errcode.InvalidRequest, "invalid offset commit")

	// ErrInvalidTimestamp: a record's timestamp outside the topic's bounds, or
	// a producer's batch claiming LogAppendTime on a LogAppendTime topic
	// (Kafka's INVALID_TIMESTAMP, 32).
	ErrInvalidTimestamp = errcode.New(errcode.InvalidTimestamp, "invalid timestamp")

	// ErrInvalidConfig: a topic config Kafka does not know, or a value Kafka
	// would refuse (INVALID_CONFIG, 40). The error's text is Kafka's message
	// (ConfigError).
	ErrInvalidConfig = errcode.New(errcode.InvalidConfig, "invalid topic config")

	// ErrCorruptMetadata: a metadata file of the data dir (partition.metadata,
	// producer-id-block, a __transaction_state record) that cannot be what
	// idemlog wrote. The storage is at fault, as Kafka's KAFKA_STORAGE_ERROR
	// says. (Without this: these errors matched no sentinel.)
	ErrCorruptMetadata = errcode.New(errcode.KafkaStorageError, "corrupt metadata")
)
