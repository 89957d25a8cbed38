package batch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Header field offsets, in bytes from the start of the batch.
const (
	offBaseOffset     = 0
	offBatchLength    = 8
	offLeaderEpoch    = 12
	offMagic          = 16
	offCRC            = 17
	offAttributes     = 21
	offLastOffsetDelt = 23
	offBaseTimestamp  = 27
	offMaxTimestamp   = 35
	offProducerID     = 43
	offProducerEpoch  = 51
	offBaseSequence   = 53
	offRecordsCount   = 57

	// HeaderSize is the fixed size of a v2 batch header.
	HeaderSize = 61
	// LogOverhead is the part of the header that batchLength does not count.
	LogOverhead = 12
	// Magic is the only batch format idemlog reads or writes.
	Magic = 2
	// DefaultMaxBatchSize is Kafka's max.message.bytes default.
	DefaultMaxBatchSize = 1048588
)

// Attribute bits.
const (
	attrCodecMask       = 0x07
	attrLogAppendTime   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
	attrHasDeleteHorzon = 0x40
)

// Sentinels for absent producer fields.
const (
	NoProducerID    int64 = -1
	NoProducerEpoch int16 = -1
	NoSequence      int32 = -1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Batch is a view over the bytes of one record batch. Accessors read the
// header in place; they assume len(b) >= HeaderSize, which Parse and Validate
// establish.
type Batch []byte

// Codec is a compression codec, as stored in attribute bits 0-2.
type Codec int8

const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

var codecNames = [...]string{"none", "gzip", "snappy", "lz4", "zstd"}

func (c Codec) String() string {
	if c >= 0 && int(c) < len(codecNames) {
		return codecNames[c]
	}
	return fmt.Sprintf("codec(%d)", int8(c))
}

// ParseCodec returns the codec named s ("none", "gzip", ...).
func ParseCodec(s string) (Codec, error) {
	for i, n := range codecNames {
		if n == s {
			return Codec(i), nil
		}
	}
	return 0, fmt.Errorf("cannot parse codec %q: %w", s, ErrCodec)
}

// Size returns the total size of the batch that starts at b, as read from its
// length field, or an error if b is too short to hold the framing or the
// batch. It does not check anything else; it is how a reader walks a file of
// concatenated batches.
func Size(b []byte) (int, error) {
	if len(b) < offMagic+1 {
		return 0, fmt.Errorf("cannot frame batch: %d bytes left: %w", len(b), ErrTruncated)
	}
	n := int64(int32(binary.BigEndian.Uint32(b[offBatchLength:]))) + LogOverhead
	if n < HeaderSize {
		return 0, fmt.Errorf("cannot frame batch: size %d: %w", n, ErrTooSmall)
	}
	if n > int64(len(b)) {
		return 0, fmt.Errorf("cannot frame batch: size %d, %d bytes left: %w", n, len(b), ErrTruncated)
	}
	return int(n), nil
}

// Parse returns the batch at the start of b after checking its framing and
// magic only. The returned Batch is exactly as long as the batch.
func Parse(b []byte) (Batch, error) {
	n, err := Size(b)
	if err != nil {
		return nil, err
	}
	if b[offMagic] != Magic {
		return nil, fmt.Errorf("cannot parse batch: magic %d: %w", int8(b[offMagic]), ErrMagic)
	}
	return Batch(b[:n:n]), nil
}

func (b Batch) BaseOffset() int64  { return int64(binary.BigEndian.Uint64(b[offBaseOffset:])) }
func (b Batch) BatchLength() int32 { return int32(binary.BigEndian.Uint32(b[offBatchLength:])) }
func (b Batch) PartitionLeaderEpoch() int32 {
	return int32(binary.BigEndian.Uint32(b[offLeaderEpoch:]))
}
func (b Batch) Magic() int8       { return int8(b[offMagic]) }
func (b Batch) CRC() uint32       { return binary.BigEndian.Uint32(b[offCRC:]) }
func (b Batch) Attributes() int16 { return int16(binary.BigEndian.Uint16(b[offAttributes:])) }
func (b Batch) LastOffsetDelta() int32 {
	return int32(binary.BigEndian.Uint32(b[offLastOffsetDelt:]))
}
func (b Batch) BaseTimestamp() int64 { return int64(binary.BigEndian.Uint64(b[offBaseTimestamp:])) }
func (b Batch) MaxTimestamp() int64  { return int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])) }
func (b Batch) ProducerID() int64    { return int64(binary.BigEndian.Uint64(b[offProducerID:])) }
func (b Batch) ProducerEpoch() int16 { return int16(binary.BigEndian.Uint16(b[offProducerEpoch:])) }
func (b Batch) BaseSequence() int32  { return int32(binary.BigEndian.Uint32(b[offBaseSequence:])) }
func (b Batch) RecordsCount() int32  { return int32(binary.BigEndian.Uint32(b[offRecordsCount:])) }

// Codec returns the compression codec (it may be out of range on an
// unvalidated batch).
func (b Batch) Codec() Codec          { return Codec(b[offAttributes+1] & attrCodecMask) }
func (b Batch) LogAppendTime() bool   { return b[offAttributes+1]&attrLogAppendTime != 0 }
func (b Batch) IsTransactional() bool { return b[offAttributes+1]&attrTransactional != 0 }
func (b Batch) IsControl() bool       { return b[offAttributes+1]&attrControl != 0 }
func (b Batch) HasDeleteHorizon() bool {
	return b[offAttributes+1]&attrHasDeleteHorzon != 0
}

// HasProducerID reports whether the batch belongs to an idempotent or
// transactional producer.
func (b Batch) HasProducerID() bool { return b.ProducerID() >= 0 }

// LastOffset is the offset of the batch's last record.
func (b Batch) LastOffset() int64 { return b.BaseOffset() + int64(b.LastOffsetDelta()) }

// NextOffset is the offset after the batch.
func (b Batch) NextOffset() int64 { return b.LastOffset() + 1 }

// LastSequence is the sequence of the last record, wrapping past MaxInt32.
func (b Batch) LastSequence() int32 { return LastSequence(b.BaseSequence(), b.LastOffsetDelta()) }

// Records returns the (possibly compressed) records section.
func (b Batch) Records() []byte { return b[HeaderSize:] }

// SetBaseOffset stamps the base offset in place. The CRC does not cover it.
func (b Batch) SetBaseOffset(off int64) { binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(off)) }

// SetCreateTime makes the batch a CreateTime batch whose max timestamp is
// ts (Kafka's setMaxTimestamp(CREATE_TIME, ts)) and reseals the CRC, which
// covers both.
func (b Batch) SetCreateTime(ts int64) {
	b[offAttributes+1] &^= attrLogAppendTime
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(b[offCRC:], b.ComputeCRC())
}

// SetLogAppendTime marks the batch LogAppendTime with ts as its
// maxTimestamp, the time readers give each of its records, and reseals the
// CRC: what a broker does to a batch of a LogAppendTime topic. The records
// are left as they are.
func (b Batch) SetLogAppendTime(ts int64) {
	b[offAttributes+1] |= attrLogAppendTime
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(b[offCRC:], b.ComputeCRC())
}

// SetPartitionLeaderEpoch stamps the leader epoch in place. The CRC does not cover it.
func (b Batch) SetPartitionLeaderEpoch(e int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(e))
}

// ComputeCRC returns the CRC-32C of bytes [21, end).
func (b Batch) ComputeCRC() uint32 { return crc32.Checksum(b[offAttributes:], castagnoli) }

// LastSequence returns base+delta with Kafka's wrap at MaxInt32: sequences run
// 0..MaxInt32 and then start again at 0. A base of NoSequence stays NoSequence.
func LastSequence(base, delta int32) int32 {
	if base == NoSequence {
		return NoSequence
	}
	if base > math.MaxInt32-delta {
		return delta - (math.MaxInt32 - base) - 1
	}
	return base + delta
}

// FirstSequence inverts LastSequence.
func FirstSequence(last, delta int32) int32 {
	if last == NoSequence {
		return NoSequence
	}
	if last < delta {
		return math.MaxInt32 - (delta - last) + 1
	}
	return last - delta
}

// NextSequence is the sequence that follows seq.
func NextSequence(seq int32) int32 {
	if seq == math.MaxInt32 {
		return 0
	}
	return seq + 1
}
