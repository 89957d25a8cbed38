package index

import "errors"

// Sentinel errors. They are wrapped with the index kind and path, so
// compare with errors.Is.
var (
	// ErrCorrupt means the file cannot be an index written under the rules
	// in the package doc. The index carries no checksum and is derived
	// data, so the caller deletes it and rebuilds it from the .log.
	ErrCorrupt = errors.New("corrupt index")

	// ErrFull means there is no slot left for a new entry; the partition
	// rolls a new segment. For the time index the last slot is reserved
	// for AppendFinal.
	ErrFull = errors.New("index full")

	// ErrOutOfOrder means the entry does not come after the last one, which
	// would break the binary search and the zero terminator.
	ErrOutOfOrder = errors.New("index entry out of order")

	// ErrRelativeOverflow means the offset is below the base or more than
	// MaxInt32 above it, or the position exceeds MaxInt32: the entry cannot
	// be stored in the 32-bit fields. The partition rolls a new segment.
	ErrRelativeOverflow = errors.New("offset or position does not fit in int32 relative to base")

	// ErrReadOnly means the index was opened with OpenOffsetReadOnly or
	// OpenTimeReadOnly and cannot be modified.
	ErrReadOnly = errors.New("index is read-only")

	// ErrClosed means the index was closed.
	ErrClosed = errors.New("index closed")

	// ErrInvalidArgument means a negative base offset, or a maximum size
	// that cannot hold a single entry or exceeds MaxInt32 bytes (Kafka's
	// segment.index.bytes is an int).
	ErrInvalidArgument = errors.New("invalid argument")
)
