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

// Kafka error codes used by idemlog. The numbers are Kafka's wire values.
const (
	UnknownServerError           int16 = -1
	None                         int16 = 0
	OffsetOutOfRange             int16 = 1
	CorruptMessage               int16 = 2
	UnknownTopicOrPartition      int16 = 3
	MessageTooLarge              int16 = 10
	RecordListTooLarge           int16 = 18
	InvalidTopicException        int16 = 17
	InvalidTimestamp             int16 = 32
	InvalidRequest               int16 = 42
	UnsupportedForMessageFormat  int16 = 43
	OutOfOrderSequenceNumber     int16 = 45
	InvalidProducerEpoch         int16 = 47
	InvalidTxnState              int16 = 48
	InvalidProducerIDMapping     int16 = 49
	InvalidTransactionTimeout    int16 = 50
	ConcurrentTransactions       int16 = 51
	TransactionCoordinatorFenced int16 = 52
	KafkaStorageError            int16 = 56
	UnsupportedCompressionType   int16 = 76
	InvalidRecord                int16 = 87
	UnstableOffsetCommit         int16 = 88
	ThrottlingQuotaExceeded      int16 = 89
	ProducerFenced               int16 = 90
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
