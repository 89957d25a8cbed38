package fuzz

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/idemlog/idemlog/batch"
)

// smallLimit is a second bound, so that inputs near it test the limit
// checks themselves.
const smallLimit = 4096

// warm is a valid stream per codec with known plaintext, decoded before and
// after each fuzz input on the same Decoder to catch state that leaks from one
// call into the next.
var warm = sync.OnceValues(func() ([]byte, map[batch.Codec][]byte) {
	plain := bytes.Repeat([]byte("warm-up records section "), 1700) // 40 KiB: two xerial blocks
	for i := range plain {
		if i%97 == 0 {
			plain[i] = byte(i >> 7)
		}
	}
	streams := map[batch.Codec][]byte{}
	for c := batch.CodecNone; c <= batch.CodecZstd; c++ {
		streams[c] = compress(c, plain, false)
	}
	return plain, streams
})

func outcomeOf(t *testing.T, what string, err error) outcome {
	t.Helper()
	if err == nil {
		return outOK
	}
	if sentinelOf(t, what, err, batch.ErrDecompress, batch.ErrInflateLimit) == batch.ErrInflateLimit {
		return outLimit
	}
	return outCorrupt
}

// refGunzip decodes with the standard library, an independent gzip reader.
func refGunzip(src []byte, limit int) ([]byte, outcome) {
	// Member by member, so that each header's FLG byte can be checked:
	// RFC 1952 requires an error when a reserved bit (5-7) is set, which
	// idemlog's decoder does and the standard library's does not.
	br := bytes.NewReader(src)
	var out []byte
	for first := true; first || br.Len() > 0; first = false {
		at := len(src) - br.Len()
		if len(src)-at > 3 && src[at+3]&0xe0 != 0 {
			return nil, outCorrupt
		}
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, outCorrupt
		}
		zr.Multistream(false)
		member, err := io.ReadAll(io.LimitReader(zr, int64(limit-len(out))+1))
		out = append(out, member...)
		if len(out) > limit {
			return nil, outLimit
		}
		if err != nil {
			return nil, outCorrupt
		}
	}
	return out, outOK
}

// FuzzDecompress feeds arbitrary bytes to every codec. Gzip and snappy are
// checked against independent decoders; all codecs against a fresh Decoder,
// a reused one and a smaller limit.
func FuzzDecompress(f *testing.F) {
	// Small seeds: the fuzzer minimizes every interesting input, which
	// costs time in proportion to its size.
	for c := batch.CodecNone; c <= batch.CodecZstd; c++ {
		f.Add(byte(c), compress(c, []byte("a small records section"), false))
	}
	f.Add(byte(batch.CodecSnappy), compress(batch.CodecSnappy, []byte("raw block"), true))
	f.Add(byte(5), []byte{1, 2, 3})

	f.Fuzz(func(t *testing.T, codec byte, data []byte) {
		if len(data) > maxInput {
			return
		}
		c := batch.Codec(int8(codec))
		known := c >= batch.CodecNone && c <= batch.CodecZstd

		fresh := batch.Decoder{Limit: limit}
		out, err := fresh.Decompress(c, data)
		if !known {
			wantErr(t, "Decompress with unknown codec", err, batch.ErrCodec)
			return
		}
		o := outcomeOf(t, "Decompress", err)
		switch {
		case err != nil && out != nil:
			t.Fatalf("Decompress returned %d bytes and %v", len(out), err)
		case c == batch.CodecNone && !bytes.Equal(out, data):
			t.Fatal("CodecNone did not return its input")
		case c != batch.CodecNone && len(out) > limit:
			t.Fatalf("Decompress returned %d bytes, limit %d", len(out), limit)
		}
		out = bytes.Clone(out)

		var (
			ref  []byte
			refO outcome
		)
		switch c {
		case batch.CodecGzip:
			ref, refO = refGunzip(data, limit)
		case batch.CodecSnappy:
			ref, refO = refUnsnappy(data, limit)
		}
		if c == batch.CodecGzip || c == batch.CodecSnappy {
			if o != refO || !bytes.Equal(out, ref) {
				t.Fatalf("%v: Decompress %v (%d bytes, %v), reference %v (%d bytes)", c, o, len(out), err, refO, len(ref))
			}
		}

		plain, streams := warm()
		reused := batch.Decoder{Limit: limit}
		decodeWarm := func(when string) {
			got, err := reused.Decompress(c, streams[c])
			if err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("%v: warm-up stream %s the input: %d bytes, %v", c, when, len(got), err)
			}
		}
		decodeWarm("before")
		out2, err2 := reused.Decompress(c, data)
		if o2 := outcomeOf(t, "Decompress on a reused Decoder", err2); o2 != o || !bytes.Equal(out2, out) {
			t.Fatalf("%v: reused Decoder %v (%d bytes, %v), fresh %v (%d bytes)", c, o2, len(out2), err2, o, len(out))
		}
		decodeWarm("after")

		if c == batch.CodecNone {
			return
		}
		small := batch.Decoder{Limit: smallLimit}
		out3, err3 := small.Decompress(c, data)
		o3 := outcomeOf(t, "Decompress under a small limit", err3)
		switch {
		case len(out3) > smallLimit:
			t.Fatalf("%v: %d bytes under limit %d", c, len(out3), smallLimit)
		case o3 == outOK && (o != outOK || !bytes.Equal(out3, out)):
			t.Fatalf("%v: small limit gives %d bytes, large limit %v", c, len(out3), o)
		case o == outOK && len(out) > smallLimit && o3 != outLimit:
			t.Fatalf("%v: %d bytes under limit %d: %v, want %v", c, len(out), smallLimit, err3, batch.ErrInflateLimit)
		case o == outOK && len(out) <= smallLimit && o3 != outOK:
			// zstd refuses frames whose window exceeds the limit even when
			// their content is small: the window is what it must allocate.
			if !(c == batch.CodecZstd && errors.Is(err3, batch.ErrInflateLimit)) {
				t.Fatalf("%v: %d bytes fit limit %d, got %v", c, len(out), smallLimit, err3)
			}
		}
	})
}
