package batch

// Kafka varints are protobuf-style zig-zag: an int32 takes at most 5 bytes and
// an int64 at most 10. The decoders are strict: a value that needs more bits
// than its type holds is an error rather than silently truncated, so every
// accepted byte string has exactly one meaning.

// readVarint decodes a zig-zag varint (int32) from b. ok is false when b ends
// mid-varint or the value does not fit in 32 bits.
func readVarint(b []byte) (v int32, n int, ok bool) {
	if len(b) > 0 && b[0] < 0x80 {
		u := uint32(b[0])
		return int32(u>>1) ^ -int32(u&1), 1, true
	}
	var u uint32
	for i := 0; i < 5; i++ {
		if i >= len(b) {
			return 0, 0, false
		}
		c := b[i]
		if i == 4 && c > 0x0f {
			return 0, 0, false
		}
		u |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int32(u>>1) ^ -int32(u&1), i + 1, true
		}
	}
	return 0, 0, false
}

// readVarlong decodes a zig-zag varlong (int64) from b.
func readVarlong(b []byte) (v int64, n int, ok bool) {
	if len(b) > 0 && b[0] < 0x80 {
		u := uint64(b[0])
		return int64(u>>1) ^ -int64(u&1), 1, true
	}
	var u uint64
	for i := 0; i < 10; i++ {
		if i >= len(b) {
			return 0, 0, false
		}
		c := b[i]
		if i == 9 && c > 0x01 {
			return 0, 0, false
		}
		u |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i + 1, true
		}
	}
	return 0, 0, false
}

func appendUvarint(b []byte, u uint64) []byte {
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}

func appendVarint(b []byte, v int32) []byte {
	return appendUvarint(b, uint64(uint32(v<<1)^uint32(v>>31)))
}

func appendVarlong(b []byte, v int64) []byte {
	return appendUvarint(b, uint64(v<<1)^uint64(v>>63))
}

func uvarintSize(u uint64) int {
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

func varintSize(v int32) int  { return uvarintSize(uint64(uint32(v<<1) ^ uint32(v>>31))) }
func varlongSize(v int64) int { return uvarintSize(uint64(v<<1) ^ uint64(v>>63)) }
