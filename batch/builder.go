package batch

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// xerialBlockSize is the uncompressed block size of Java's
// SnappyOutputStream, which Kafka's Java producer uses.
const xerialBlockSize = 32 << 10

// Builder encodes records into a batch. Reset starts a batch, Append adds
// records, Build seals it. Buffers and compressors survive Reset, so a warm
// Builder allocates nothing for CodecNone. Not safe for concurrent use.
type Builder struct {
	codec         Codec
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	transactional bool
	// SnappyRaw makes snappy batches raw snappy blocks (as librdkafka and
	// franz-go write) instead of Java's xerial framing.
	SnappyRaw bool

	// buf is HeaderSize bytes of room for the header, then the records
	// uncompressed: a CodecNone batch is sealed in place, with no copy of
	// its records (runtime.memmove, this copy among others, was 6.9% of a
	// producer's samples syncing 100 x 1 KiB batches in bench/peers).
	buf    []byte
	out    []byte // a compressed batch being built
	built  int    // length of the batch the last Build sealed
	count  int32
	baseTs int64
	maxTs  int64

	// level is the compression level (SetLevel); the compressors were
	// made for zLevel, and are made again when it changes.
	level, zLevel int

	gz  *gzip.Writer
	lz  *lz4.Writer
	zs  *zstd.Encoder
	app appender
}

// SetLevel sets the compression level of the batches built from now on,
// on Kafka's scales (compression.gzip.level, compression.lz4.level,
// compression.zstd.level): gzip 1-9, lz4 1-17, zstd -131072-22. 0 means
// the codec's default (what Kafka's producers use); snappy has no levels.
// The level is kept across Reset.
func (b *Builder) SetLevel(level int) { b.level = level }

// lz4Level maps Kafka's lz4 levels (1-17, as lz4-java's high compressor
// takes them) onto the encoder's: Kafka's default, 9, and below are the
// fast encoder, as producers write.
func lz4Level(level int) lz4.CompressionLevel {
	switch {
	case level <= 9:
		return lz4.Fast
	case level <= 11:
		return lz4.Level5
	case level <= 14:
		return lz4.Level7
	default:
		return lz4.Level9
	}
}

// compressorsFor drops the compressors made for another level.
func (b *Builder) compressorsFor(level int) {
	if level != b.zLevel {
		b.gz, b.lz, b.zs, b.zLevel = nil, nil, nil, level
	}
}

// appender is an io.Writer that appends to a slice the Builder owns; the
// stream compressors write through it straight into the batch.
type appender struct{ b *[]byte }

func (a appender) Write(p []byte) (int, error) {
	*a.b = append(*a.b, p...)
	return len(p), nil
}

// NewBuilder returns a Builder for plain (non-idempotent) batches with codec.
func NewBuilder(codec Codec) *Builder {
	b := &Builder{}
	b.Reset(codec)
	return b
}

// Reset starts a new batch with codec and no producer. Slices returned by an
// earlier Build become invalid.
func (b *Builder) Reset(codec Codec) {
	b.codec = codec
	b.producerID, b.producerEpoch, b.baseSequence = NoProducerID, NoProducerEpoch, NoSequence
	b.transactional = false
	if cap(b.buf) < HeaderSize {
		b.buf = make([]byte, HeaderSize, 4096)
	}
	b.buf = b.buf[:HeaderSize]
	b.count = 0
}

// Clear drops the records appended since the last Reset, keeping the codec
// and compression level: a producer's Send clears the builder once its
// batch is written, so that records appended next are not sent again.
func (b *Builder) Clear() { b.Reset(b.codec) }

// records is the uncompressed records section.
func (b *Builder) records() []byte { return b.buf[HeaderSize:] }

// Built is the size of the batch the last Build sealed (0 before any):
// what a caller that handed the builder to something that builds (a
// producer's Send) appended.
func (b *Builder) Built() int { return b.built }

// SetProducer makes the batch idempotent: producer id, epoch and the
// sequence of its first record.
func (b *Builder) SetProducer(id int64, epoch int16, baseSequence int32) {
	b.producerID, b.producerEpoch, b.baseSequence = id, epoch, baseSequence
}

// SetTransactional sets the transactional attribute.
func (b *Builder) SetTransactional(t bool) { b.transactional = t }

// Count returns the number of records appended so far.
func (b *Builder) Count() int { return int(b.count) }

// Size returns the uncompressed size the batch would have now.
func (b *Builder) Size() int { return len(b.buf) }

// Append adds a record. A nil key or value is encoded as null, an empty
// non-nil one as empty.
func (b *Builder) Append(timestamp int64, key, value []byte, headers []Header) {
	if b.count == 0 {
		b.baseTs, b.maxTs = timestamp, timestamp
	}
	b.maxTs = max(b.maxTs, timestamp)
	b.appendRecord(timestamp-b.baseTs, b.count, key, value, headers)
}

// AppendAt adds a record with the offset and timestamp deltas given rather
// than counted from the batch's first record: for a batch rebuilt around
// its records' original offsets (compaction drops records and keeps the
// offsets of the others; a delete horizon takes the base timestamp's
// place). Build then writes a header as if the records were contiguous:
// the caller sets the header's last offset delta, timestamps and
// attributes on the result (and its CRC).
func (b *Builder) AppendAt(offsetDelta int32, tsDelta int64, key, value []byte, headers []Header) {
	b.appendRecord(tsDelta, offsetDelta, key, value, headers)
}

func (b *Builder) appendRecord(tsDelta int64, offsetDelta int32, key, value []byte, headers []Header) {
	body := 1 + varlongSize(tsDelta) + varintSize(offsetDelta) +
		bytesSize(key) + bytesSize(value) + varintSize(int32(len(headers)))
	for i := range headers {
		body += bytesSize(headers[i].Key) + bytesSize(headers[i].Value)
		if headers[i].Key == nil {
			// Header keys are never null on the wire; nil means empty.
			body += varintSize(0) - varintSize(-1)
		}
	}
	r := b.buf
	r = appendVarint(r, int32(body))
	r = append(r, 0)
	r = appendVarlong(r, tsDelta)
	r = appendVarint(r, offsetDelta)
	r = appendBytes(r, key)
	r = appendBytes(r, value)
	r = appendVarint(r, int32(len(headers)))
	for i := range headers {
		r = appendVarint(r, int32(len(headers[i].Key)))
		r = append(r, headers[i].Key...)
		r = appendBytes(r, headers[i].Value)
	}
	b.buf = r
	b.count++
}

func bytesSize(v []byte) int {
	if v == nil {
		return varintSize(-1)
	}
	return varintSize(int32(len(v))) + len(v)
}

func appendBytes(dst, v []byte) []byte {
	if v == nil {
		return appendVarint(dst, -1)
	}
	return append(appendVarint(dst, int32(len(v))), v...)
}

// Build seals the batch: header, compressed records, CRC. The base offset is
// 0 and the leader epoch -1, as a producer sends them. The result is valid
// until the next Reset or Build.
func (b *Builder) Build() (Batch, error) {
	if b.count == 0 {
		return nil, fmt.Errorf("cannot build batch: no records: %w", ErrBuild)
	}
	if n := len(b.buf) - HeaderSize; n > math.MaxInt32-HeaderSize {
		return nil, fmt.Errorf("cannot build batch: %d bytes of records: %w", n, ErrBuild)
	}
	var out []byte
	if b.codec == CodecNone {
		out = b.buf // sealed in place
	} else {
		out = append(b.out[:0], make([]byte, HeaderSize)...)
		b.compressorsFor(b.level)
		var err error
		switch b.codec {
		case CodecGzip:
			out, err = b.deflate(out)
		case CodecSnappy:
			out = b.snappy(out)
		case CodecLZ4:
			out, err = b.lz4(out)
		case CodecZstd:
			out, err = b.zstd(out)
		default:
			err = fmt.Errorf("cannot build batch: %v: %w", b.codec, ErrCodec)
		}
		if err != nil {
			return nil, err
		}
		b.out = out
	}
	b.built = len(out)
	attrs := uint16(b.codec)
	if b.transactional {
		attrs |= attrTransactional
	}
	putHeader(out, header{
		attrs: attrs, lastOffsetDelta: b.count - 1, baseTs: b.baseTs, maxTs: b.maxTs,
		producerID: b.producerID, producerEpoch: b.producerEpoch, baseSequence: b.baseSequence, count: b.count,
	})
	return Batch(out[:len(out):len(out)]), nil
}

type header struct {
	attrs           uint16
	lastOffsetDelta int32
	baseTs, maxTs   int64
	producerID      int64
	producerEpoch   int16
	baseSequence    int32
	count           int32
}

// putHeader fills the 61-byte header of out (whose records are in place) and
// its CRC.
func putHeader(out []byte, h header) {
	be := binary.BigEndian
	be.PutUint64(out[offBaseOffset:], 0)
	be.PutUint32(out[offBatchLength:], uint32(len(out)-LogOverhead))
	be.PutUint32(out[offLeaderEpoch:], math.MaxUint32) // -1: no leader epoch yet
	out[offMagic] = Magic
	be.PutUint16(out[offAttributes:], h.attrs)
	be.PutUint32(out[offLastOffsetDelt:], uint32(h.lastOffsetDelta))
	be.PutUint64(out[offBaseTimestamp:], uint64(h.baseTs))
	be.PutUint64(out[offMaxTimestamp:], uint64(h.maxTs))
	be.PutUint64(out[offProducerID:], uint64(h.producerID))
	be.PutUint16(out[offProducerEpoch:], uint16(h.producerEpoch))
	be.PutUint32(out[offBaseSequence:], uint32(h.baseSequence))
	be.PutUint32(out[offRecordsCount:], uint32(h.count))
	be.PutUint32(out[offCRC:], Batch(out).ComputeCRC())
}

func (b *Builder) deflate(out []byte) ([]byte, error) {
	b.app.b = &out
	if b.gz == nil {
		level := gzip.DefaultCompression
		if b.level >= gzip.BestSpeed && b.level <= gzip.BestCompression {
			level = b.level
		}
		gz, err := gzip.NewWriterLevel(b.app, level)
		if err != nil {
			return nil, fmt.Errorf("BUG: cannot create gzip writer: %w", err)
		}
		b.gz = gz
	} else {
		b.gz.Reset(b.app)
	}
	if _, err := b.gz.Write(b.records()); err != nil {
		return nil, fmt.Errorf("cannot gzip records: %w", err)
	}
	if err := b.gz.Close(); err != nil {
		return nil, fmt.Errorf("cannot gzip records: %w", err)
	}
	b.app.b = nil
	return out, nil
}

func (b *Builder) lz4(out []byte) ([]byte, error) {
	b.app.b = &out
	if b.lz == nil {
		b.lz = lz4.NewWriter(b.app)
		// Kafka's own LZ4 stream uses 64 KiB blocks; concurrency 1 keeps
		// the encoder on this goroutine.
		if err := b.lz.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ConcurrencyOption(1), lz4.CompressionLevelOption(lz4Level(b.level))); err != nil {
			return nil, fmt.Errorf("BUG: cannot configure lz4 writer: %w", err)
		}
	} else {
		b.lz.Reset(b.app)
	}
	if _, err := b.lz.Write(b.records()); err != nil {
		return nil, fmt.Errorf("cannot lz4 records: %w", err)
	}
	if err := b.lz.Close(); err != nil {
		return nil, fmt.Errorf("cannot lz4 records: %w", err)
	}
	b.app.b = nil
	return out, nil
}

func (b *Builder) zstd(out []byte) ([]byte, error) {
	if b.zs == nil {
		level := zstd.SpeedDefault
		if b.level != 0 {
			level = zstd.EncoderLevelFromZstd(b.level)
		}
		zs, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(level))
		if err != nil {
			return nil, fmt.Errorf("BUG: cannot create zstd encoder: %w", err)
		}
		b.zs = zs
	}
	return b.zs.EncodeAll(b.records(), out), nil
}

func (b *Builder) snappy(out []byte) []byte {
	if b.SnappyRaw {
		return appendSnappyBlock(out, b.records())
	}
	out = append(out, xerialMagic...)
	out = binary.BigEndian.AppendUint32(out, 1) // version
	out = binary.BigEndian.AppendUint32(out, 1) // minimum compatible version
	for src := b.records(); len(src) > 0; {
		chunk := src[:min(len(src), xerialBlockSize)]
		src = src[len(chunk):]
		lenAt := len(out)
		out = append(out, 0, 0, 0, 0)
		out = appendSnappyBlock(out, chunk)
		binary.BigEndian.PutUint32(out[lenAt:], uint32(len(out)-lenAt-4))
	}
	return out
}

func appendSnappyBlock(dst, src []byte) []byte {
	dst = grow(dst, s2.MaxEncodedLen(len(src)))
	enc := s2.EncodeSnappy(dst[len(dst):cap(dst)], src)
	return dst[:len(dst)+len(enc)]
}

// Marker describes a COMMIT or ABORT control batch.
type Marker struct {
	Type             ControlType
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Timestamp        int64
}

// controlBatchSize is the size of a COMMIT/ABORT batch: the header and one
// 17-byte record (length 16 + 1).
const controlBatchSize = HeaderSize + 17

// AppendMarker appends a COMMIT or ABORT control batch to dst: transactional,
// uncompressed, base sequence -1, one record with a 4-byte key (version 0,
// type) and a 6-byte value (version 0, coordinator epoch).
func AppendMarker(dst []byte, m Marker) []byte {
	start := len(dst)
	dst = grow(dst, controlBatchSize)[:start+HeaderSize]
	dst = append(dst, 0x20, 0, 0, 0, 0x08) // length 16, attributes, tsDelta 0, offsetDelta 0, keyLen 4
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(m.Type))
	dst = append(dst, 0x0c) // valueLen 6
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.CoordinatorEpoch))
	dst = append(dst, 0) // no headers
	putHeader(dst[start:], header{
		attrs: attrControl | attrTransactional, baseTs: m.Timestamp, maxTs: m.Timestamp,
		producerID: m.ProducerID, producerEpoch: m.ProducerEpoch, baseSequence: NoSequence, count: 1,
	})
	return dst
}
