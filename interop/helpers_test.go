package interop

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/idemlog/idemlog/batch"
)

// The model both sides are compared against. Key, Value and header values
// use nil for null and a non-nil (possibly empty) slice for empty, which is
// the convention of kmsg and of batch alike, so the distinction survives
// every hop and every comparison below checks it.
type hdr struct {
	Key   string
	Value []byte
}

type rec struct {
	TS      int64
	Key     []byte
	Value   []byte
	Headers []hdr
}

type spec struct {
	Codec         batch.Codec
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	Transactional bool
	Records       []rec
}

// maxTestBatch lifts Kafka's 1 MiB default so the large-record cases are
// judged on their encoding, not on a size policy.
const maxTestBatch = 256 << 20

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)

	allCodecs = []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd}

	kgoCodecs = map[batch.Codec]kgo.CompressionCodec{
		batch.CodecGzip:   kgo.GzipCompression(),
		batch.CodecSnappy: kgo.SnappyCompression(),
		batch.CodecLZ4:    kgo.Lz4Compression(),
		batch.CodecZstd:   kgo.ZstdCompression(),
	}

	// kgo's compressors and decompressor pool their codecs and are safe
	// for concurrent use, so one of each serves every test; building a
	// zstd encoder per batch would dominate the run time under -race.
	compressorsOnce sync.Once
	compressors     map[batch.Codec]kgo.Compressor
	decompressor    = kgo.DefaultDecompressor()
)

func kgoCompressor(t testing.TB, c batch.Codec) kgo.Compressor {
	t.Helper()
	compressorsOnce.Do(func() {
		compressors = make(map[batch.Codec]kgo.Compressor)
		for c, kc := range kgoCodecs {
			comp, err := kgo.DefaultCompressor(kc)
			if err != nil || comp == nil {
				panic(fmt.Sprintf("kgo.DefaultCompressor(%v): %v, %v", c, comp, err))
			}
			compressors[c] = comp
		}
	})
	comp, ok := compressors[c]
	if !ok {
		t.Fatalf("no kgo compressor for %v", c)
	}
	return comp
}

// ---------------------------------------------------------------------------
// franz-go side

// franzSection encodes the uncompressed records section with kmsg.Record,
// deltas against the first record's timestamp as Kafka producers do.
func franzSection(recs []rec) []byte {
	var out []byte
	base := recs[0].TS
	for i, r := range recs {
		d := r.TS - base
		kr := kmsg.Record{
			TimestampDelta64: d,
			TimestampDelta:   int32(d),
			OffsetDelta:      int32(i),
			Key:              r.Key,
			Value:            r.Value,
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		// kmsg leaves Length to the caller; encoding once with Length 0
		// (one varint byte) measures the body.
		kr.Length = int32(len(kr.AppendTo(nil)) - 1)
		out = kr.AppendTo(out)
	}
	return out
}

func franzCompress(t testing.TB, c batch.Codec, raw []byte) []byte {
	t.Helper()
	if c == batch.CodecNone {
		return raw
	}
	out, used := kgoCompressor(t, c).Compress(new(bytes.Buffer), raw)
	if used != kgo.CompressionCodecType(c) || out == nil {
		t.Fatalf("kgo compress %v: used codec %d, %d bytes", c, used, len(out))
	}
	// The output may alias a buffer kgo reuses.
	return bytes.Clone(out)
}

// franzSeal lays out a v2 batch with kmsg.RecordBatch and stamps Length and
// the CRC the way kgo's producer does (sink.go, seqRecBatch.appendTo):
// CRC-32C over everything after the CRC field.
func franzSeal(rb kmsg.RecordBatch) []byte {
	rb.Magic = 2
	rb.Length = int32(batch.HeaderSize - batch.LogOverhead + len(rb.Records))
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

// franzBuild encodes s as a producer would send it: base offset 0, leader
// epoch -1.
func franzBuild(t testing.TB, s spec) []byte {
	t.Helper()
	raw := franzSection(s.Records)
	attrs := int16(s.Codec)
	if s.Transactional {
		attrs |= 0x10
	}
	first, maxTS := s.Records[0].TS, s.Records[0].TS
	for _, r := range s.Records {
		maxTS = max(maxTS, r.TS)
	}
	return franzSeal(kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(s.Records) - 1),
		FirstTimestamp:       first,
		MaxTimestamp:         maxTS,
		ProducerID:           s.ProducerID,
		ProducerEpoch:        s.ProducerEpoch,
		FirstSequence:        s.BaseSequence,
		NumRecords:           int32(len(s.Records)),
		Records:              franzCompress(t, s.Codec, raw),
	})
}

// franzControl builds a one-record control batch with kmsg's control key
// and EndTxnMarker value types.
func franzControl(base, pid int64, epoch int16, typ kmsg.ControlRecordKeyType, coordEpoch int32, ts int64, attrs int16) []byte {
	key := kmsg.ControlRecordKey{Version: 0, Type: typ}
	val := kmsg.EndTxnMarker{Version: 0, CoordinatorEpoch: coordEpoch}
	kr := kmsg.Record{Key: key.AppendTo(nil), Value: val.AppendTo(nil)}
	kr.Length = int32(len(kr.AppendTo(nil)) - 1)
	return franzSeal(kmsg.RecordBatch{
		FirstOffset:          base,
		PartitionLeaderEpoch: -1,
		Attributes:           attrs,
		FirstTimestamp:       ts,
		MaxTimestamp:         ts,
		ProducerID:           pid,
		ProducerEpoch:        epoch,
		FirstSequence:        -1,
		NumRecords:           1,
		Records:              kr.AppendTo(nil),
	})
}

type franzBatch struct {
	kmsg.RecordBatch
	Section []byte // decompressed records section
	Records []kmsg.Record
}

// franzDecode parses b the way a franz-go consumer does: kmsg.RecordBatch,
// CRC-32C, kgo.DefaultDecompressor, then kmsg.Record per length-prefixed
// record. Every record must re-encode to exactly its input bytes, which
// catches a record whose length prefix and body disagree (kmsg does not
// check that itself).
func franzDecode(t testing.TB, b []byte) franzBatch {
	t.Helper()
	var fb franzBatch
	if err := fb.ReadFrom(b); err != nil {
		t.Fatalf("kmsg.RecordBatch.ReadFrom: %v", err)
	}
	if got := int(fb.Length) + batch.LogOverhead; got != len(b) {
		t.Fatalf("franz batch length %d + 12 != %d bytes", fb.Length, len(b))
	}
	if fb.Magic != 2 {
		t.Fatalf("franz magic %d", fb.Magic)
	}
	if stored, computed := uint32(fb.CRC), crc32.Checksum(b[21:], castagnoli); stored != computed {
		t.Fatalf("franz CRC-32C: stored %08x, computed %08x", stored, computed)
	}
	raw, err := decompressor.Decompress(fb.RecordBatch.Records, kgo.CompressionCodecType(fb.Attributes&7))
	if err != nil {
		t.Fatalf("kgo decompress codec %d: %v", fb.Attributes&7, err)
	}
	fb.Section = raw
	for i := int32(0); i < fb.NumRecords; i++ {
		l, used := binary.Varint(raw)
		if used <= 0 || l < 0 || int64(used)+l > int64(len(raw)) {
			t.Fatalf("franz record %d: bad length prefix (%d, %d) with %d bytes left", i, l, used, len(raw))
		}
		enc := raw[:used+int(l)]
		var kr kmsg.Record
		if err := kr.ReadFrom(enc); err != nil {
			t.Fatalf("kmsg.Record.ReadFrom record %d: %v", i, err)
		}
		if re := kr.AppendTo(nil); !bytes.Equal(re, enc) {
			t.Fatalf("franz record %d does not re-encode to its %d input bytes (got %d)", i, len(enc), len(re))
		}
		fb.Records = append(fb.Records, kr)
		raw = raw[len(enc):]
	}
	if len(raw) != 0 {
		t.Fatalf("franz: %d bytes after %d records", len(raw), fb.NumRecords)
	}
	return fb
}

// model converts franz-decoded records to the model, checking the per-record
// fields the model does not carry.
func (fb franzBatch) model(t testing.TB) []rec {
	t.Helper()
	out := make([]rec, 0, len(fb.Records))
	for i, kr := range fb.Records {
		if kr.Attributes != 0 || kr.OffsetDelta != int32(i) {
			t.Fatalf("franz record %d: attributes %d, offset delta %d", i, kr.Attributes, kr.OffsetDelta)
		}
		r := rec{TS: fb.FirstTimestamp + kr.TimestampDelta64, Key: kr.Key, Value: kr.Value}
		for _, h := range kr.Headers {
			r.Headers = append(r.Headers, hdr{Key: h.Key, Value: h.Value})
		}
		out = append(out, r)
	}
	return out
}

// checkFranzHeader compares franz's view of a producer batch with s.
func checkFranzHeader(t testing.TB, fb franzBatch, s spec) {
	t.Helper()
	attrs := int16(s.Codec)
	if s.Transactional {
		attrs |= 0x10
	}
	first, maxTS := s.Records[0].TS, s.Records[0].TS
	for _, r := range s.Records {
		maxTS = max(maxTS, r.TS)
	}
	n := int32(len(s.Records))
	got := [...]int64{fb.FirstOffset, int64(fb.PartitionLeaderEpoch), int64(fb.Attributes), int64(fb.LastOffsetDelta),
		fb.FirstTimestamp, fb.MaxTimestamp, fb.ProducerID, int64(fb.ProducerEpoch), int64(fb.FirstSequence), int64(fb.NumRecords)}
	want := [...]int64{0, -1, int64(attrs), int64(n - 1),
		first, maxTS, s.ProducerID, int64(s.ProducerEpoch), int64(s.BaseSequence), int64(n)}
	names := [...]string{"firstOffset", "leaderEpoch", "attributes", "lastOffsetDelta",
		"firstTimestamp", "maxTimestamp", "producerID", "producerEpoch", "firstSequence", "numRecords"}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("franz header %s = %d, want %d", names[i], got[i], want[i])
		}
	}
}

// ---------------------------------------------------------------------------
// idemlog side

func idemBuild(t testing.TB, bld *batch.Builder, s spec, snappyRaw bool) []byte {
	t.Helper()
	bld.Reset(s.Codec)
	bld.SnappyRaw = snappyRaw
	bld.SetProducer(s.ProducerID, s.ProducerEpoch, s.BaseSequence)
	bld.SetTransactional(s.Transactional)
	var hs []batch.Header
	for _, r := range s.Records {
		hs = hs[:0]
		for _, h := range r.Headers {
			hs = append(hs, batch.Header{Key: []byte(h.Key), Value: h.Value})
		}
		bld.Append(r.TS, r.Key, r.Value, hs)
	}
	b, err := bld.Build()
	if err != nil {
		t.Fatalf("batch.Builder.Build: %v", err)
	}
	// The Builder reuses its output buffer on the next Reset.
	return bytes.Clone(b)
}

// idemDecode iterates b's records with a batch.Decoder and copies them into
// the model (the Decoder's slices are only valid until its next call).
func idemDecode(t testing.TB, d *batch.Decoder, b batch.Batch) []rec {
	t.Helper()
	it, err := d.Records(b)
	if err != nil {
		t.Fatalf("batch.Decoder.Records: %v", err)
	}
	var (
		out []rec
		r   batch.Record
		h   batch.Header
	)
	for i := int64(0); it.Next(&r); i++ {
		if r.Attributes != 0 || r.OffsetDelta != int32(i) || r.Offset != b.BaseOffset()+i ||
			r.Timestamp != b.BaseTimestamp()+r.TimestampDelta {
			t.Fatalf("idemlog record %d: attributes %d, offset delta %d, offset %d, timestamp %d (base %d + %d)",
				i, r.Attributes, r.OffsetDelta, r.Offset, r.Timestamp, b.BaseTimestamp(), r.TimestampDelta)
		}
		m := rec{TS: r.Timestamp, Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)}
		for hi := r.Headers(); hi.Next(&h); {
			m.Headers = append(m.Headers, hdr{Key: string(h.Key), Value: bytes.Clone(h.Value)})
		}
		if len(m.Headers) != r.HeaderCount {
			t.Fatalf("idemlog record %d: %d headers iterated, count %d", i, len(m.Headers), r.HeaderCount)
		}
		out = append(out, m)
	}
	if err := it.Err(); err != nil {
		t.Fatalf("batch.Records.Next: %v", err)
	}
	if int32(len(out)) != b.RecordsCount() {
		t.Fatalf("idemlog yielded %d records, header says %d", len(out), b.RecordsCount())
	}
	return out
}

// checkIdemHeader compares idemlog's accessors on a producer batch with s.
func checkIdemHeader(t testing.TB, b batch.Batch, s spec) {
	t.Helper()
	first, maxTS := s.Records[0].TS, s.Records[0].TS
	for _, r := range s.Records {
		maxTS = max(maxTS, r.TS)
	}
	n := int32(len(s.Records))
	type kv struct {
		name      string
		got, want any
	}
	for _, c := range []kv{
		{"BaseOffset", b.BaseOffset(), int64(0)},
		{"PartitionLeaderEpoch", b.PartitionLeaderEpoch(), int32(-1)},
		{"Magic", b.Magic(), int8(2)},
		{"Codec", b.Codec(), s.Codec},
		{"IsTransactional", b.IsTransactional(), s.Transactional},
		{"IsControl", b.IsControl(), false},
		{"LogAppendTime", b.LogAppendTime(), false},
		{"LastOffsetDelta", b.LastOffsetDelta(), n - 1},
		{"BaseTimestamp", b.BaseTimestamp(), first},
		{"MaxTimestamp", b.MaxTimestamp(), maxTS},
		{"ProducerID", b.ProducerID(), s.ProducerID},
		{"ProducerEpoch", b.ProducerEpoch(), s.ProducerEpoch},
		{"BaseSequence", b.BaseSequence(), s.BaseSequence},
		{"LastSequence", b.LastSequence(), batch.LastSequence(s.BaseSequence, n-1)},
		{"RecordsCount", b.RecordsCount(), n},
		{"CRC", b.CRC(), b.ComputeCRC()},
	} {
		if c.got != c.want {
			t.Errorf("idemlog %s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// ---------------------------------------------------------------------------
// comparison

func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func showBytes(b []byte) string {
	switch {
	case b == nil:
		return "null"
	case len(b) > 16:
		return fmt.Sprintf("%d bytes %x...", len(b), b[:16])
	}
	return fmt.Sprintf("%q", b)
}

// diffRecords returns the first difference between got and want, null vs
// empty included, or "".
func diffRecords(got, want []rec) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		switch {
		case g.TS != w.TS:
			return fmt.Sprintf("record %d timestamp %d, want %d", i, g.TS, w.TS)
		case !sameBytes(g.Key, w.Key):
			return fmt.Sprintf("record %d key %s, want %s", i, showBytes(g.Key), showBytes(w.Key))
		case !sameBytes(g.Value, w.Value):
			return fmt.Sprintf("record %d value %s, want %s", i, showBytes(g.Value), showBytes(w.Value))
		case len(g.Headers) != len(w.Headers):
			return fmt.Sprintf("record %d has %d headers, want %d", i, len(g.Headers), len(w.Headers))
		}
		for j := range w.Headers {
			gh, wh := g.Headers[j], w.Headers[j]
			if gh.Key != wh.Key || !sameBytes(gh.Value, wh.Value) {
				return fmt.Sprintf("record %d header %d = %q:%s, want %q:%s",
					i, j, gh.Key, showBytes(gh.Value), wh.Key, showBytes(wh.Value))
			}
		}
	}
	return ""
}
