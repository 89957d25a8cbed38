package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// buildRaw seals a batch around a hand-made records section claiming count
// records (producer-less, uncompressed).
func buildRaw(t *testing.T, section []byte, count int32) Batch {
	t.Helper()
	b := NewBuilder(CodecNone)
	b.Append(1, nil, []byte("x"), nil)
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	raw := append(bytes.Clone(out[:HeaderSize]), section...)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[23:], uint32(max(count-1, 0)))
	binary.BigEndian.PutUint32(raw[57:], uint32(count))
	binary.BigEndian.PutUint32(raw[17:], Batch(raw).ComputeCRC())
	v, err := ValidateProduce(raw, 0)
	if err != nil {
		t.Fatalf("ValidateProduce of the test batch: %v", err)
	}
	return v
}

// record encodes one record: offset delta off, value v, no key, no headers.
func record(off int32, v []byte) []byte {
	var body []byte
	body = append(body, 0)                   // attributes
	body = appendVarlong(body, 0)            // timestamp delta
	body = appendVarint(body, off)           // offset delta
	body = appendVarint(body, -1)            // null key
	body = appendVarint(body, int32(len(v))) // value
	body = append(body, v...)
	body = appendVarint(body, 0) // headers
	return append(appendVarint(nil, int32(len(body))), body...)
}

// valuePastRecord is a record whose value length (20) runs past the
// record's own length.
func valuePastRecord() []byte {
	body := []byte{0}
	body = appendVarlong(body, 0)
	body = appendVarint(body, 0)
	body = appendVarint(body, -1)
	body = appendVarint(body, 20)
	body = append(body, bytes.Repeat([]byte("a"), 10)...)
	body = appendVarint(body, 0)
	return append(appendVarint(nil, int32(len(body))), body...)
}

func TestCheckRecords(t *testing.T) {
	t.Parallel()
	two := append(record(0, []byte("aaaaaaaaaa")), record(1, []byte("bbbbbbbbbb"))...)
	cases := []struct {
		name    string
		section []byte
		count   int32
		want    error
	}{
		{"well formed", two, 2, nil},
		{"fewer records than counted", two, 3, ErrRecord},
		{"bytes after the last record", append(bytes.Clone(two), 0), 2, ErrRecord},
		{"offset deltas out of order", append(record(1, []byte("a")), record(0, []byte("b"))...), 2, ErrOffsetDelta},
		{"offset deltas with a hole", append(record(0, []byte("a")), record(2, []byte("b"))...), 2, ErrOffsetDelta},
		// A varint whose tenth byte still has the continuation bit.
		{"bad varint", append(bytes.Repeat([]byte{0xff}, 10), 1), 1, ErrRecord},
		{"value past its record", valuePastRecord(), 1, ErrRecord},
	}
	for _, c := range cases {
		var d Decoder
		err := d.CheckRecords(buildRaw(t, c.section, c.count))
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestCheckRecordsCompressedAndAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts are checked in the full run")
	}
	for _, codec := range []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		b := NewBuilder(codec)
		for i := range 100 {
			b.Append(int64(i), nil, bytes.Repeat([]byte("v"), 100), nil)
		}
		out, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		v := Batch(bytes.Clone(out))
		var d Decoder
		if err := d.CheckRecords(v); err != nil {
			t.Fatalf("%v: %v", codec, err)
		}
		if codec != CodecNone {
			// Garbage in the compressed section fails, typed.
			bad := Batch(bytes.Clone(v))
			for i := HeaderSize; i < len(bad); i++ {
				bad[i] ^= 0x5a
			}
			binary.BigEndian.PutUint32(bad[17:], bad.ComputeCRC())
			if err := d.CheckRecords(bad); err == nil {
				t.Errorf("%v: garbage section accepted", codec)
			}
			continue
		}
		if n := testing.AllocsPerRun(20, func() {
			if err := d.CheckRecords(v); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("CheckRecords (codec none, 100 records): %v allocs, want 0", n)
		}
	}
}
