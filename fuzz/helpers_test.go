package fuzz

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"sync"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/errcode"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

const (
	// limit is every target's decompression bound: far above any record a
	// fuzzer builds, far below what could exhaust a worker.
	limit = 1 << 20
	// maxInput skips inputs that could only test the allocator.
	maxInput = 1 << 20
	// minRecordSize is §1.3's smallest record: a length byte and six
	// one-byte fields. Decoder refuses counts that could not fit its limit.
	minRecordSize = 7
)

// sentinels is every error the batch package declares. Its contract is that
// each error it returns wraps exactly one of them.
var sentinels = []error{
	batch.ErrTruncated,
	batch.ErrTooSmall,
	batch.ErrLengthMismatch,
	batch.ErrMagic,
	batch.ErrCRC,
	batch.ErrTooLarge,
	batch.ErrCodec,
	batch.ErrRecordCount,
	batch.ErrControl,
	batch.ErrRecord,
	batch.ErrDecompress,
	batch.ErrInflateLimit,
	batch.ErrOffsetDelta,
	batch.ErrBaseOffset,
	batch.ErrClientControl,
	batch.ErrSequence,
	batch.ErrEmpty,
	batch.ErrBuild,
}

// sentinelOf checks err against the package's error contract and returns the
// one sentinel it wraps. If allowed is not empty the sentinel must be in it.
func sentinelOf(t *testing.T, what string, err error, allowed ...error) error {
	t.Helper()
	var found []error
	for _, s := range sentinels {
		if errors.Is(err, s) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: error %q wraps %d sentinels %q, want exactly one", what, err, len(found), found)
	}
	s := found[0]
	if c := errcode.Code(err); c == errcode.UnknownServerError || c != errcode.Code(s) {
		t.Fatalf("%s: errcode.Code(%q) = %d, sentinel %q has %d", what, err, c, s, errcode.Code(s))
	}
	if len(allowed) > 0 {
		for _, a := range allowed {
			if s == a {
				return s
			}
		}
		t.Fatalf("%s: error %q wraps %q, want one of %q", what, err, s, allowed)
	}
	return s
}

// wantErr fails unless err is non-nil and wraps want (and only want).
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %q", what, want)
	}
	sentinelOf(t, what, err, want)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// hdr is a batch header as the targets write it, independently of batch's
// own encoder so that a shared mistake cannot hide.
type hdr struct {
	baseOffset      int64
	leaderEpoch     int32
	attrs           uint16
	lastOffsetDelta int32
	baseTs, maxTs   int64
	producerID      int64
	producerEpoch   int16
	baseSequence    int32
	count           int32
}

// seal returns a batch of h and records, with batchLength and CRC-32C right.
func seal(h hdr, records []byte) []byte {
	b := make([]byte, 61, 61+len(records))
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(h.baseOffset))
	be.PutUint32(b[8:], uint32(49+len(records)))
	be.PutUint32(b[12:], uint32(h.leaderEpoch))
	b[16] = 2
	be.PutUint16(b[21:], h.attrs)
	be.PutUint32(b[23:], uint32(h.lastOffsetDelta))
	be.PutUint64(b[27:], uint64(h.baseTs))
	be.PutUint64(b[35:], uint64(h.maxTs))
	be.PutUint64(b[43:], uint64(h.producerID))
	be.PutUint16(b[51:], uint16(h.producerEpoch))
	be.PutUint32(b[53:], uint32(h.baseSequence))
	be.PutUint32(b[57:], uint32(h.count))
	b = append(b, records...)
	be.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

// Harness-side compressors: the records targets compress fuzzer-chosen
// plaintext themselves so that mutations reach record parsing behind every
// codec, not only behind CodecNone.
var (
	zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	gzMu    sync.Mutex
	gzw     = gzip.NewWriter(nil)
)

// compress encodes plain as a records section of codec. raw selects raw
// snappy blocks instead of Java's xerial framing.
func compress(codec batch.Codec, plain []byte, raw bool) []byte {
	switch codec {
	case batch.CodecGzip:
		var buf bytes.Buffer
		gzMu.Lock()
		defer gzMu.Unlock()
		gzw.Reset(&buf)
		gzw.Write(plain)
		gzw.Close()
		return buf.Bytes()
	case batch.CodecSnappy:
		if raw {
			return s2.EncodeSnappy(nil, plain)
		}
		out := append([]byte(nil), refXerialMagic...)
		out = binary.BigEndian.AppendUint32(out, 1)
		out = binary.BigEndian.AppendUint32(out, 1)
		for len(plain) > 0 {
			chunk := plain[:min(len(plain), 32<<10)]
			plain = plain[len(chunk):]
			blk := s2.EncodeSnappy(nil, chunk)
			out = binary.BigEndian.AppendUint32(out, uint32(len(blk)))
			out = append(out, blk...)
		}
		return out
	case batch.CodecLZ4:
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		_ = w.Apply(lz4.ConcurrencyOption(1), lz4.BlockSizeOption(lz4.Block64Kb))
		w.Write(plain)
		w.Close()
		return buf.Bytes()
	case batch.CodecZstd:
		return zenc.EncodeAll(plain, nil)
	}
	return bytes.Clone(plain)
}

// sameBytes compares with null distinct from empty.
func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

// checkRecords iterates b with d and compares every record against the
// reference parser run on the section that a separate Decoder decompressed.
// b must have passed batch.Parse.
func checkRecords(t *testing.T, d *batch.Decoder, b batch.Batch) {
	t.Helper()
	count := b.RecordsCount()
	it, err := d.Records(b)
	switch {
	case count < 0:
		wantErr(t, "Records with negative count", err, batch.ErrRecordCount)
		return
	case b.Codec() != batch.CodecNone && int64(count)*minRecordSize > limit:
		// (An uncompressed section is bounded by its length alone.)
		wantErr(t, "Records with count over limit", err, batch.ErrInflateLimit)
		return
	}
	ref := batch.Decoder{Limit: limit}
	data, derr := ref.Decompress(b.Codec(), b.Records())
	if derr != nil {
		if err == nil {
			t.Fatalf("Decompress failed (%v) but Records did not", derr)
		}
		want := sentinelOf(t, "Decompress", derr, batch.ErrCodec, batch.ErrDecompress, batch.ErrInflateLimit)
		wantErr(t, "Records on undecompressible section", err, want)
		return
	}
	if err != nil {
		t.Fatalf("Records: %v, but the section decompresses", err)
	}
	if b.Codec() != batch.CodecNone && len(data) > limit {
		t.Fatalf("Decompress returned %d bytes, limit %d", len(data), limit)
	}
	want, valid := refParseRecords(data, count)
	var r batch.Record
	i := 0
	for it.Next(&r) {
		if i >= len(want) {
			t.Fatalf("Records yielded record %d, reference stopped at %d (valid=%v)", i, len(want), valid)
		}
		compareRecord(t, b, i, &r, &want[i])
		i++
	}
	if it.Next(&r) {
		t.Fatal("Next returned true after returning false")
	}
	if it.Remaining() != int(count)-i {
		t.Fatalf("Remaining() = %d after %d of %d records", it.Remaining(), i, count)
	}
	if err := it.Err(); err != nil {
		sentinelOf(t, "Records.Err", err, batch.ErrRecord)
		if valid || i != len(want) {
			t.Fatalf("Records failed after %d records (%v); reference read %d, valid=%v", i, err, len(want), valid)
		}
		return
	}
	if !valid || i != int(count) {
		t.Fatalf("Records accepted %d of %d records; reference read %d, valid=%v", i, count, len(want), valid)
	}
}

func compareRecord(t *testing.T, b batch.Batch, i int, r *batch.Record, w *refRecord) {
	t.Helper()
	if r.Attributes != w.attributes || r.TimestampDelta != w.timestampDelta || r.OffsetDelta != w.offsetDelta {
		t.Fatalf("record %d: attrs/tsDelta/offDelta = %d/%d/%d, reference %d/%d/%d", i,
			r.Attributes, r.TimestampDelta, r.OffsetDelta, w.attributes, w.timestampDelta, w.offsetDelta)
	}
	if off := b.BaseOffset() + int64(w.offsetDelta); r.Offset != off {
		t.Fatalf("record %d: offset %d, want %d", i, r.Offset, off)
	}
	ts := b.BaseTimestamp() + w.timestampDelta
	if b.LogAppendTime() {
		ts = b.MaxTimestamp()
	}
	if r.Timestamp != ts {
		t.Fatalf("record %d: timestamp %d, want %d", i, r.Timestamp, ts)
	}
	if !sameBytes(r.Key, w.key) || !sameBytes(r.Value, w.value) {
		t.Fatalf("record %d: key/value %q/%q, reference %q/%q", i, r.Key, r.Value, w.key, w.value)
	}
	if r.HeaderCount != len(w.headers) {
		t.Fatalf("record %d: %d headers, reference %d", i, r.HeaderCount, len(w.headers))
	}
	hs := r.Headers()
	var h batch.Header
	for j := range w.headers {
		if !hs.Next(&h) {
			t.Fatalf("record %d: header iterator ended at %d of %d", i, j, len(w.headers))
		}
		if !sameBytes(h.Key, w.headers[j].key) || !sameBytes(h.Value, w.headers[j].value) {
			t.Fatalf("record %d header %d: %q=%q, reference %q=%q", i, j, h.Key, h.Value, w.headers[j].key, w.headers[j].value)
		}
	}
	if hs.Next(&h) {
		t.Fatalf("record %d: header iterator yields more than %d headers", i, len(w.headers))
	}
}

// checkCheckRecords compares Decoder.CheckRecords, the append path's
// record check, with the reference parser: it must accept exactly the
// batches whose section inflates within the limit and holds count
// well-formed records, nothing after them, with offset deltas 0, 1, 2, ...
func checkCheckRecords(t *testing.T, b batch.Batch) {
	t.Helper()
	d := batch.Decoder{Limit: limit}
	err := d.CheckRecords(b)
	count := b.RecordsCount()
	accept := count >= 0 && int64(count)*minRecordSize <= limit
	if accept {
		ref := batch.Decoder{Limit: limit}
		data, derr := ref.Decompress(b.Codec(), b.Records())
		accept = derr == nil
		if accept {
			recs, valid := refParseRecords(data, count)
			accept = valid && len(recs) == int(count)
			for i := range recs {
				accept = accept && recs[i].offsetDelta == int32(i)
			}
		}
	}
	switch {
	case accept && err != nil:
		t.Fatalf("CheckRecords: %v; the reference accepts the batch", err)
	case !accept && err == nil:
		t.Fatal("CheckRecords accepted a batch the reference refuses")
	case err != nil:
		sentinelOf(t, "CheckRecords", err, batch.ErrRecordCount, batch.ErrInflateLimit, batch.ErrCodec,
			batch.ErrDecompress, batch.ErrRecord, batch.ErrOffsetDelta)
	}
}
