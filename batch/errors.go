package batch

import "github.com/idemlog/idemlog/errcode"

// Sentinel errors. Every error returned by this package wraps exactly one of
// them; errcode.Code maps each to the Kafka error code a broker would return.
var (
	// ErrTruncated: fewer bytes than the header or batchLength promise.
	ErrTruncated = errcode.New(errcode.CorruptMessage, "batch truncated")
	// ErrTooSmall: batchLength describes a batch shorter than the 61-byte header.
	ErrTooSmall = errcode.New(errcode.CorruptMessage, "batch smaller than its header")
	// ErrLengthMismatch: the buffer is longer than the batch its header describes.
	ErrLengthMismatch = errcode.New(errcode.CorruptMessage, "batch length does not match buffer")
	// ErrMagic: magic byte other than 2.
	ErrMagic = errcode.New(errcode.CorruptMessage, "unsupported batch magic")
	// ErrCRC: stored CRC-32C differs from the CRC of bytes [21, end).
	ErrCRC = errcode.New(errcode.CorruptMessage, "batch CRC mismatch")
	// ErrTooLarge: batch larger than the configured maximum batch size.
	ErrTooLarge = errcode.New(errcode.MessageTooLarge, "batch larger than the maximum batch size")
	// ErrCodec: compression codec outside 0..4.
	ErrCodec = errcode.New(errcode.UnsupportedCompressionType, "unknown compression codec")
	// ErrRecordCount: lastOffsetDelta+1 != recordsCount, or a negative count or delta.
	ErrRecordCount = errcode.New(errcode.InvalidRecord, "record count does not match last offset delta")
	// ErrControl: a control batch that is not transactional, compressed, or
	// whose single record is not a well-formed control record.
	ErrControl = errcode.New(errcode.InvalidRecord, "malformed control batch")
	// ErrRecord: a record that does not parse: bad varint, a length running
	// past its record, a negative header count, bytes left over.
	ErrRecord = errcode.New(errcode.CorruptMessage, "malformed record")
	// ErrOffsetDelta: a client batch's records do not carry offset deltas
	// 0, 1, 2, ... in order (Kafka's inner-offset check).
	ErrOffsetDelta = errcode.New(errcode.InvalidRecord, "record offset deltas out of order")
	// ErrDecompress: the compressed records section is not a valid stream.
	ErrDecompress = errcode.New(errcode.CorruptMessage, "cannot decompress records")
	// ErrInflateLimit: the records section claims or inflates to more bytes
	// than the Decoder's limit.
	ErrInflateLimit = errcode.New(errcode.InvalidRecord, "records inflate beyond the decompression limit")
	// ErrBaseOffset: a client append whose baseOffset is not 0.
	ErrBaseOffset = errcode.New(errcode.InvalidRecord, "client batch with non-zero base offset")
	// ErrClientControl: a client append of a control batch.
	ErrClientControl = errcode.New(errcode.InvalidRecord, "control batch from a client")
	// ErrSequence: a batch with a producer id but no base sequence.
	ErrSequence = errcode.New(errcode.InvalidRecord, "producer id without base sequence")
	// ErrEmpty: a client append with no records.
	ErrEmpty = errcode.New(errcode.InvalidRecord, "batch has no records")
	// ErrBuild: a Builder was asked for something it cannot encode.
	ErrBuild = errcode.New(errcode.InvalidRecord, "cannot build batch")
)
