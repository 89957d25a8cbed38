package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// DefaultInflateLimit bounds the decompressed records section of one batch
// when a Decoder has no limit of its own. Kafka's default max.message.bytes is
// 1 MiB compressed; 64 MiB leaves room for a 64x ratio and no more.
const DefaultInflateLimit = 64 << 20

// xerialMagic opens the snappy framing that Java clients write
// (org.xerial.snappy.SnappyOutputStream): 8 magic bytes, then int32 version
// and int32 minimum compatible version, then blocks of int32 length + raw
// snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

// Decoder iterates the records of batches, decompressing into a buffer it
// keeps between calls. The zero value is ready to use with
// DefaultInflateLimit. A Decoder is not safe for concurrent use.
type Decoder struct {
	// Limit is the most bytes a records section may inflate to; 0 means
	// DefaultInflateLimit. Set it before the first call.
	Limit int

	buf  []byte
	src  bytes.Reader
	gz   *gzip.Reader
	lz   *lz4.Reader
	zd   *zstd.Decoder
	zlim int // the limit zd was built with
}

func (d *Decoder) limit() int {
	if d != nil && d.Limit > 0 {
		return d.Limit
	}
	return DefaultInflateLimit
}

// Records returns an iterator over b's records. For uncompressed batches the
// records alias b; otherwise they alias the Decoder's buffer, which the next
// call reuses. b must have passed Parse or Validate.
func (d *Decoder) Records(b Batch) (Records, error) {
	count := b.RecordsCount()
	if count < 0 {
		return Records{}, fmt.Errorf("cannot read records: count %d: %w", count, ErrRecordCount)
	}
	// A record takes at least minRecordSize bytes, so the header's count is
	// checked against the limit before any byte is inflated.
	// (An uncompressed section does not inflate: its length, checked
	// against its count, bounds it. Without this: a batch over the inflate
	// limit was refused on a topic allowing it.)
	if b.Codec() != CodecNone && int64(count)*minRecordSize > int64(d.limit()) {
		return Records{}, fmt.Errorf("cannot read records: %d records claimed: %w", count, ErrInflateLimit)
	}
	data := b.Records()
	if codec := b.Codec(); codec != CodecNone {
		var err error
		if data, err = d.Decompress(codec, data); err != nil {
			return Records{}, err
		}
	}
	return Records{
		data:          data,
		left:          count,
		baseOffset:    b.BaseOffset(),
		baseTimestamp: b.BaseTimestamp(),
		appendTime:    b.MaxTimestamp(),
		logAppendTime: b.LogAppendTime(),
	}, nil
}

// Decompress inflates a records section written with codec into the
// Decoder's buffer and returns it. The result is valid until the next call.
func (d *Decoder) Decompress(codec Codec, src []byte) ([]byte, error) {
	var (
		out []byte
		err error
	)
	switch codec {
	case CodecNone:
		return src, nil
	case CodecGzip:
		out, err = d.gunzip(src)
	case CodecSnappy:
		out, err = d.unsnappy(src)
	case CodecLZ4:
		out, err = d.unlz4(src)
	case CodecZstd:
		out, err = d.unzstd(src)
	default:
		return nil, fmt.Errorf("cannot decompress records: %v: %w", codec, ErrCodec)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot decompress %v records: %w", codec, err)
	}
	return out, nil
}

func (d *Decoder) gunzip(src []byte) ([]byte, error) {
	d.src.Reset(src)
	if d.gz == nil {
		gz, err := gzip.NewReader(&d.src)
		if err != nil {
			return nil, errors.Join(ErrDecompress, err)
		}
		d.gz = gz
	} else if err := d.gz.Reset(&d.src); err != nil {
		return nil, errors.Join(ErrDecompress, err)
	}
	return d.readAll(d.gz)
}

func (d *Decoder) unlz4(src []byte) ([]byte, error) {
	n, err := kafkaLZ4Frame(src)
	if err != nil {
		return nil, err
	}
	// Only the first frame, as Kafka reads it. The lz4 reader would also
	// take what follows (more frames, skippable ones), and it keeps a
	// dependent-block frame's history across Reset, for the next batch's
	// blocks to be decoded against.
	d.src.Reset(src[:n])
	if d.lz == nil {
		d.lz = lz4.NewReader(&d.src)
		// Concurrency 1 keeps decoding on this goroutine and its buffers few.
		if err := d.lz.Apply(lz4.ConcurrencyOption(1)); err != nil {
			return nil, fmt.Errorf("BUG: cannot configure lz4 reader: %w", err)
		}
	} else {
		d.lz.Reset(&d.src)
	}
	return d.readAll(d.lz)
}

// zstdMaxWindow is zstd-jni's default window limit (ZSTD_WINDOWLOG_LIMIT_DEFAULT).
const zstdMaxWindow = 1 << 27

func (d *Decoder) unzstd(src []byte) ([]byte, error) {
	lim := d.limit()
	if d.zd == nil || d.zlim != lim {
		// Frames from Java producers (zstd-jni streams, no content size)
		// declare windows of 2 MiB at the default level and up to 128 MiB
		// at level 22, even for small batches; zstd-jni, and so Kafka,
		// decodes windows up to 2^27. The decoder also caps the window at
		// its memory limit, so both are raised to that, and the output
		// limit is checked on the result: DecodeAll's history is its
		// output, so a small batch costs no more, while a bomb may cost up
		// to 128 MiB before it is refused. (Without this: with the memory
		// limit at the output limit, level-22 batches, and any Java batch
		// under a small Limit, were refused.)
		win := max(uint64(lim), zstdMaxWindow)
		zd, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(win),
			zstd.WithDecoderMaxWindow(win))
		if err != nil {
			return nil, fmt.Errorf("BUG: cannot create zstd decoder: %w", err)
		}
		if d.zd != nil {
			d.zd.Close()
		}
		d.zd, d.zlim = zd, lim
	}
	out, err := d.zd.DecodeAll(src, d.buf[:0])
	if err != nil {
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return nil, errors.Join(ErrInflateLimit, err)
		}
		return nil, errors.Join(ErrDecompress, err)
	}
	if len(out) > lim {
		return nil, ErrInflateLimit
	}
	d.buf = out
	return out, nil
}

func (d *Decoder) unsnappy(src []byte) ([]byte, error) {
	if len(src) < xerialHeaderSize || !bytes.Equal(src[:len(xerialMagic)], xerialMagic) {
		out, err := d.unsnappyBlock(d.buf[:0], src)
		if err == nil {
			d.buf = out
		}
		return out, err
	}
	out := d.buf[:0]
	for p := xerialHeaderSize; p < len(src); {
		if len(src)-p < 4 {
			return nil, fmt.Errorf("xerial block length truncated: %w", ErrDecompress)
		}
		n := int(binary.BigEndian.Uint32(src[p:]))
		p += 4
		if n < 0 || n > len(src)-p {
			return nil, fmt.Errorf("xerial block of %d bytes, %d left: %w", n, len(src)-p, ErrDecompress)
		}
		var err error
		if out, err = d.unsnappyBlock(out, src[p:p+n]); err != nil {
			return nil, err
		}
		p += n
	}
	d.buf = out
	return out, nil
}

// unsnappyBlock appends the decoding of one raw snappy block to dst, after
// checking the size the block declares against the limit.
func (d *Decoder) unsnappyBlock(dst, block []byte) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return nil, errors.Join(ErrDecompress, err)
	}
	if n > d.limit()-len(dst) {
		return nil, ErrInflateLimit
	}
	dst = grow(dst, n)
	// Strict snappy: s2.Decode would also take S2-only encodings (a copy
	// with offset 0) that Java's and librdkafka's decoders reject, and a
	// batch the Kafka clients cannot read must not get into the log.
	out, err := snappy.DecodeStrict(dst[len(dst):len(dst)+n], block)
	if err != nil {
		return nil, errors.Join(ErrDecompress, err)
	}
	return dst[:len(dst)+len(out)], nil
}

// readAll reads r to EOF into the Decoder's buffer, failing as soon as more
// than the limit has come out, so a decompression bomb costs at most the
// limit in memory.
func (d *Decoder) readAll(r io.Reader) ([]byte, error) {
	lim := d.limit()
	buf := d.buf[:0]
	for {
		if len(buf) == cap(buf) {
			if len(buf) > lim {
				return nil, ErrInflateLimit
			}
			buf = grow(buf, min(max(cap(buf), 4096), lim+1-len(buf)))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > lim {
			d.buf = buf[:0]
			return nil, ErrInflateLimit
		}
		if err == io.EOF {
			d.buf = buf
			return buf, nil
		}
		if err != nil {
			d.buf = buf[:0]
			return nil, errors.Join(ErrDecompress, err)
		}
	}
}

// grow returns b with room for at least n more bytes.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+max(n, len(b)))
	copy(nb, b)
	return nb
}

// LZ4 frame layout (lz4 frame format 1.6), as Kafka's KafkaLZ4BlockInputStream
// takes it: magic 0x184D2204 (LE) | FLG | BD | [content size u64] | HC |
// blocks | end mark (u32 0) | [content checksum u32]. A block is a u32 LE
// size (the high bit: stored uncompressed), that many bytes, and a u32
// checksum when FLG asks for block checksums.
const (
	lz4Magic            = 0x184D2204
	lz4FlagVersionMask  = 0xC0
	lz4FlagVersion1     = 0x40
	lz4FlagIndependent  = 0x20
	lz4FlagBlockSum     = 0x10
	lz4FlagContentSize  = 0x08
	lz4FlagContentSum   = 0x04
	lz4FlagReservedMask = 0x03 // reserved and dictionary id: Kafka refuses both
)

// kafkaLZ4Frame returns the length of the LZ4 frame at the start of src,
// or ErrDecompress if that is not a frame Kafka reads: another magic (the
// legacy format, a skippable frame), another version, a dictionary id,
// dependent blocks ("Dependent block stream is unsupported"), or one cut
// short. What follows the frame is not Kafka's to read either.
func kafkaLZ4Frame(src []byte) (int, error) {
	if len(src) < 7 || binary.LittleEndian.Uint32(src) != lz4Magic {
		return 0, fmt.Errorf("not an LZ4 frame: %w", ErrDecompress)
	}
	flg := src[4]
	switch {
	case flg&lz4FlagVersionMask != lz4FlagVersion1:
		return 0, fmt.Errorf("LZ4 frame version %d: %w", flg>>6, ErrDecompress)
	case flg&lz4FlagReservedMask != 0:
		return 0, fmt.Errorf("LZ4 frame flags %#x: reserved bits or dictionary id set: %w", flg, ErrDecompress)
	case flg&lz4FlagIndependent == 0:
		return 0, fmt.Errorf("LZ4 frame of dependent blocks: %w", ErrDecompress)
	}
	n := 7 // magic, FLG, BD, HC
	if flg&lz4FlagContentSize != 0 {
		n += 8
	}
	blockSum := 0
	if flg&lz4FlagBlockSum != 0 {
		blockSum = 4
	}
	for {
		if n+4 > len(src) {
			return 0, fmt.Errorf("LZ4 frame truncated: %w", ErrDecompress)
		}
		size := int(binary.LittleEndian.Uint32(src[n:]) &^ (1 << 31))
		n += 4
		if size == 0 && src[n-1]&0x80 == 0 {
			break // end mark
		}
		if size > len(src)-n-blockSum {
			return 0, fmt.Errorf("LZ4 block of %d bytes truncated: %w", size, ErrDecompress)
		}
		n += size + blockSum
	}
	if flg&lz4FlagContentSum != 0 {
		n += 4
	}
	if n > len(src) {
		return 0, fmt.Errorf("LZ4 frame truncated: %w", ErrDecompress)
	}
	return n, nil
}
