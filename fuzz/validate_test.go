package fuzz

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/idemlog/idemlog/batch"
)

// Fix bits of FuzzValidate: a mutated batch almost never keeps a consistent
// length, magic and CRC, so the fuzzer may ask the harness to repair them
// and reach the checks behind them.
const (
	fixLength = 1 << iota
	fixMagic
	fixCRC
)

func FuzzValidate(f *testing.F) {
	b := batch.NewBuilder(batch.CodecNone)
	b.Append(1, []byte("k"), []byte("v"), nil)
	built, _ := b.Build()
	good := []byte(built)
	f.Add(bytes.Clone(good), byte(0), int32(0))
	f.Add(batch.AppendMarker(nil, batch.Marker{Type: batch.ControlCommit, ProducerID: 1}), byte(0), int32(0))
	f.Add(good[:40], byte(fixLength|fixMagic|fixCRC), int32(0))
	f.Add(bytes.Repeat([]byte{0xff}, 80), byte(fixLength|fixMagic|fixCRC), int32(0))
	f.Add(bytes.Clone(good), byte(0), int32(61))

	f.Fuzz(func(t *testing.T, data []byte, fix byte, maxSize int32) {
		if len(data) > maxInput {
			return
		}
		data = repair(data, fix)

		// A reader walking a file of batches must always make progress.
		for p := 0; p < len(data); {
			n, err := batch.Size(data[p:])
			if err != nil {
				sentinelOf(t, "Size", err, batch.ErrTruncated, batch.ErrTooSmall)
				break
			}
			if n < batch.HeaderSize || n > len(data)-p {
				t.Fatalf("Size = %d with %d bytes left", n, len(data)-p)
			}
			p += n
		}

		size, sizeErr := batch.Size(data)
		p, parseErr := batch.Parse(data)
		switch {
		case sizeErr != nil:
			wantErr(t, "Parse after Size failed", parseErr, sentinelOf(t, "Size", sizeErr))
		case data[16] != batch.Magic:
			wantErr(t, "Parse", parseErr, batch.ErrMagic)
		case parseErr != nil:
			t.Fatalf("Parse: %v, but framing and magic are fine", parseErr)
		case len(p) != size || cap(p) != size:
			t.Fatalf("Parse returned len %d cap %d, Size %d", len(p), cap(p), size)
		}

		v, err := batch.Validate(data, int(maxSize))
		if want := refValidate(data, int(maxSize)); want != nil {
			wantErr(t, "Validate", err, want)
		} else if err != nil {
			t.Fatalf("Validate: %v, reference accepts", err)
		}
		if err == nil {
			checkValid(t, v, int(maxSize))
		}

		vp, perr := batch.ValidateProduce(data, int(maxSize))
		if want := refValidateProduce(data, int(maxSize)); want != nil {
			wantErr(t, "ValidateProduce", perr, want)
		} else if perr != nil {
			t.Fatalf("ValidateProduce: %v, reference accepts", perr)
		}
		if perr == nil && err != nil {
			t.Fatalf("ValidateProduce accepted what Validate rejects (%v)", err)
		}
		if perr == nil && (vp.BaseOffset() != 0 || vp.RecordsCount() != vp.LastOffsetDelta()+1 || vp.RecordsCount() == 0) {
			t.Fatal("ValidateProduce accepted a batch breaking the produce rules")
		}

		if parseErr == nil {
			d := batch.Decoder{Limit: limit}
			checkRecords(t, &d, p)
		}
		if err == nil {
			// The leader stamps these in place; the CRC does not cover them.
			c := batch.Batch(bytes.Clone(v))
			c.SetBaseOffset(int64(binary.BigEndian.Uint64(data[21:])))
			c.SetPartitionLeaderEpoch(int32(binary.BigEndian.Uint32(data[25:])))
			if _, err := batch.Validate(c, int(maxSize)); err != nil {
				t.Fatalf("Validate after stamping offset and epoch: %v", err)
			}
		}
	})
}

// repair applies the fix bits to a copy of data.
func repair(data []byte, fix byte) []byte {
	data = bytes.Clone(data)
	if fix&fixLength != 0 && len(data) >= 12 {
		binary.BigEndian.PutUint32(data[8:], uint32(len(data)-12))
	}
	if fix&fixMagic != 0 && len(data) >= 17 {
		data[16] = batch.Magic
	}
	if fix&fixCRC != 0 && len(data) >= 21 {
		binary.BigEndian.PutUint32(data[17:], crc32.Checksum(data[21:], castagnoli))
	}
	return data
}

// checkValid asserts what every validated batch must satisfy.
func checkValid(t *testing.T, v batch.Batch, maxSize int) {
	t.Helper()
	if maxSize <= 0 {
		maxSize = batch.DefaultMaxBatchSize
	}
	n, err := batch.Size(v)
	switch {
	case err != nil || n != len(v):
		t.Fatalf("valid batch: Size = %d, %v; len %d", n, err, len(v))
	case len(v) > maxSize:
		t.Fatalf("valid batch of %d bytes, limit %d", len(v), maxSize)
	case v.Magic() != batch.Magic:
		t.Fatalf("valid batch with magic %d", v.Magic())
	case v.CRC() != v.ComputeCRC() || v.CRC() != crc32.Checksum(v[21:], castagnoli):
		t.Fatalf("valid batch: stored CRC %08x, ComputeCRC %08x", v.CRC(), v.ComputeCRC())
	case v.RecordsCount() < 0 || int64(v.RecordsCount()) > int64(v.LastOffsetDelta())+1:
		t.Fatalf("valid batch: %d records, last offset delta %d", v.RecordsCount(), v.LastOffsetDelta())
	case v.Codec() < batch.CodecNone || v.Codec() > batch.CodecZstd:
		t.Fatalf("valid batch with codec %v", v.Codec())
	case v.IsControl() && (v.Codec() != batch.CodecNone || v.RecordsCount() > 1):
		t.Fatalf("valid control batch with codec %v and %d records", v.Codec(), v.RecordsCount())
	}
	if v.IsControl() && v.RecordsCount() == 1 {
		c, err := v.Control()
		if err != nil {
			t.Fatalf("valid control batch: Control: %v", err)
		}
		if (c.Type == batch.ControlCommit || c.Type == batch.ControlAbort) && !v.IsTransactional() {
			t.Fatalf("valid %v marker that is not transactional", c.Type)
		}
	}
}

// refValidate is the error Validate must return for data, from §1.1, §1.2
// and §1.4 in Validate's documented order, or nil.
func refValidate(data []byte, maxSize int) error {
	if len(data) < 17 {
		return batch.ErrTruncated
	}
	n := int64(int32(binary.BigEndian.Uint32(data[8:]))) + 12
	switch {
	case n < 61:
		return batch.ErrTooSmall
	case n > int64(len(data)):
		return batch.ErrTruncated
	case n != int64(len(data)):
		return batch.ErrLengthMismatch
	case data[16] != 2:
		return batch.ErrMagic
	}
	if maxSize <= 0 {
		maxSize = 1048588
	}
	if n > int64(maxSize) {
		return batch.ErrTooLarge
	}
	if binary.BigEndian.Uint32(data[17:]) != crc32.Checksum(data[21:], castagnoli) {
		return batch.ErrCRC
	}
	attrs := data[22]
	codec := attrs & 7
	if codec > 4 {
		return batch.ErrCodec
	}
	delta := int32(binary.BigEndian.Uint32(data[23:]))
	count := int32(binary.BigEndian.Uint32(data[57:]))
	if count < 0 || delta < 0 || int64(count) > int64(delta)+1 {
		return batch.ErrRecordCount
	}
	if codec == 0 && int64(count)*minRecordSize > int64(len(data)-61) {
		return batch.ErrRecordCount
	}
	if attrs&0x20 == 0 {
		return nil
	}
	switch {
	case codec != 0:
		return batch.ErrControl
	case count == 0:
		return nil
	case count > 1:
		return batch.ErrControl
	}
	c, ok := refParseControl(data[61:])
	if !ok || (c.typ == 0 || c.typ == 1) && attrs&0x10 == 0 {
		return batch.ErrControl
	}
	return nil
}

// refValidateProduce adds §1.5's client-append rules to refValidate.
func refValidateProduce(data []byte, maxSize int) error {
	if err := refValidate(data, maxSize); err != nil {
		return err
	}
	delta := int32(binary.BigEndian.Uint32(data[23:]))
	count := int32(binary.BigEndian.Uint32(data[57:]))
	switch {
	case binary.BigEndian.Uint64(data[0:]) != 0:
		return batch.ErrBaseOffset
	case count == 0:
		return batch.ErrEmpty
	case int64(count) != int64(delta)+1:
		return batch.ErrRecordCount
	case data[22]&0x20 != 0:
		return batch.ErrClientControl
	case int64(binary.BigEndian.Uint64(data[43:])) >= 0 && int32(binary.BigEndian.Uint32(data[53:])) < 0:
		return batch.ErrSequence
	}
	return nil
}
