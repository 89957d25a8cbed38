// Package errcode gives every idemlog sentinel error the Kafka error code a
// broker would answer with, so that an embedder (or the Kafka listener) can
// translate any error returned by the engine without a lookup table of its own.
//
// Each package declares its sentinels with New and wraps them with context
// ("cannot append batch: %w"); Code walks the wrap chain with errors.As, so a
// wrapped sentinel keeps its code and errors.Is keeps working against the
// sentinel itself.
package errcode

import "errors"

// Kafka error codes used by idemlog: the one table of them, so that every
// package (the engine, the Kafka listener, its group coordinator) names a
// code instead of writing its number. The numbers are Kafka's wire values
// (org.apache.kafka.common.protocol.Errors).
const (
	UnknownServerError           int16 = -1
	None                         int16 = 0
	OffsetOutOfRange             int16 = 1
	CorruptMessage               int16 = 2
	UnknownTopicOrPartition      int16 = 3
	MessageTooLarge              int16 = 10
	CoordinatorNotAvailable      int16 = 15
	InvalidTopicException        int16 = 17
	RecordListTooLarge           int16 = 18
	IllegalGeneration            int16 = 22
	InconsistentGroupProtocol    int16 = 23
	InvalidGroupID               int16 = 24
	UnknownMemberID              int16 = 25
	InvalidSessionTimeout        int16 = 26
	RebalanceInProgress          int16 = 27
	InvalidTimestamp             int16 = 32
	TopicAlreadyExists           int16 = 36
	InvalidPartitions            int16 = 37
	InvalidConfig                int16 = 40
	InvalidRequest               int16 = 42
	UnsupportedForMessageFormat  int16 = 43
	PolicyViolation              int16 = 44
	OutOfOrderSequenceNumber     int16 = 45
	InvalidProducerEpoch         int16 = 47
	InvalidTxnState              int16 = 48
	InvalidProducerIDMapping     int16 = 49
	InvalidTransactionTimeout    int16 = 50
	ConcurrentTransactions       int16 = 51
	TransactionCoordinatorFenced int16 = 52
	KafkaStorageError            int16 = 56
	NonEmptyGroup                int16 = 68
	GroupIDNotFound              int16 = 69
	UnsupportedCompressionType   int16 = 76
	MemberIDRequired             int16 = 79
	FencedInstanceID             int16 = 82
	InvalidRecord                int16 = 87
	UnstableOffsetCommit         int16 = 88
	ThrottlingQuotaExceeded      int16 = 89
	ProducerFenced               int16 = 90
)

// Sentinels that two layers answer with: the engine's offsets store and the
// Kafka listener's group coordinator both fence a commit by generation and
// member, and both refuse an empty group id. Declared once here, so that
// errors.Is matches whichever layer produced the error and neither imports
// the other for it.
var (
	// ErrIllegalGeneration: the generation is not the group's.
	ErrIllegalGeneration = New(IllegalGeneration, "illegal generation")
	// ErrUnknownMemberID: the member id is not in the group.
	ErrUnknownMemberID = New(UnknownMemberID, "unknown member id")
	// ErrInvalidGroupID: an empty group id.
	ErrInvalidGroupID = New(InvalidGroupID, "invalid group id")
	// ErrInvalidRequest: a request no conforming client sends.
	ErrInvalidRequest = New(InvalidRequest, "invalid request")
)

// Error is a sentinel error carrying its Kafka error code. Values are created
// once, at package init, and compared by identity.
type Error struct {
	code int16
	msg  string
}

// New returns a sentinel error with the given Kafka code and message.
func New(code int16, msg string) *Error { return &Error{code: code, msg: msg} }

func (e *Error) Error() string { return e.msg }

// KafkaCode returns the Kafka error code of the sentinel.
func (e *Error) KafkaCode() int16 { return e.code }

// Code returns the Kafka error code for err: None for nil, the code of the
// first sentinel in err's chain, and UnknownServerError for anything else
// (an I/O error that no sentinel wraps is, to a client, a server failure).
func Code(err error) int16 {
	if err == nil {
		return None
	}
	var e *Error
	if errors.As(err, &e) {
		return e.code
	}
	return UnknownServerError
}
