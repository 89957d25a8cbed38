package fuzz

import (
	"testing"

	"github.com/idemlog/idemlog/batch"
)

// Flag bits of FuzzRecords. The attribute bits are copied into the header as
// they are; the others steer the harness.
const (
	recRawSnappy     = 0x01 // with recCompress: raw snappy block, not xerial
	recLogAppendTime = 0x08 // attribute bit 3
	recTransactional = 0x10 // attribute bit 4
	recDeleteHorizon = 0x40 // attribute bit 6
	recCompress      = 0x80 // section is plaintext: compress it with the codec
	recAttrBits      = recLogAppendTime | recTransactional | recDeleteHorizon
)

// FuzzRecords wraps a fuzzer-chosen records section in a header with a
// correct CRC, so that every input reaches decompression and record parsing,
// and checks the Decoder against the reference parser record by record, and
// the append path's CheckRecords against the reference's verdict.
func FuzzRecords(f *testing.F) {
	// The smallest record: length 6, attrs 0, tsDelta 0, offDelta 0,
	// null key, null value, no headers.
	one := []byte{0x0c, 0, 0, 0, 1, 1, 0}
	f.Add(byte(0), one, int32(1), byte(0), int64(0), int64(0))
	f.Add(byte(batch.CodecZstd), one, int32(1), byte(recCompress), int64(7), int64(-1))
	f.Add(byte(batch.CodecSnappy), one, int32(1), byte(recCompress|recRawSnappy|recLogAppendTime), int64(0), int64(1))
	f.Add(byte(batch.CodecNone), one[:6], int32(1), byte(0), int64(0), int64(0))
	f.Add(byte(batch.CodecGzip), []byte{}, int32(0), byte(recCompress), int64(0), int64(0))

	f.Fuzz(func(t *testing.T, codec byte, section []byte, count int32, flags byte, baseOffset, baseTs int64) {
		if len(section) > maxInput {
			return
		}
		c := batch.Codec(codec & 7)
		if flags&recCompress != 0 {
			section = compress(c, section, flags&recRawSnappy != 0)
		}
		delta := int32(0)
		if count > 0 {
			delta = count - 1
		}
		raw := seal(hdr{
			baseOffset:      baseOffset,
			attrs:           uint16(c) | uint16(flags&recAttrBits),
			lastOffsetDelta: delta,
			baseTs:          baseTs,
			// Distinct from any record timestamp the fuzzer aims at, so
			// that LogAppendTime's override shows.
			maxTs:        baseTs ^ 0x5a5a5a5a,
			producerID:   -1,
			baseSequence: -1,
			count:        count,
		}, section)

		b, err := batch.Parse(raw)
		if err != nil {
			t.Fatalf("Parse of a sealed batch: %v", err)
		}
		_, verr := batch.Validate(raw, 0)
		if want := refValidate(raw, 0); want != nil {
			wantErr(t, "Validate", verr, want)
		} else if verr != nil {
			t.Fatalf("Validate: %v, reference accepts", verr)
		}

		// Twice with one Decoder: the second pass runs on buffers and
		// codec state the first left behind.
		d := batch.Decoder{Limit: limit}
		checkRecords(t, &d, b)
		checkRecords(t, &d, b)
		checkCheckRecords(t, b)
	})
}
