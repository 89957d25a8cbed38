package fuzz

import (
	"bytes"
	"encoding/binary"
	"math"
	"sync"
	"testing"

	"github.com/idemlog/idemlog/batch"
)

// maxPlain bounds the records a FuzzRoundTrip input expands to: large enough
// for several xerial (32 KiB) blocks and two lz4 (64 KiB) ones, small enough
// to keep six encodings per input fast.
const maxPlain = 96 << 10

// The Builder and Decoder live across inputs, as they do in a producer or a
// reader, so that state one input leaves behind meets the next; a fresh zstd
// encoder per input would also cost more than the rest of the target. A
// failure that does not reproduce on its own points at such state.
var (
	rtMu  sync.Mutex
	rtBld batch.Builder
	rtDec = batch.Decoder{Limit: limit}
)

type rtRecord struct {
	ts         int64
	key, value []byte
	headers    []batch.Header
}

type rtInput struct {
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	idempotent    bool
	transactional bool
	records       []rtRecord
}

// source hands out the fuzz input a piece at a time; past the end it yields
// zeros, so every input means something.
type source struct{ b []byte }

func (s *source) byte() byte {
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c
}

func (s *source) bytes(n int) []byte {
	n = min(n, len(s.b))
	v := s.b[:n:n]
	s.b = s.b[n:]
	return bytes.Clone(v)
}

func (s *source) uint64() uint64 {
	var buf [8]byte
	for i := range buf {
		buf[i] = s.byte()
	}
	return binary.BigEndian.Uint64(buf[:])
}

// field returns nil (null), empty, or up to max bytes of input. Empty and
// null are both needed: they are distinct on the wire.
func (s *source) field(mode byte, max int) []byte {
	switch mode & 3 {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	return s.bytes(int(s.byte()) % (max + 1))
}

var extremeTimestamps = [...]int64{math.MinInt64, math.MaxInt64, -1, 0}

// deriveRecords turns fuzz bytes into a producer setup and records.
func deriveRecords(data []byte) rtInput {
	s := &source{b: data}
	cfg := s.byte()
	in := rtInput{
		producerID:    -1,
		producerEpoch: -1,
		baseSequence:  -1,
		idempotent:    cfg&1 != 0,
		transactional: cfg&2 != 0,
	}
	if in.idempotent {
		in.producerID = int64(s.uint64())
		in.producerEpoch = int16(s.byte())<<8 | int16(s.byte())
		in.baseSequence = int32(s.uint64())
	}
	total := 0
	var ts int64
	for len(s.b) > 0 && len(in.records) < 1000 && total < maxPlain {
		flag := s.byte()
		switch flag & 3 {
		case 1:
			ts += int64(int8(s.byte()))
		case 2:
			ts = int64(s.uint64())
		case 3:
			ts = extremeTimestamps[s.byte()&3]
		}
		r := rtRecord{ts: ts, key: s.field(flag>>2, 64)}
		if flag&0x10 != 0 {
			// A long, compressible value: a few input bytes stand for
			// up to 64 KiB, enough to span codec blocks.
			pat := s.bytes(int(s.byte()%8) + 1)
			n := min(int(s.byte())<<8|int(s.byte()), maxPlain-total)
			if len(pat) > 0 {
				r.value = bytes.Repeat(pat, n/len(pat)+1)[:n]
			} else {
				r.value = make([]byte, n)
			}
		} else {
			r.value = s.field(s.byte(), 64)
		}
		for range flag >> 5 {
			hf := s.byte()
			r.headers = append(r.headers, batch.Header{Key: s.field(hf, 16), Value: s.field(hf>>2, 16)})
		}
		total += len(r.key) + len(r.value) + 16
		in.records = append(in.records, r)
	}
	return in
}

type encoding struct {
	codec batch.Codec
	raw   bool
}

func (e encoding) String() string {
	if e.raw {
		return e.codec.String() + "-raw"
	}
	return e.codec.String()
}

var encodings = []encoding{
	{batch.CodecNone, false},
	{batch.CodecGzip, false},
	{batch.CodecSnappy, false},
	{batch.CodecSnappy, true},
	{batch.CodecLZ4, false},
	{batch.CodecZstd, false},
}

// FuzzRoundTrip builds fuzzer-chosen records with every codec and checks that
// the batch is a valid client append that decodes to exactly those records,
// before and after the leader stamps its offset.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{}, int64(0))
	f.Add([]byte{0, 0x2a, 5, 'k', 'e', 'y', '!', '!', 2, 3, 'v', 'a', 'l', 0x01}, int64(1000))
	f.Add([]byte{3, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0x93, 2, 3, 'a', 'b', 'c', 0xff, 0xff}, int64(-1))
	f.Add([]byte{0, 0x13, 0, 2, 'x', 'y', 0x80, 0x00, 0x20, 3, 0x12, 'h'}, int64(math.MaxInt64))

	f.Fuzz(func(t *testing.T, data []byte, stamp int64) {
		if len(data) > maxInput {
			return
		}
		in := deriveRecords(data)
		rtMu.Lock()
		defer rtMu.Unlock()
		bld, d := &rtBld, &rtDec
		var plain []byte // the uncompressed section, from CodecNone
		for _, enc := range encodings {
			bld.Reset(enc.codec)
			bld.SnappyRaw = enc.raw
			if in.idempotent {
				bld.SetProducer(in.producerID, in.producerEpoch, in.baseSequence)
			}
			bld.SetTransactional(in.transactional)
			for _, r := range in.records {
				bld.Append(r.ts, r.key, r.value, r.headers)
			}
			if bld.Count() != len(in.records) {
				t.Fatalf("%v: Count() = %d after %d appends", enc, bld.Count(), len(in.records))
			}
			b, err := bld.Build()
			if len(in.records) == 0 {
				wantErr(t, "Build with no records", err, batch.ErrBuild)
				return
			}
			if err != nil {
				t.Fatalf("%v: Build: %v", enc, err)
			}
			if enc.codec == batch.CodecNone {
				if bld.Size() != len(b) {
					t.Fatalf("Size() = %d, uncompressed batch has %d bytes", bld.Size(), len(b))
				}
				plain = bytes.Clone(b.Records())
			}
			checkBuilt(t, enc, in, b, d, plain, stamp)
		}
	})
}

func checkBuilt(t *testing.T, enc encoding, in rtInput, b batch.Batch, d *batch.Decoder, plain []byte, stamp int64) {
	t.Helper()
	n := int32(len(in.records))
	vp, err := batch.ValidateProduce(b, 0)
	if in.producerID >= 0 && in.baseSequence < 0 {
		wantErr(t, "ValidateProduce without base sequence", err, batch.ErrSequence)
		if vp, err = batch.Validate(b, 0); err != nil {
			t.Fatalf("%v: Validate: %v", enc, err)
		}
	} else if err != nil {
		t.Fatalf("%v: ValidateProduce: %v", enc, err)
	}
	maxTs := in.records[0].ts
	for _, r := range in.records {
		maxTs = max(maxTs, r.ts)
	}
	switch {
	case vp.Codec() != enc.codec || vp.IsControl() || vp.LogAppendTime() || vp.IsTransactional() != in.transactional:
		t.Fatalf("%v: attributes %#x", enc, vp.Attributes())
	case vp.RecordsCount() != n || vp.LastOffsetDelta() != n-1:
		t.Fatalf("%v: count %d, delta %d, want %d records", enc, vp.RecordsCount(), vp.LastOffsetDelta(), n)
	case vp.ProducerID() != in.producerID || vp.ProducerEpoch() != in.producerEpoch || vp.BaseSequence() != in.baseSequence:
		t.Fatalf("%v: producer %d/%d/%d, want %d/%d/%d", enc, vp.ProducerID(), vp.ProducerEpoch(), vp.BaseSequence(),
			in.producerID, in.producerEpoch, in.baseSequence)
	case vp.BaseTimestamp() != in.records[0].ts || vp.MaxTimestamp() != maxTs:
		t.Fatalf("%v: timestamps %d..%d, want %d..%d", enc, vp.BaseTimestamp(), vp.MaxTimestamp(), in.records[0].ts, maxTs)
	case vp.BaseOffset() != 0 || vp.PartitionLeaderEpoch() != -1:
		t.Fatalf("%v: base offset %d, leader epoch %d", enc, vp.BaseOffset(), vp.PartitionLeaderEpoch())
	}

	// Every codec must carry the same uncompressed section.
	sec, err := d.Decompress(enc.codec, vp.Records())
	if err != nil {
		t.Fatalf("%v: Decompress: %v", enc, err)
	}
	if !bytes.Equal(sec, plain) {
		t.Fatalf("%v: decompressed section differs from the uncompressed batch's", enc)
	}
	if recs, ok := refParseRecords(sec, n); !ok || len(recs) != int(n) {
		t.Fatalf("%v: reference parser rejects the built section", enc)
	}

	readBack(t, enc, in, vp, d, 0)
	// Stamping is what the leader does on append: the batch stays valid
	// and only absolute offsets move.
	vp.SetBaseOffset(stamp)
	vp.SetPartitionLeaderEpoch(int32(stamp))
	if _, err := batch.Validate(vp, 0); err != nil {
		t.Fatalf("%v: Validate after SetBaseOffset(%d): %v", enc, stamp, err)
	}
	if _, err := batch.ValidateProduce(vp, 0); stamp != 0 {
		wantErr(t, "ValidateProduce of a stamped batch", err, batch.ErrBaseOffset)
	}
	readBack(t, enc, in, vp, d, stamp)
}

// readBack decodes b and demands exactly the records of in.
func readBack(t *testing.T, enc encoding, in rtInput, b batch.Batch, d *batch.Decoder, base int64) {
	t.Helper()
	it, err := d.Records(b)
	if err != nil {
		t.Fatalf("%v: Records: %v", enc, err)
	}
	var r batch.Record
	var h batch.Header
	i := 0
	for ; it.Next(&r); i++ {
		if i >= len(in.records) {
			t.Fatalf("%v: more than %d records", enc, len(in.records))
		}
		w := &in.records[i]
		switch {
		case r.OffsetDelta != int32(i) || r.Offset != base+int64(i):
			t.Fatalf("%v: record %d: offset delta %d, offset %d", enc, i, r.OffsetDelta, r.Offset)
		case r.Timestamp != w.ts || r.TimestampDelta != w.ts-in.records[0].ts:
			t.Fatalf("%v: record %d: timestamp %d (delta %d), want %d", enc, i, r.Timestamp, r.TimestampDelta, w.ts)
		case r.Attributes != 0:
			t.Fatalf("%v: record %d: attributes %d", enc, i, r.Attributes)
		case !sameBytes(r.Key, w.key) || !sameBytes(r.Value, w.value):
			t.Fatalf("%v: record %d: key/value %q/%.40q, want %q/%.40q", enc, i, r.Key, r.Value, w.key, w.value)
		case r.HeaderCount != len(w.headers):
			t.Fatalf("%v: record %d: %d headers, want %d", enc, i, r.HeaderCount, len(w.headers))
		}
		hs := r.Headers()
		for j, wh := range w.headers {
			if !hs.Next(&h) {
				t.Fatalf("%v: record %d: headers end at %d", enc, i, j)
			}
			// Header keys are never null on the wire: nil goes in as empty.
			wantKey := wh.Key
			if wantKey == nil {
				wantKey = []byte{}
			}
			if !sameBytes(h.Key, wantKey) || !sameBytes(h.Value, wh.Value) {
				t.Fatalf("%v: record %d header %d: %q=%q, want %q=%q", enc, i, j, h.Key, h.Value, wantKey, wh.Value)
			}
		}
		if hs.Next(&h) {
			t.Fatalf("%v: record %d: extra header", enc, i)
		}
	}
	if err := it.Err(); err != nil || i != len(in.records) {
		t.Fatalf("%v: read %d of %d records: %v", enc, i, len(in.records), err)
	}
}
