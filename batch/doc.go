// Package batch reads, validates and builds Kafka record batches (magic 2),
// the unit idemlog stores byte for byte.
//
// # Layout
//
// A batch is a 61-byte header followed by the records section. All integers
// are big-endian. Bytes [0, 12) frame the batch, [12, 21) are owned by the
// partition leader and lie outside the CRC, and the CRC-32C at 17 covers
// [21, end):
//
//	 0               8       12      16 17      21   23      27
//	+---------------+-------+-------+--+-------+----+-------+
//	| baseOffset    |batchLn|leaderE|mg| crc32c|attr|lastODt|
//	+---------------+-------+-------+--+-------+----+-------+
//	27              35              43              51   53      57      61
//	+---------------+---------------+---------------+----+-------+-------+---
//	| baseTimestamp | maxTimestamp  | producerId    |epch|baseSeq|count  |records...
//	+---------------+---------------+---------------+----+-------+-------+---
//
// batchLength counts the bytes after itself, so a batch occupies
// 12+batchLength bytes. Attributes bits 0-2 hold the codec, bit 3 the
// timestamp type, bit 4 transactional, bit 5 control, bit 6 delete horizon.
// When the codec is not none, the records section is a single compressed
// stream of the concatenated records.
//
// A record is a varint length followed by that many bytes:
//
//	attributes int8 | timestampDelta varlong | offsetDelta varint |
//	keyLen varint | key | valueLen varint | value | headerCount varint |
//	headers: (keyLen varint | key | valueLen varint | value)*
//
// Varints are zig-zag encoded; a length of -1 is null (keys and values may be
// null, header keys may not).
//
// # Basics
//
// A Batch is a view over a []byte: no field is copied out until asked for, and
// stamping the base offset or leader epoch writes in place without touching the
// CRC, which does not cover them. Validate checks what any stored batch must
// satisfy; ValidateProduce adds the rules a broker applies to a client append.
// A Decoder iterates records, decompressing into a buffer it reuses, and
// refuses any batch that claims or inflates to more than its limit. A Builder
// produces batches with any codec, reusing its buffers and encoders.
//
// # Caveats
//
// Slices returned by a Decoder (keys, values, headers) point into the batch or
// into the Decoder's buffer and are valid only until the next call on that
// Decoder. Slices returned by a Builder are valid until its next Reset. Neither
// type is safe for concurrent use; keep one per goroutine.
package batch
