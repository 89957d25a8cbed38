package engine

// javaUTF16Units calls emit with the UTF-16 code units of the String that
// Java's new String(bytes, UTF_8) makes of s. Where s is not well-formed
// UTF-8 the JDK's decoder (String.decodeUTF8_UTF16) puts one U+FFFD for a
// malformed sequence of as many bytes as the rules below consume, which
// differs from Go's one U+FFFD per bad byte:
//
//   - C2..DF lead: a bad second byte gives U+FFFD for the lead alone.
//   - E0..EF lead: a bad second byte (or E0 then 80..9F, an overlong form)
//     consumes the lead; a bad third byte the lead and the second; a
//     decoded surrogate all three.
//   - F0..F4 lead: a bad second byte (F0 then outside 90..BF, F4 then
//     outside 80..8F) consumes the lead; a bad third, two; a bad fourth or
//     a code point outside the supplementary planes, three.
//   - A lead cut off by the end whose bytes so far are valid gives one
//     U+FFFD for all that is left.
//   - Any other byte (80..C1, F5..FF) is U+FFFD alone.
func javaUTF16Units(s string, emit func(uint16)) {
	const repl = 0xFFFD
	cont := func(b byte) bool { return b&0xC0 == 0x80 }
	n := len(s)
	for i := 0; i < n; {
		b1 := s[i]
		i++
		switch {
		case b1 < 0x80:
			emit(uint16(b1))
		case b1 >= 0xC2 && b1 <= 0xDF:
			if i >= n {
				emit(repl)
				return
			}
			if b2 := s[i]; cont(b2) {
				emit(uint16(b1&0x1F)<<6 | uint16(b2&0x3F))
				i++
			} else {
				emit(repl) // the lead alone
			}
		case b1 >= 0xE0 && b1 <= 0xEF:
			bad2 := func(b2 byte) bool { return (b1 == 0xE0 && b2&0xE0 == 0x80) || !cont(b2) }
			if i+1 >= n {
				// Cut off by the end: the lead alone if what follows it
				// is already wrong, else all that is left.
				if i < n && bad2(s[i]) {
					emit(repl)
					continue
				}
				emit(repl)
				return
			}
			b2, b3 := s[i], s[i+1]
			switch {
			case bad2(b2):
				emit(repl) // the lead alone
			case !cont(b3):
				emit(repl) // lead and second byte
				i++
			default:
				c := uint16(b1&0x0F)<<12 | uint16(b2&0x3F)<<6 | uint16(b3&0x3F)
				if c >= 0xD800 && c <= 0xDFFF {
					c = repl // an encoded surrogate: all three bytes
				}
				emit(c)
				i += 2
			}
		case b1 >= 0xF0 && b1 <= 0xF7:
			bad2 := func(b2 byte) bool {
				return b1 > 0xF4 || (b1 == 0xF0 && (b2 < 0x90 || b2 > 0xBF)) || (b1 == 0xF4 && b2&0xF0 != 0x80) || !cont(b2)
			}
			if i+2 >= n {
				if b1 > 0xF4 || (i < n && bad2(s[i])) {
					emit(repl) // the lead alone
					continue
				}
				if i+1 < n && !cont(s[i+1]) {
					emit(repl) // lead and second byte
					i++
					continue
				}
				emit(repl)
				return
			}
			b2, b3, b4 := s[i], s[i+1], s[i+2]
			uc := rune(b1&0x07)<<18 | rune(b2&0x3F)<<12 | rune(b3&0x3F)<<6 | rune(b4&0x3F)
			if !cont(b2) || !cont(b3) || !cont(b4) || uc < 0x10000 || uc > 0x10FFFF {
				emit(repl)
				switch {
				case bad2(b2):
				case !cont(b3):
					i++
				default:
					i += 2
				}
				continue
			}
			uc -= 0x10000
			emit(uint16(0xD800 + uc>>10))
			emit(uint16(0xDC00 + uc&0x3FF))
			i += 3
		default:
			emit(repl)
		}
	}
}
