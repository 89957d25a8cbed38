package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"testing/quick"

	"github.com/idemlog/idemlog/errcode"
)

var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

type testRecord struct {
	ts         int64
	key, value []byte
	headers    []Header
}

// buildBatch encodes recs with a fresh Builder and returns a copy.
func buildBatch(t testing.TB, codec Codec, recs []testRecord) Batch {
	t.Helper()
	b := NewBuilder(codec)
	for _, r := range recs {
		b.Append(r.ts, r.key, r.value, r.headers)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return bytes.Clone(out)
}

func sampleRecords() []testRecord {
	large := bytes.Repeat([]byte("0123456789abcdef"), 40<<10) // 640 KiB: several xerial and lz4 blocks
	return []testRecord{
		{ts: 1000, key: []byte("k1"), value: []byte("v1")},
		{ts: 999, key: nil, value: []byte("null key")},
		{ts: 1005, key: []byte{}, value: []byte{}},
		{ts: 1001, key: []byte("null value"), value: nil},
		{ts: 1002, key: []byte("h"), value: []byte("with headers"), headers: []Header{
			{Key: []byte("a"), Value: []byte("1")},
			{Key: []byte("nullv"), Value: nil},
			{Key: []byte(""), Value: []byte{}},
		}},
		{ts: 1003, key: []byte("big"), value: large},
	}
}

func checkRecords(t *testing.T, b Batch, want []testRecord) {
	t.Helper()
	var d Decoder
	it, err := d.Records(b)
	if err != nil {
		t.Fatalf("Records: %v", err)
	}
	var r Record
	i := 0
	for it.Next(&r) {
		w := want[i]
		if r.Offset != int64(i) || r.OffsetDelta != int32(i) {
			t.Fatalf("record %d: offset %d delta %d", i, r.Offset, r.OffsetDelta)
		}
		if r.Timestamp != w.ts {
			t.Fatalf("record %d: timestamp %d, want %d", i, r.Timestamp, w.ts)
		}
		sameBytes(t, fmt.Sprintf("record %d key", i), r.Key, w.key)
		sameBytes(t, fmt.Sprintf("record %d value", i), r.Value, w.value)
		if r.HeaderCount != len(w.headers) {
			t.Fatalf("record %d: %d headers, want %d", i, r.HeaderCount, len(w.headers))
		}
		hi := r.Headers()
		var h Header
		for j := 0; hi.Next(&h); j++ {
			sameBytes(t, "header key", h.Key, w.headers[j].Key)
			sameBytes(t, "header value", h.Value, w.headers[j].Value)
		}
		i++
	}
	if err := it.Err(); err != nil {
		t.Fatalf("iteration: %v", err)
	}
	if i != len(want) {
		t.Fatalf("got %d records, want %d", i, len(want))
	}
}

// sameBytes compares byte slices, telling null (nil) from empty.
func sameBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if (got == nil) != (want == nil) || !bytes.Equal(got, want) {
		t.Fatalf("%s: got %q (nil %v), want %q (nil %v)", what, got, got == nil, want, want == nil)
	}
}

func TestRoundTripEveryCodec(t *testing.T) {
	t.Parallel()
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			recs := sampleRecords()
			b := buildBatch(t, c, recs)
			v, err := ValidateProduce(b, 4<<20)
			if err != nil {
				t.Fatalf("ValidateProduce: %v", err)
			}
			if v.Codec() != c || v.RecordsCount() != int32(len(recs)) || v.LastOffsetDelta() != int32(len(recs)-1) {
				t.Fatalf("header: codec %v count %d delta %d", v.Codec(), v.RecordsCount(), v.LastOffsetDelta())
			}
			if v.BaseTimestamp() != 1000 || v.MaxTimestamp() != 1005 {
				t.Fatalf("timestamps: base %d max %d", v.BaseTimestamp(), v.MaxTimestamp())
			}
			if v.ProducerID() != NoProducerID || v.ProducerEpoch() != NoProducerEpoch || v.BaseSequence() != NoSequence {
				t.Fatalf("producer fields of a plain batch: %d %d %d", v.ProducerID(), v.ProducerEpoch(), v.BaseSequence())
			}
			if v.PartitionLeaderEpoch() != -1 {
				t.Fatalf("leader epoch %d", v.PartitionLeaderEpoch())
			}
			checkRecords(t, v, recs)
		})
	}
}

func TestSnappyRawAndXerialBothDecode(t *testing.T) {
	t.Parallel()
	recs := sampleRecords()
	xerial := buildBatch(t, CodecSnappy, recs)
	if !bytes.HasPrefix(xerial.Records(), xerialMagic) {
		t.Fatal("default snappy output is not xerial-framed")
	}
	b := NewBuilder(CodecSnappy)
	b.SnappyRaw = true
	for _, r := range recs {
		b.Append(r.ts, r.key, r.value, r.headers)
	}
	raw, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.HasPrefix(raw.Records(), xerialMagic) {
		t.Fatal("raw snappy output carries the xerial header")
	}
	checkRecords(t, raw, recs)
	checkRecords(t, xerial, recs)
}

func TestProducerFields(t *testing.T) {
	t.Parallel()
	b := NewBuilder(CodecNone)
	b.SetProducer(42, 7, math.MaxInt32-1)
	b.SetTransactional(true)
	b.Append(1, nil, []byte("a"), nil)
	b.Append(2, nil, []byte("b"), nil)
	b.Append(3, nil, []byte("c"), nil)
	v, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if v.ProducerID() != 42 || v.ProducerEpoch() != 7 || v.BaseSequence() != math.MaxInt32-1 || !v.IsTransactional() {
		t.Fatalf("producer fields: %d %d %d %v", v.ProducerID(), v.ProducerEpoch(), v.BaseSequence(), v.IsTransactional())
	}
	if v.LastSequence() != 0 {
		t.Fatalf("last sequence %d, want 0 (wrapped)", v.LastSequence())
	}
	// Reset drops the producer.
	b.Reset(CodecNone)
	b.Append(1, nil, nil, nil)
	v, _ = b.Build()
	if v.HasProducerID() || v.IsTransactional() {
		t.Fatal("Reset kept producer state")
	}
}

func TestSequenceArithmetic(t *testing.T) {
	t.Parallel()
	cases := []struct{ base, delta, last int32 }{
		{0, 0, 0},
		{5, 4, 9},
		{2147483645, 4, 1},
		{math.MaxInt32, 0, math.MaxInt32},
		{math.MaxInt32, 1, 0},
		{math.MaxInt32 - 1, 1, math.MaxInt32},
		{NoSequence, 10, NoSequence},
	}
	for _, c := range cases {
		if got := LastSequence(c.base, c.delta); got != c.last {
			t.Errorf("LastSequence(%d, %d) = %d, want %d", c.base, c.delta, got, c.last)
		}
		if got := FirstSequence(c.last, c.delta); got != c.base {
			t.Errorf("FirstSequence(%d, %d) = %d, want %d", c.last, c.delta, got, c.base)
		}
	}
	if NextSequence(math.MaxInt32) != 0 || NextSequence(7) != 8 {
		t.Error("NextSequence does not wrap at MaxInt32")
	}
	inverse := func(base, delta int32) bool {
		base &= math.MaxInt32
		delta &= 0xffff
		return FirstSequence(LastSequence(base, delta), delta) == base
	}
	if err := quick.Check(inverse, nil); err != nil {
		t.Error(err)
	}
}

func TestVarintEncodings(t *testing.T) {
	t.Parallel()
	known := []struct {
		v   int32
		enc []byte
	}{{0, []byte{0}}, {-1, []byte{1}}, {1, []byte{2}}, {63, []byte{0x7e}}, {64, []byte{0x80, 0x01}},
		{math.MaxInt32, []byte{0xfe, 0xff, 0xff, 0xff, 0x0f}}, {math.MinInt32, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}}}
	for _, k := range known {
		if got := appendVarint(nil, k.v); !bytes.Equal(got, k.enc) {
			t.Errorf("appendVarint(%d) = %x, want %x", k.v, got, k.enc)
		}
		v, n, ok := readVarint(k.enc)
		if !ok || v != k.v || n != len(k.enc) {
			t.Errorf("readVarint(%x) = %d, %d, %v", k.enc, v, n, ok)
		}
	}
	bad := [][]byte{
		{},                                   // empty
		{0x80},                               // ends mid-varint
		{0xff, 0xff, 0xff, 0xff, 0x10},       // 33 bits
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, // six bytes
	}
	for _, b := range bad {
		if _, _, ok := readVarint(b); ok {
			t.Errorf("readVarint(%x) accepted", b)
		}
	}
	if _, _, ok := readVarlong([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}); ok {
		t.Error("readVarlong accepted 65 bits")
	}
	roundTrip32 := func(v int32) bool {
		enc := appendVarint(nil, v)
		got, n, ok := readVarint(enc)
		return ok && got == v && n == len(enc) && n == varintSize(v)
	}
	roundTrip64 := func(v int64) bool {
		enc := appendVarlong(nil, v)
		got, n, ok := readVarlong(enc)
		return ok && got == v && n == len(enc) && n == varlongSize(v)
	}
	if err := quick.Check(roundTrip32, nil); err != nil {
		t.Error(err)
	}
	if err := quick.Check(roundTrip64, nil); err != nil {
		t.Error(err)
	}
}

func TestStampOffsetsKeepsCRC(t *testing.T) {
	t.Parallel()
	b := buildBatch(t, CodecLZ4, sampleRecords()[:3])
	crc := b.CRC()
	b.SetBaseOffset(1 << 40)
	b.SetPartitionLeaderEpoch(9)
	if _, err := Validate(b, 0); err != nil {
		t.Fatalf("stamped batch no longer valid: %v", err)
	}
	if b.CRC() != crc || b.BaseOffset() != 1<<40 || b.PartitionLeaderEpoch() != 9 || b.LastOffset() != 1<<40+2 {
		t.Fatalf("stamp: crc %x->%x base %d epoch %d last %d", crc, b.CRC(), b.BaseOffset(), b.PartitionLeaderEpoch(), b.LastOffset())
	}
	var d Decoder
	it, _ := d.Records(b)
	var r Record
	it.Next(&r)
	it.Next(&r)
	if r.Offset != 1<<40+1 {
		t.Fatalf("record offset %d after stamping", r.Offset)
	}
}

// reseal recomputes the CRC after a test edits CRC-covered bytes.
func reseal(b Batch) Batch {
	binary.BigEndian.PutUint32(b[offCRC:], b.ComputeCRC())
	return b
}

func TestValidateRejects(t *testing.T) {
	t.Parallel()
	good := buildBatch(t, CodecNone, sampleRecords()[:3])
	type mutation struct {
		name string
		edit func(b []byte) []byte
		max  int
		want error
		code int16
	}
	cases := []mutation{
		{"empty", func(b []byte) []byte { return nil }, 0, ErrTruncated, errcode.CorruptMessage},
		{"header cut", func(b []byte) []byte { return b[:40] }, 0, ErrTruncated, errcode.CorruptMessage},
		{"body cut", func(b []byte) []byte { return b[:len(b)-1] }, 0, ErrTruncated, errcode.CorruptMessage},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }, 0, ErrLengthMismatch, errcode.CorruptMessage},
		{"length below header", func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offBatchLength:], 48)
			return b
		}, 0, ErrTooSmall, errcode.CorruptMessage},
		{"negative length", func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offBatchLength:], 0xffffff00)
			return b
		}, 0, ErrTooSmall, errcode.CorruptMessage},
		{"magic 1", func(b []byte) []byte { b[offMagic] = 1; return b }, 0, ErrMagic, errcode.CorruptMessage},
		{"too large", func(b []byte) []byte { return b }, HeaderSize + 10, ErrTooLarge, errcode.MessageTooLarge},
		{"crc", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, 0, ErrCRC, errcode.CorruptMessage},
		{"attributes flip", func(b []byte) []byte { b[offAttributes+1] ^= 0x10; return b }, 0, ErrCRC, errcode.CorruptMessage},
		{"codec 5", func(b []byte) []byte { b[offAttributes+1] |= 5; return reseal(b) }, 0, ErrCodec, errcode.UnsupportedCompressionType},
		{"count above delta", func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offRecordsCount:], 4)
			return reseal(b)
		}, 0, ErrRecordCount, errcode.InvalidRecord},
		{"negative count", func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offRecordsCount:], 0xffffffff)
			return reseal(b)
		}, 0, ErrRecordCount, errcode.InvalidRecord},
		{"count beyond bytes", func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offLastOffsetDelt:], 1e6)
			binary.BigEndian.PutUint32(b[offRecordsCount:], 1e6)
			return reseal(b)
		}, 0, ErrRecordCount, errcode.InvalidRecord},
		{"control compressed", func(b []byte) []byte {
			b[offAttributes+1] = attrControl | attrTransactional | byte(CodecGzip)
			return reseal(b)
		}, 0, ErrControl, errcode.InvalidRecord},
		{"control with 3 records", func(b []byte) []byte {
			b[offAttributes+1] = attrControl | attrTransactional
			return reseal(b)
		}, 0, ErrControl, errcode.InvalidRecord},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.edit(bytes.Clone(good))
			before := bytes.Clone(b)
			_, err := Validate(b, c.max)
			if !errors.Is(err, c.want) {
				t.Fatalf("Validate: %v, want %v", err, c.want)
			}
			if got := errcode.Code(err); got != c.code {
				t.Fatalf("Kafka code %d, want %d", got, c.code)
			}
			if !bytes.Equal(b, before) {
				t.Fatal("Validate modified its input")
			}
		})
	}
}

func TestValidateProduceRules(t *testing.T) {
	t.Parallel()
	plain := buildBatch(t, CodecNone, sampleRecords()[:2])
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"base offset", func() []byte { b := Batch(bytes.Clone(plain)); b.SetBaseOffset(5); return b }(), ErrBaseOffset},
		{"empty", func() []byte {
			b := Batch(bytes.Clone(plain))
			binary.BigEndian.PutUint32(b[offRecordsCount:], 0)
			return reseal(b)
		}(), ErrEmpty},
		{"count below delta", func() []byte {
			b := Batch(bytes.Clone(plain))
			binary.BigEndian.PutUint32(b[offRecordsCount:], 1)
			return reseal(b)
		}(), ErrRecordCount},
		{"control", AppendMarker(nil, Marker{Type: ControlCommit, ProducerID: 1}), ErrClientControl},
		{"pid without sequence", func() []byte {
			b := Batch(bytes.Clone(plain))
			binary.BigEndian.PutUint64(b[offProducerID:], 7)
			return reseal(b)
		}(), ErrSequence},
	}
	for _, c := range cases {
		if _, err := ValidateProduce(c.b, 0); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		} else if errcode.Code(err) != errcode.InvalidRecord {
			t.Errorf("%s: code %d", c.name, errcode.Code(err))
		}
	}
	// The stored-batch rules accept what compaction leaves: fewer records
	// than the offset span, and an empty control batch.
	if _, err := Validate(cases[2].b, 0); err != nil {
		t.Errorf("Validate rejected a compacted batch: %v", err)
	}
}

func TestMarkerLayout(t *testing.T) {
	t.Parallel()
	for _, typ := range []ControlType{ControlAbort, ControlCommit} {
		m := Marker{Type: typ, ProducerID: 77, ProducerEpoch: 3, CoordinatorEpoch: 12, Timestamp: 1234}
		prefix := []byte("prefix")
		out := AppendMarker(bytes.Clone(prefix), m)
		if !bytes.Equal(out[:len(prefix)], prefix) {
			t.Fatal("AppendMarker clobbered dst")
		}
		b, err := Validate(out[len(prefix):], 0)
		if err != nil {
			t.Fatalf("marker invalid: %v", err)
		}
		if len(b) != 78 || b.BatchLength() != 66 || b.Attributes() != 0x30 {
			t.Fatalf("marker size %d batchLength %d attributes %#x", len(b), b.BatchLength(), b.Attributes())
		}
		if b.ProducerID() != 77 || b.ProducerEpoch() != 3 || b.BaseSequence() != -1 || b.MaxTimestamp() != 1234 {
			t.Fatal("marker producer fields")
		}
		want := []byte{0x20, 0, 0, 0, 0x08, 0, 0, 0, byte(typ), 0x0c, 0, 0, 0, 0, 0, 12, 0}
		if !bytes.Equal(b.Records(), want) {
			t.Fatalf("marker record %x, want %x", b.Records(), want)
		}
		c, err := b.Control()
		if err != nil || c.Type != typ || c.CoordinatorEpoch != 12 {
			t.Fatalf("Control() = %+v, %v", c, err)
		}
	}
}

func TestControlShapes(t *testing.T) {
	t.Parallel()
	marker := func(edit func(r []byte) []byte) []byte {
		b := AppendMarker(nil, Marker{Type: ControlCommit, ProducerID: 1})
		recs := edit(bytes.Clone(b[HeaderSize:]))
		b = append(b[:HeaderSize], recs...)
		binary.BigEndian.PutUint32(b[offBatchLength:], uint32(len(b)-LogOverhead))
		return reseal(b)
	}
	short := marker(func(r []byte) []byte {
		// value of 4 bytes instead of 6
		return []byte{0x1c, 0, 0, 0, 0x08, 0, 0, 0, 1, 0x08, 0, 0, 0, 0, 0}
	})
	if _, err := Validate(short, 0); !errors.Is(err, ErrControl) {
		t.Errorf("short marker value: %v", err)
	}
	negVersion := marker(func(r []byte) []byte { r[5] = 0xff; return r })
	if _, err := Validate(negVersion, 0); !errors.Is(err, ErrControl) {
		t.Errorf("negative key version: %v", err)
	}
	higher := marker(func(r []byte) []byte { r[6] = 3; return r })
	if _, err := Validate(higher, 0); err != nil {
		t.Errorf("a higher key version must parse as version 0: %v", err)
	}
	unknown := marker(func(r []byte) []byte { r[8] = 9; return r })
	if b, err := Validate(unknown, 0); err != nil {
		t.Errorf("an unknown control type must be accepted: %v", err)
	} else if c, _ := b.Control(); c.Type != 9 {
		t.Errorf("type %v", c.Type)
	}
	notTxn := Batch(AppendMarker(nil, Marker{Type: ControlAbort, ProducerID: 1}))
	notTxn[offAttributes+1] = attrControl
	if _, err := Validate(reseal(notTxn), 0); !errors.Is(err, ErrControl) {
		t.Errorf("non-transactional marker: %v", err)
	}
}

func TestRecordIterationRejectsMalformed(t *testing.T) {
	t.Parallel()
	good := buildBatch(t, CodecNone, sampleRecords()[:3])
	recStart := HeaderSize
	cases := []struct {
		name string
		edit func(b Batch) Batch
	}{
		{"record length past end", func(b Batch) Batch { b[recStart] = 0x7e; return b }},
		{"record length too short", func(b Batch) Batch { b[recStart] = 2; return b }},
		{"fewer records than count", func(b Batch) Batch {
			binary.BigEndian.PutUint32(b[offRecordsCount:], 4)
			binary.BigEndian.PutUint32(b[offLastOffsetDelt:], 3)
			return b
		}},
		{"more bytes than count", func(b Batch) Batch {
			binary.BigEndian.PutUint32(b[offRecordsCount:], 2)
			return b
		}},
		{"key length past record", func(b Batch) Batch { b[recStart+4] = 0x7e; return b }},
		{"key length below -1", func(b Batch) Batch { b[recStart+4] = 0x03; return b }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := reseal(c.edit(Batch(bytes.Clone(good))))
			var d Decoder
			it, err := d.Records(b)
			if err == nil {
				var r Record
				for it.Next(&r) {
				}
				err = it.Err()
			}
			if !errors.Is(err, ErrRecord) {
				t.Fatalf("got %v, want ErrRecord", err)
			}
		})
	}
}

func TestInflateLimit(t *testing.T) {
	t.Parallel()
	zeros := make([]byte, 1<<20)
	for _, c := range allCodecs[1:] {
		t.Run(c.String(), func(t *testing.T) {
			b := buildBatch(t, c, []testRecord{{key: nil, value: zeros}})
			if len(b) > 64<<10 {
				t.Fatalf("%v did not compress 1 MiB of zeros (%d bytes)", c, len(b))
			}
			d := Decoder{Limit: 512 << 10}
			if _, err := d.Records(b); !errors.Is(err, ErrInflateLimit) {
				t.Fatalf("limit 512 KiB: %v", err)
			}
			d.Limit = 2 << 20
			if _, err := d.Records(b); err != nil {
				t.Fatalf("limit 2 MiB: %v", err)
			}
		})
	}
	// A header claiming more records than the limit could hold fails before
	// any decompression.
	b := buildBatch(t, CodecGzip, []testRecord{{value: []byte("x")}})
	binary.BigEndian.PutUint32(b[offRecordsCount:], 1<<30)
	d := Decoder{Limit: 1 << 20}
	if _, err := d.Records(b); !errors.Is(err, ErrInflateLimit) {
		t.Fatalf("claimed count: %v", err)
	}
}

func TestCorruptCompressedStream(t *testing.T) {
	t.Parallel()
	for _, c := range allCodecs[1:] {
		b := buildBatch(t, c, sampleRecords()[:3])
		recs := b.Records()
		for i := range recs {
			recs[i] ^= 0x5a
		}
		var d Decoder
		_, err := d.Records(b)
		if err == nil {
			// A stream may still decode to garbage; then the records
			// must fail to parse.
			it, _ := d.Records(b)
			var r Record
			for it.Next(&r) {
			}
			err = it.Err()
		}
		if err == nil {
			t.Errorf("%v: garbage stream accepted", c)
		} else if errcode.Code(err) != errcode.CorruptMessage && errcode.Code(err) != errcode.InvalidRecord {
			t.Errorf("%v: code %d for %v", c, errcode.Code(err), err)
		}
	}
}

func TestSizeWalksConcatenatedBatches(t *testing.T) {
	t.Parallel()
	var file []byte
	var sizes []int
	for i := range 5 {
		b := buildBatch(t, allCodecs[i], sampleRecords()[:i+1])
		file = append(file, b...)
		sizes = append(sizes, len(b))
	}
	for i := 0; len(file) > 0; i++ {
		n, err := Size(file)
		if err != nil || n != sizes[i] {
			t.Fatalf("batch %d: size %d, %v; want %d", i, n, err, sizes[i])
		}
		file = file[n:]
	}
}

func TestRandomRecordsRoundTrip(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 200; iter++ {
		n := 1 + rng.IntN(50)
		recs := make([]testRecord, n)
		for i := range recs {
			recs[i] = testRecord{ts: rng.Int64N(1 << 40), key: randBytes(rng, 20), value: randBytes(rng, 300)}
			for range rng.IntN(3) {
				h := Header{Key: randBytes(rng, 8), Value: randBytes(rng, 8)}
				if h.Key == nil {
					h.Key = []byte{}
				}
				recs[i].headers = append(recs[i].headers, h)
			}
		}
		codec := allCodecs[rng.IntN(len(allCodecs))]
		b := buildBatch(t, codec, recs)
		if _, err := ValidateProduce(b, 0); err != nil {
			t.Fatalf("iteration %d (%v): %v", iter, codec, err)
		}
		// Expected timestamps are the absolute ones given.
		checkRecords(t, b, recs)
	}
}

func randBytes(rng *rand.Rand, max int) []byte {
	switch rng.IntN(5) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	b := make([]byte, rng.IntN(max))
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return b
}
