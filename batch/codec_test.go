package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// sealedBatch seals a batch around a records section (already compressed
// with codec) that claims count records.
func sealedBatch(codec Codec, section []byte, count int32) Batch {
	out := append(make([]byte, HeaderSize), section...)
	putHeader(out, header{
		attrs: uint16(codec), lastOffsetDelta: count - 1, baseTs: 1, maxTs: 1,
		producerID: NoProducerID, producerEpoch: NoProducerEpoch, baseSequence: NoSequence, count: count,
	})
	return Batch(out)
}

// xxh32Sum is xxHash32 with seed 0 for inputs shorter than 16 bytes,
// which is all an LZ4 frame descriptor checksum needs.
func xxh32Sum(b []byte) uint32 {
	const (
		p1 = 2654435761
		p2 = 2246822519
		p3 = 3266489917
		p4 = 668265263
		p5 = 374761393
	)
	h := uint32(p5) + uint32(len(b))
	for ; len(b) >= 4; b = b[4:] {
		h += binary.LittleEndian.Uint32(b) * p3
		h = bits.RotateLeft32(h, 17) * p4
	}
	for _, c := range b {
		h += uint32(c) * p5
		h = bits.RotateLeft32(h, 11) * p1
	}
	h ^= h >> 15
	h *= p2
	h ^= h >> 13
	h *= p3
	h ^= h >> 16
	return h
}

// lz4FrameOf writes an LZ4 frame (magic 0x184D2204) with the given FLG
// byte, 64 KiB blocks, and the given blocks (raw block bytes; stored
// uncompressed when the flag is set).
func lz4FrameOf(flg byte, blocks [][]byte, uncompressed []bool) []byte {
	out := []byte{0x04, 0x22, 0x4d, 0x18, flg, 0x40}
	out = append(out, byte(xxh32Sum(out[4:6])>>8))
	for i, blk := range blocks {
		n := uint32(len(blk))
		if uncompressed[i] {
			n |= 1 << 31
		}
		out = binary.LittleEndian.AppendUint32(out, n)
		out = append(out, blk...)
	}
	return binary.LittleEndian.AppendUint32(out, 0) // end mark
}

// Kafka's KafkaLZ4BlockInputStream refuses a frame whose FLG does not set
// block independence ("Dependent block stream is unsupported"), so Java
// consumers cannot read such a batch; CheckRecords must not let it in.
func TestLZ4DependentBlocksRejected(t *testing.T) {
	t.Parallel()
	section := record(0, []byte("hello"))
	// FLG: version 01, block independence NOT set, no checksums.
	frame := lz4FrameOf(0x40, [][]byte{section}, []bool{true})
	b := sealedBatch(CodecLZ4, frame, 1)
	if _, err := ValidateProduce(b, 0); err != nil {
		t.Fatal(err)
	}
	var d Decoder
	// Control: the same frame with the independence bit set is fine.
	indep := sealedBatch(CodecLZ4, lz4FrameOf(0x60, [][]byte{section}, []bool{true}), 1)
	if err := d.CheckRecords(indep); err != nil {
		t.Fatalf("control: independent frame: %v", err)
	}
	if err := d.CheckRecords(b); !errors.Is(err, ErrDecompress) {
		t.Fatalf("CheckRecords of a dependent-block LZ4 frame: %v, want ErrDecompress", err)
	}
}

// Kafka's KafkaLZ4BlockInputStream reads exactly one frame in the LZ4 frame
// format (magic 0x184D2204): a legacy frame (0x184C2102) or a leading
// skippable frame is "Stream unsupported (invalid magic bytes)", and records
// continued in a second frame are a premature EOF. Java consumers cannot read
// such batches, so CheckRecords must not accept them.
func TestLZ4NonKafkaFramesRejected(t *testing.T) {
	t.Parallel()
	section := record(0, bytes.Repeat([]byte("a"), 100))
	blk := make([]byte, lz4.CompressBlockBound(len(section)))
	n, err := lz4.CompressBlock(section, blk, nil)
	if err != nil || n == 0 {
		t.Fatal(n, err)
	}
	blk = blk[:n]
	good := lz4FrameOf(0x60, [][]byte{section}, []bool{true})

	legacy := binary.LittleEndian.AppendUint32(nil, 0x184C2102)
	legacy = binary.LittleEndian.AppendUint32(legacy, uint32(n))
	legacy = append(legacy, blk...)

	skippable := binary.LittleEndian.AppendUint32(nil, 0x184D2A50)
	skippable = binary.LittleEndian.AppendUint32(skippable, 3)
	skippable = append(skippable, 1, 2, 3)
	skippable = append(skippable, good...)

	two := append(record(0, []byte("first")), record(1, []byte("second"))...)
	split := append(lz4FrameOf(0x60, [][]byte{two[:9]}, []bool{true}),
		lz4FrameOf(0x60, [][]byte{two[9:]}, []bool{true})...)

	var d Decoder
	if err := d.CheckRecords(sealedBatch(CodecLZ4, good, 1)); err != nil {
		t.Fatalf("control: one independent frame: %v", err)
	}
	for _, c := range []struct {
		name    string
		section []byte
		count   int32
		want    error
	}{
		{"legacy frame", legacy, 1, ErrDecompress},
		{"skippable frame first", skippable, 1, ErrDecompress},
		{"records split over two frames", split, 2, ErrRecord},
	} {
		// Kafka's reader fails on the first two (bad magic) and reads the
		// third as a premature end of the records.
		if err := d.CheckRecords(sealedBatch(CodecLZ4, c.section, c.count)); !errors.Is(err, c.want) {
			t.Errorf("%s: CheckRecords = %v, want %v", c.name, err, c.want)
		}
	}
}

// A reused Decoder must judge each batch on its own bytes. The lz4 reader
// keeps the dictionary of a dependent-block frame across Reset, so a later
// batch whose block copies from an earlier batch's data decodes with a warm
// Decoder and fails with a fresh one.
func TestLZ4DecoderHistoryLeaksAcrossBatches(t *testing.T) {
	t.Parallel()
	section := record(0, []byte("leaked-from-the-previous-batch"))
	// Batch A: a dependent-block frame holding section as a stored block.
	a := sealedBatch(CodecLZ4, lz4FrameOf(0x40, [][]byte{section}, []bool{true}), 1)
	// Batch B: an independent-block frame whose only block is a match that
	// reaches back len(section) bytes (into A's data), then 5 literals.
	m := len(section) - 5
	blk := []byte{0x0f} // 0 literals, match length 4+15+extra
	blk = binary.LittleEndian.AppendUint16(blk, uint16(len(section)))
	rest := m - 4 - 15
	for ; rest >= 255; rest -= 255 {
		blk = append(blk, 255)
	}
	blk = append(blk, byte(rest))
	blk = append(blk, 0x50)
	blk = append(blk, section[m:]...)
	b := sealedBatch(CodecLZ4, lz4FrameOf(0x60, [][]byte{blk}, []bool{false}), 1)

	var fresh Decoder
	freshErr := fresh.CheckRecords(b)
	if freshErr == nil {
		t.Fatal("a fresh Decoder accepts batch B, whose block reaches before its own start")
	}
	var warm Decoder
	_ = warm.CheckRecords(a)
	if err := warm.CheckRecords(b); err == nil {
		t.Fatalf("batch B: fresh Decoder says %v, but a Decoder that first read batch A accepts it", freshErr)
	}
}

// The inflate limit bounds decompression; an uncompressed records section
// inflates to nothing. Yet Records checks recordsCount*7 against the limit
// for every codec, so an uncompressed client batch that a topic's
// max.message.bytes allows (here 100 MB, ~9.6M small records) is refused
// with ErrInflateLimit, and the engine checks uncompressed batches with a
// nil Decoder, whose limit is DefaultInflateLimit. Kafka takes the batch.
func TestUncompressedBatchHitsInflateLimit(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a ~95 MB batch")
	}
	count := int32(DefaultInflateLimit/minRecordSize + 1)
	section := make([]byte, 0, int(count)*10)
	for i := int32(0); i < count; i++ {
		body := []byte{0, 0} // attributes, timestamp delta
		body = appendVarint(body, i)
		body = append(body, 1, 1, 0) // null key, null value, no headers
		section = appendVarint(section, int32(len(body)))
		section = append(section, body...)
	}
	b := sealedBatch(CodecNone, section, count)
	v, err := ValidateProduce(b, 100<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := (*Decoder)(nil).CheckRecords(v); err != nil {
		t.Fatalf("CheckRecords of an uncompressed %d-byte batch of %d records: %v", len(v), count, err)
	}
}

// A zstd frame declares a window whatever its size: Java producers stream
// through zstd-jni with no pledged size, so a frame declares its level's
// window (2 MiB at the default level 3, 128 MiB at level 22, which Kafka
// 3.8+ allows via compression.zstd.level). zstd-jni, and so Kafka, decodes
// windows up to 2^27. unzstd means to "allow 8 MiB whatever the output
// limit", but klauspost clamps the max window to WithDecoderMaxMemory (the
// limit): a small Limit refuses even a default-level Java batch, and the
// default limit (64 MiB) refuses a level-22 one, with ErrInflateLimit.
func TestZstdDeclaredWindow(t *testing.T) {
	t.Parallel()
	section := append(record(0, []byte("first")), record(1, []byte("second"))...)
	var zb bytes.Buffer
	w, err := zstd.NewWriter(&zb, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(section)
	w.Close()
	if fhd := zb.Bytes()[4]; fhd&0x20 != 0 {
		t.Fatalf("FHD %x: single segment, no window descriptor", fhd)
	}
	for _, c := range []struct {
		name      string
		limit     int
		windowLog byte
	}{
		{"Limit 1 MiB, 2 MiB window (Java default level)", 1 << 20, 21},
		{"Limit 1 MiB, 8 MiB window (the floor unzstd promises)", 1 << 20, 23},
		{"default limit, 128 MiB window (Java level 22)", 0, 27},
	} {
		frame := bytes.Clone(zb.Bytes())
		// The window descriptor follows the FHD; no checksum covers it.
		frame[5] = (c.windowLog - 10) << 3
		b := sealedBatch(CodecZstd, frame, 2)
		ref := Decoder{Limit: 1 << 28}
		if err := ref.CheckRecords(b); err != nil {
			t.Fatalf("%s: control: the frame does not decode with a 256 MiB limit: %v", c.name, err)
		}
		d := Decoder{Limit: c.limit}
		if err := d.CheckRecords(b); err != nil {
			t.Errorf("%s: CheckRecords of a %d-byte zstd section: %v", c.name, len(frame), err)
		}
	}
}
