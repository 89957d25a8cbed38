package fuzz

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
)

// This file holds the slow references the targets compare the batch package
// against. They are written from docs/SEMANTICS.md §1.3 and the snappy
// block format, not from batch's code, and favour being obviously right over
// being fast: a bug shared by both sides would go unnoticed.

// refRecord is one record as the reference reads it.
type refRecord struct {
	attributes     int8
	timestampDelta int64
	offsetDelta    int32
	key, value     []byte
	headers        []refHeader
}

type refHeader struct{ key, value []byte }

// refReader decodes §1.3 fields from a bytes.Reader. Any failure is sticky,
// so a parse can run to its end and be judged once.
type refReader struct {
	r   *bytes.Reader
	bad bool
}

// varint reads a zig-zag varint of at most maxLen bytes whose value must lie
// in [lo, hi]. binary.Varint alone would accept a 5-byte int32 that
// overflows, which Kafka's readers reject, hence the range check.
func (rr *refReader) varint(maxLen int, lo, hi int64) int64 {
	if rr.bad {
		return 0
	}
	var buf [binary.MaxVarintLen64]byte
	for i := 0; i < maxLen; i++ {
		c, err := rr.r.ReadByte()
		if err != nil {
			break
		}
		buf[i] = c
		if c < 0x80 {
			v, n := binary.Varint(buf[:i+1])
			if n != i+1 || v < lo || v > hi {
				break
			}
			return v
		}
	}
	rr.bad = true
	return 0
}

func (rr *refReader) int32() int32 {
	return int32(rr.varint(5, math.MinInt32, math.MaxInt32))
}

func (rr *refReader) int64() int64 {
	return rr.varint(binary.MaxVarintLen64, math.MinInt64, math.MaxInt64)
}

// bytes reads a length-prefixed field; -1 is null when nullable.
func (rr *refReader) bytes(nullable bool) []byte {
	n := rr.int32()
	if rr.bad {
		return nil
	}
	if n == -1 && nullable {
		return nil
	}
	if n < 0 || int64(n) > int64(rr.r.Len()) {
		rr.bad = true
		return nil
	}
	v := make([]byte, n)
	if _, err := io.ReadFull(rr.r, v); err != nil {
		rr.bad = true
		return nil
	}
	return v
}

// refParseRecord reads one record from r.
func refParseRecord(r *bytes.Reader) (refRecord, bool) {
	outer := refReader{r: r}
	length := outer.int32()
	if outer.bad || length < 0 || int64(length) > int64(r.Len()) {
		return refRecord{}, false
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(r, body); err != nil {
		return refRecord{}, false
	}
	in := refReader{r: bytes.NewReader(body)}
	var rec refRecord
	attr, err := in.r.ReadByte()
	if err != nil {
		return refRecord{}, false
	}
	rec.attributes = int8(attr)
	rec.timestampDelta = in.int64()
	rec.offsetDelta = in.int32()
	rec.key = in.bytes(true)
	rec.value = in.bytes(true)
	count := in.int32()
	if in.bad || count < 0 {
		return refRecord{}, false
	}
	for i := int32(0); i < count && !in.bad; i++ {
		var h refHeader
		h.key = in.bytes(false)
		h.value = in.bytes(true)
		rec.headers = append(rec.headers, h)
	}
	if in.bad || in.r.Len() != 0 {
		return refRecord{}, false
	}
	return rec, true
}

// refParseRecords reads exactly count records from data. It returns the
// records that parsed before the first failure, and whether the whole section
// was valid: count records and not a byte more.
func refParseRecords(data []byte, count int32) ([]refRecord, bool) {
	r := bytes.NewReader(data)
	var recs []refRecord
	for i := int32(0); i < count; i++ {
		rec, ok := refParseRecord(r)
		if !ok {
			return recs, false
		}
		recs = append(recs, rec)
	}
	return recs, r.Len() == 0
}

// refControl is a control record decoded by the reference (§1.4).
type refControl struct {
	version, typ     int16
	coordinatorEpoch int32
}

// refParseControl decodes a records section holding one control record.
func refParseControl(section []byte) (refControl, bool) {
	recs, ok := refParseRecords(section, 1)
	if !ok {
		return refControl{}, false
	}
	key, value := recs[0].key, recs[0].value
	if len(key) < 4 {
		return refControl{}, false
	}
	c := refControl{
		version: int16(binary.BigEndian.Uint16(key)),
		typ:     int16(binary.BigEndian.Uint16(key[2:])),
	}
	if c.version < 0 {
		return refControl{}, false
	}
	if c.typ == 0 || c.typ == 1 {
		if len(value) < 6 || int16(binary.BigEndian.Uint16(value)) < 0 {
			return refControl{}, false
		}
		c.coordinatorEpoch = int32(binary.BigEndian.Uint32(value[2:]))
	}
	return c, true
}

// outcome classifies a reference decompression.
type outcome int

const (
	outOK outcome = iota
	outCorrupt
	outLimit
)

func (o outcome) String() string {
	return [...]string{"ok", "corrupt", "over limit"}[o]
}

var refXerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// refUnsnappy decodes a Kafka snappy records section: Java's xerial framing
// when it starts with the xerial magic and holds the 16-byte header, a raw
// snappy block otherwise.
func refUnsnappy(src []byte, limit int) ([]byte, outcome) {
	if len(src) < 16 || !bytes.Equal(src[:8], refXerialMagic) {
		return refSnappyBlock(nil, src, limit)
	}
	var out []byte
	p := 16
	for p < len(src) {
		if len(src)-p < 4 {
			return nil, outCorrupt
		}
		n := uint64(binary.BigEndian.Uint32(src[p:]))
		p += 4
		if n > uint64(len(src)-p) {
			return nil, outCorrupt
		}
		var o outcome
		if out, o = refSnappyBlock(out, src[p:p+int(n)], limit); o != outOK {
			return nil, o
		}
		p += int(n)
	}
	if out == nil {
		out = []byte{}
	}
	return out, outOK
}

// refSnappyBlock appends the decoding of one standard snappy block
// (github.com/google/snappy format_description.txt) to dst. Offsets reach
// back only into this block's own output. The declared length is checked
// against the limit before the body, as the batch package promises.
func refSnappyBlock(dst, src []byte, limit int) ([]byte, outcome) {
	declared, n := binary.Uvarint(src)
	if n <= 0 || n > 5 || declared > math.MaxUint32 {
		return nil, outCorrupt
	}
	if declared > uint64(limit-len(dst)) {
		return nil, outLimit
	}
	start, want := len(dst), len(dst)+int(declared)
	s := src[n:]
	for len(s) > 0 {
		tag := s[0]
		var length, offset int
		switch tag & 3 {
		case 0:
			length = int(tag >> 2)
			s = s[1:]
			if length >= 60 {
				extra := length - 59
				if len(s) < extra {
					return nil, outCorrupt
				}
				length = 0
				for i := 0; i < extra; i++ {
					length |= int(s[i]) << (8 * i)
				}
				s = s[extra:]
			}
			length++
			if length > len(s) || length > want-len(dst) {
				return nil, outCorrupt
			}
			dst = append(dst, s[:length]...)
			s = s[length:]
			continue
		case 1:
			if len(s) < 2 {
				return nil, outCorrupt
			}
			length = 4 + int(tag>>2&7)
			offset = int(tag&0xe0)<<3 | int(s[1])
			s = s[2:]
		case 2:
			if len(s) < 3 {
				return nil, outCorrupt
			}
			length = 1 + int(tag>>2)
			offset = int(binary.LittleEndian.Uint16(s[1:]))
			s = s[3:]
		case 3:
			if len(s) < 5 {
				return nil, outCorrupt
			}
			length = 1 + int(tag>>2)
			offset = int(binary.LittleEndian.Uint32(s[1:]))
			s = s[5:]
		}
		if offset <= 0 || offset > len(dst)-start || length > want-len(dst) {
			return nil, outCorrupt
		}
		for i := 0; i < length; i++ {
			dst = append(dst, dst[len(dst)-offset])
		}
	}
	if len(dst) != want {
		return nil, outCorrupt
	}
	if dst == nil {
		dst = []byte{}
	}
	return dst, outOK
}
