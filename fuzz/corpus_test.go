package fuzz

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemlog/idemlog/batch"
)

var genCorpus = flag.Bool("gen-corpus", false, "rewrite the seed-* files under testdata/fuzz")

// TestGenCorpus writes the committed seed corpora. Seeds are named seed-*;
// anything else in the directories is a fuzzer finding and is left alone.
func TestGenCorpus(t *testing.T) {
	if !*genCorpus {
		t.Skip("run with -gen-corpus to rewrite testdata/fuzz")
	}
	g := &corpus{t: t, files: map[string]map[string]string{}}
	genValidate(g)
	genRecords(g)
	genRoundTrip(g)
	genDecompress(g)
	genControl(g)
	genMarker(g)
	for target, files := range g.files {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		old, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
		for _, p := range old {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%s: %d seeds", target, len(files))
	}
}

type corpus struct {
	t     *testing.T
	files map[string]map[string]string
}

// add records one seed in Go's corpus file format ("go test fuzz v1").
func (g *corpus) add(target, name string, args ...any) {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, a := range args {
		switch v := a.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", v)
		case byte:
			fmt.Fprintf(&b, "byte(%#02x)\n", v)
		case int16, int32, int64:
			fmt.Fprintf(&b, "%T(%d)\n", v, v)
		default:
			g.t.Fatalf("seed %s/%s: unsupported argument type %T", target, name, a)
		}
	}
	if g.files[target] == nil {
		g.files[target] = map[string]string{}
	}
	if _, dup := g.files[target][name]; dup {
		g.t.Fatalf("duplicate seed %s/%s", target, name)
	}
	g.files[target][name] = b.String()
}

// sampleRecords covers null and empty keys and values, headers, and a
// timestamp that goes backwards.
func appendSample(b *batch.Builder) {
	b.Append(1000, []byte("k1"), []byte("v1"), nil)
	b.Append(999, nil, []byte("null key"), nil)
	b.Append(1005, []byte{}, []byte{}, nil)
	b.Append(1001, []byte("null value"), nil, nil)
	b.Append(1002, []byte("h"), []byte("with headers"), []batch.Header{
		{Key: []byte("a"), Value: []byte("1")},
		{Key: []byte("nullv"), Value: nil},
		{Key: []byte{}, Value: []byte{}},
	})
	b.Append(1003, []byte("rep"), bytes.Repeat([]byte("0123456789abcdef"), 12), nil)
}

func build(codec batch.Codec, raw bool, setup func(*batch.Builder)) []byte {
	b := batch.NewBuilder(codec)
	b.SnappyRaw = raw
	setup(b)
	out, err := b.Build()
	if err != nil {
		panic(err)
	}
	return bytes.Clone(out)
}

// plainSection is the uncompressed records section of appendSample.
func plainSection() []byte {
	return build(batch.CodecNone, false, appendSample)[batch.HeaderSize:]
}

// reseal recomputes the CRC after a header edit.
func reseal(b []byte) []byte {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

// edit returns a copy of b with f applied and the CRC recomputed.
func edit(b []byte, f func([]byte)) []byte {
	c := bytes.Clone(b)
	f(c)
	return reseal(c)
}

func genValidate(g *corpus) {
	const T = "FuzzValidate"
	none := int32(0)
	for _, e := range encodings {
		g.add(T, "valid-"+e.String(), build(e.codec, e.raw, appendSample), byte(0), none)
	}
	idem := build(batch.CodecZstd, false, func(b *batch.Builder) {
		b.SetProducer(42, 3, math.MaxInt32-1)
		b.SetTransactional(true)
		appendSample(b)
	})
	g.add(T, "idempotent-txn-zstd", idem, byte(0), none)
	plain := build(batch.CodecNone, false, appendSample)
	commit := batch.AppendMarker(nil, batch.Marker{Type: batch.ControlCommit, ProducerID: 42, ProducerEpoch: 3, CoordinatorEpoch: 9, Timestamp: 1700000000000})
	abort := batch.AppendMarker(nil, batch.Marker{Type: batch.ControlAbort, ProducerID: 42, ProducerEpoch: 3, Timestamp: 5})
	g.add(T, "marker-commit", commit, byte(0), none)
	g.add(T, "marker-abort", abort, byte(0), none)
	g.add(T, "two-batches", append(bytes.Clone(plain), commit...), byte(0), none)
	g.add(T, "compacted", seal(hdr{attrs: 0, lastOffsetDelta: 5, baseTs: 10, maxTs: 20, producerID: 1, baseSequence: 100, count: 1},
		[]byte{0x0c, 0, 0, 6, 1, 1, 0}), byte(0), none)
	g.add(T, "compacted-empty", seal(hdr{lastOffsetDelta: 9, baseTs: -1, maxTs: -1, producerID: 1, baseSequence: 100}, nil), byte(0), none)
	g.add(T, "control-empty", seal(hdr{attrs: 0x30, lastOffsetDelta: 0, producerID: 1, baseSequence: -1}, nil), byte(0), none)
	g.add(T, "control-unknown-type", seal(hdr{attrs: 0x20, producerID: -1, baseSequence: -1, count: 1},
		markerRecord(0, 3, 0, 0)), byte(0), none)
	g.add(T, "control-commit-not-txn", edit(commit, func(b []byte) { b[22] = 0x20 }), byte(0), none)
	g.add(T, "control-compressed", edit(commit, func(b []byte) { b[22] = 0x31 }), byte(0), none)
	g.add(T, "control-two-records", edit(commit, func(b []byte) { b[60] = 2; b[26] = 1 }), byte(0), none)
	g.add(T, "control-key-version-neg", edit(commit, func(b []byte) { b[66] = 0xff }), byte(0), none)
	g.add(T, "control-bad-record", edit(commit, func(b []byte) { b[61] = 0x22 }), byte(0), none)
	g.add(T, "control-value-version-neg", edit(commit, func(b []byte) { b[71] = 0x80 }), byte(0), none)
	g.add(T, "log-append-time", edit(plain, func(b []byte) { b[22] |= 0x08; b[35] = 0x7f }), byte(0), none)
	g.add(T, "delete-horizon", edit(plain, func(b []byte) { b[22] |= 0x40 }), byte(0), none)
	g.add(T, "stamped", func() []byte {
		b := bytes.Clone(plain)
		batch.Batch(b).SetBaseOffset(1 << 40)
		batch.Batch(b).SetPartitionLeaderEpoch(7)
		return b
	}(), byte(0), none)

	g.add(T, "bad-truncated", plain[:len(plain)-1], byte(0), none)
	g.add(T, "bad-short", plain[:16], byte(0), none)
	g.add(T, "bad-trailing", append(bytes.Clone(plain), 0), byte(0), none)
	g.add(T, "bad-too-small", edit(plain[:61], func(b []byte) { binary.BigEndian.PutUint32(b[8:], 48) }), byte(0), none)
	g.add(T, "bad-negative-length", edit(plain, func(b []byte) { binary.BigEndian.PutUint32(b[8:], 0xfffffff0) }), byte(0), none)
	g.add(T, "bad-magic", edit(plain, func(b []byte) { b[16] = 1 }), byte(0), none)
	g.add(T, "bad-crc", func() []byte { b := bytes.Clone(plain); b[17] ^= 1; return b }(), byte(0), none)
	g.add(T, "bad-codec", edit(plain, func(b []byte) { b[22] |= 7 }), byte(0), none)
	g.add(T, "bad-count-negative", edit(plain, func(b []byte) { binary.BigEndian.PutUint32(b[57:], 0xffffffff) }), byte(0), none)
	g.add(T, "bad-count-over-delta", edit(plain, func(b []byte) { b[60]++ }), byte(0), none)
	g.add(T, "bad-count-over-bytes", edit(plain, func(b []byte) { b[25], b[26], b[59], b[60] = 0x0f, 0xff, 0x0f, 0xff }), byte(0), none)
	g.add(T, "bad-too-large", plain, byte(0), int32(100))
	g.add(T, "produce-base-offset", edit(plain, func(b []byte) { b[7] = 1 }), byte(0), none)
	g.add(T, "produce-no-sequence", edit(plain, func(b []byte) { b[43] = 0 }), byte(0), none)
	g.add(T, "produce-count-short", edit(plain, func(b []byte) { b[26]++ }), byte(0), none)
	g.add(T, "produce-empty", seal(hdr{producerID: -1, baseSequence: -1}, nil), byte(0), none)
	g.add(T, "fix-all-garbage", bytes.Repeat([]byte{0x5a}, 90), byte(fixLength|fixMagic|fixCRC), none)
	g.add(T, "fix-crc-bad-record", edit(plain, func(b []byte) { b[61] = 0xff }), byte(fixCRC), none)
	g.add(T, "bad-compressed-records", edit(build(batch.CodecGzip, false, appendSample), func(b []byte) { b[70] ^= 0xff }), byte(0), none)
}

func genRecords(g *corpus) {
	const T = "FuzzRecords"
	sec := plainSection()
	n := int32(6)
	z := int64(0)
	for _, e := range encodings {
		fl := byte(recCompress)
		if e.raw {
			fl |= recRawSnappy
		}
		g.add(T, "plain-"+e.String(), byte(e.codec), sec, n, fl, int64(1000), int64(1700000000000))
		g.add(T, "stream-"+e.String(), byte(e.codec), compress(e.codec, sec, e.raw), n, byte(0), z, z)
	}
	g.add(T, "log-append-time", byte(0), sec, n, byte(recLogAppendTime|recTransactional), int64(math.MaxInt64-3), int64(math.MinInt64))
	g.add(T, "empty", byte(0), []byte{}, int32(0), byte(0), z, z)
	g.add(T, "empty-zstd", byte(batch.CodecZstd), []byte{}, int32(0), byte(recCompress), z, z)
	g.add(T, "bad-count-short", byte(0), sec, n-1, byte(0), z, z)
	g.add(T, "bad-count-long", byte(0), sec, n+1, byte(recCompress), z, z)
	g.add(T, "bad-count-negative", byte(batch.CodecLZ4), sec, int32(-1), byte(recCompress), z, z)
	g.add(T, "bad-count-over-limit", byte(batch.CodecGzip), sec, int32(limit/minRecordSize+1), byte(recCompress), z, z)
	g.add(T, "bad-trailing", byte(0), append(bytes.Clone(sec), 0), n, byte(0), z, z)
	g.add(T, "bad-codec", byte(6), sec, n, byte(0), z, z)
	g.add(T, "bad-stream", byte(batch.CodecZstd), sec, n, byte(0), z, z)

	// Single records, hand-encoded: length | attrs | tsDelta | offDelta |
	// key | value | headerCount | headers.
	rec := func(body ...byte) []byte { return append([]byte{byte(len(body) << 1)}, body...) }
	one := func(name string, section []byte) {
		g.add(T, name, byte(0), section, int32(1), byte(0), int64(5), int64(100))
	}
	one("rec-min", rec(0, 0, 0, 1, 1, 0))
	one("rec-empty-key-value", rec(0, 0, 0, 0, 0, 0))
	one("rec-header-null-value", rec(0, 0, 0, 1, 1, 2, 2, 'h', 1))
	one("rec-header-empty-key", rec(0, 2, 4, 0, 2, 'v', 2, 0, 1))
	one("bad-header-null-key", rec(0, 0, 0, 1, 1, 2, 1, 1))
	one("bad-key-length-minus-two", rec(0, 0, 0, 3, 1, 0))
	one("bad-header-count-negative", rec(0, 0, 0, 1, 1, 1))
	one("bad-header-count-large", rec(0, 0, 0, 1, 1, 0x7e, 0, 1))
	one("bad-value-past-record", rec(0, 0, 0, 1, 0x10, 'a', 0))
	one("bad-record-short", rec(0, 0, 0, 1, 1))
	one("bad-record-extra-byte", rec(0, 0, 0, 1, 1, 0, 0))
	one("bad-record-length-past-end", []byte{0x20, 0, 0, 0, 1, 1, 0})
	one("bad-record-length-negative", []byte{0x01, 0, 0, 0, 1, 1, 0})
	// Varint edges: a 5-byte int32 whose last byte is 0x0f is the largest
	// legal one; 0x10 overflows. For varlongs the 10th byte may be 0 or 1.
	one("varint-5-max", rec(0, 0, 0xfe, 0xff, 0xff, 0xff, 0x0f, 1, 1, 0))
	one("bad-varint-5-overflow", rec(0, 0, 0xfe, 0xff, 0xff, 0xff, 0x1f, 1, 1, 0))
	one("bad-varint-6-bytes", rec(0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 1, 1, 0))
	one("varint-non-minimal", rec(0, 0, 0x80, 0x80, 0x00, 1, 1, 0))
	one("varlong-10-max", rec(0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 1, 1, 0))
	one("bad-varlong-10-overflow", rec(0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 1, 1, 0))
	one("bad-varlong-11-bytes", rec(0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0, 1, 1, 0))
	one("bad-record-length-overflow", []byte{0xff, 0xff, 0xff, 0xff, 0x1f, 0, 0, 0, 1, 1, 0})
}

func genRoundTrip(g *corpus) {
	const T = "FuzzRoundTrip"
	g.add(T, "empty", []byte{}, int64(0))
	g.add(T, "one-null", []byte{0, 0x00, 0}, int64(1))
	g.add(T, "one-empty", []byte{0, 0x05, 1}, int64(-1))
	g.add(T, "keys-values", []byte{0, 0x0a, 3, 'k', 'e', 'y', 2, 5, 'v', 'a', 'l', 'u', 'e', 0x49, 0x7f, 2, 'k', '2', 1}, int64(1<<40))
	g.add(T, "headers", []byte{0, 0xe8, 2, 'k', 'k', 1, 0x00, 0x0a, 1, 'a', 1, 'b', 0x05, 0x03, 0x2a, 4, 'h', 'k', 'e', 'y', 0, 0x0f, 0, 0, 0, 0}, int64(3))
	g.add(T, "timestamps", []byte{0, 0x02, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0x03, 1, 0x03, 0, 0x01, 0xff, 0x03, 2, 0x03, 3}, int64(math.MaxInt64))
	g.add(T, "big-value", []byte{0, 0x1a, 1, 'k', 4, 'a', 'b', 'c', 'd', 0x90, 0x00, 0x12, 0, 0x01, 0x00}, int64(7))
	g.add(T, "idempotent-txn", []byte{3, 0, 0, 0, 0, 0, 0, 0, 42, 0, 5, 0x7f, 0xff, 0xff, 0xfe, 0, 0, 0, 0, 0x0a, 1, 'x', 2, 1, 'y'}, int64(0))
	g.add(T, "idempotent-no-sequence", []byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0x0a, 1, 'x', 2, 1, 'y'}, int64(9))
	g.add(T, "not-idempotent-negative-pid", []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0x00}, int64(9))
	many := []byte{0}
	for i := range 200 {
		many = append(many, byte(i), byte(i*7), byte(i), byte(i*13))
	}
	g.add(T, "many", many, int64(-5))
}

func genDecompress(g *corpus) {
	const T = "FuzzDecompress"
	sec := plainSection()
	big := make([]byte, 2<<20) // inflates past the 1 MiB limit
	for _, e := range encodings {
		name := e.String()
		s := compress(e.codec, sec, e.raw)
		g.add(T, "valid-"+name, byte(e.codec), s)
		g.add(T, "empty-"+name, byte(e.codec), compress(e.codec, nil, e.raw))
		if e.codec == batch.CodecNone {
			continue
		}
		g.add(T, "truncated-"+name, byte(e.codec), s[:len(s)*2/3])
		g.add(T, "flipped-"+name, byte(e.codec), func() []byte { c := bytes.Clone(s); c[len(c)/2] ^= 0x10; return c }())
		g.add(T, "nothing-"+name, byte(e.codec), []byte{})
	}
	gz := compress(batch.CodecGzip, []byte("first member "), false)
	g.add(T, "gzip-multistream", byte(batch.CodecGzip), append(bytes.Clone(gz), compress(batch.CodecGzip, []byte("second"), false)...))
	g.add(T, "gzip-trailing-garbage", byte(batch.CodecGzip), append(bytes.Clone(gz), "junk"...))
	// Inputs that inflate past the limit cost the most per run, and the
	// fuzzer minimizes each interesting input at length proportional to its
	// size, so the committed bombs are the small ones: a zstd frame that
	// declares its size and snappy lengths (below). The small-limit check in
	// FuzzDecompress covers the streaming codecs.
	g.add(T, "bomb-zstd", byte(batch.CodecZstd), compress(batch.CodecZstd, big, false))
	g.add(T, "bomb-gzip-small-limit", byte(batch.CodecGzip), compress(batch.CodecGzip, big[:8<<10], false))
	g.add(T, "bomb-lz4-small-limit", byte(batch.CodecLZ4), compress(batch.CodecLZ4, big[:8<<10], false))
	zs := compress(batch.CodecZstd, []byte("first frame "), false)
	g.add(T, "zstd-two-frames", byte(batch.CodecZstd), append(bytes.Clone(zs), zs...))
	g.add(T, "zstd-skippable", byte(batch.CodecZstd), append([]byte{0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 'a', 'b', 'c'}, zs...))

	xhdr := append(bytes.Clone(refXerialMagic), 0, 0, 0, 1, 0, 0, 0, 1)
	g.add(T, "xerial-header-only", byte(batch.CodecSnappy), xhdr)
	g.add(T, "xerial-zero-block", byte(batch.CodecSnappy), append(bytes.Clone(xhdr), 0, 0, 0, 0))
	g.add(T, "xerial-block-past-end", byte(batch.CodecSnappy), append(bytes.Clone(xhdr), 0, 0, 1, 0, 5, 0x10, 'a'))
	g.add(T, "xerial-length-truncated", byte(batch.CodecSnappy), append(bytes.Clone(xhdr), 0, 0))
	// A valid block, then one that declares 2 MiB: the limit must trip on
	// the declaration, before the garbage behind it.
	g.add(T, "xerial-bomb", byte(batch.CodecSnappy), append(compress(batch.CodecSnappy, []byte("ok"), false), 0, 0, 0, 5, 0x80, 0x80, 0x80, 0x01, 0xff))
	g.add(T, "xerial-magic-short", byte(batch.CodecSnappy), xhdr[:12])
	g.add(T, "snappy-declared-over-limit", byte(batch.CodecSnappy), []byte{0x80, 0x80, 0x80, 0x01, 0x00})
	g.add(T, "snappy-declared-over-uint32", byte(batch.CodecSnappy), []byte{0xff, 0xff, 0xff, 0xff, 0x7f, 0x00})
	g.add(T, "snappy-literal-long", byte(batch.CodecSnappy), append([]byte{70, 60 << 2, 69}, bytes.Repeat([]byte{'x'}, 70)...))
	g.add(T, "snappy-copy-overlap", byte(batch.CodecSnappy), []byte{10, 0x00, 'a', 0x15, 0x01})
	g.add(T, "snappy-copy2", byte(batch.CodecSnappy), []byte{8, 0x0c, 'a', 'b', 'c', 'd', 0x0e, 4, 0})
	g.add(T, "snappy-copy4", byte(batch.CodecSnappy), []byte{8, 0x0c, 'a', 'b', 'c', 'd', 0x0f, 4, 0, 0, 0})
	g.add(T, "snappy-copy-offset-past-start", byte(batch.CodecSnappy), []byte{8, 0x0c, 'a', 'b', 'c', 'd', 0x01, 5})
	g.add(T, "snappy-copy-offset-zero", byte(batch.CodecSnappy), []byte{12, 0x0c, 'a', 'b', 'c', 'd', 0x01, 4, 0x01, 0})
	for _, c := range []byte{5, 7, 0x80, 0xff} {
		g.add(T, fmt.Sprintf("codec-%d", int8(c)), c, []byte{1, 2, 3})
	}
}

func genControl(g *corpus) {
	const T = "FuzzControl"
	add := func(name string, sec []byte, count int32, flags byte) { g.add(T, name, sec, count, flags) }
	add("commit", markerRecord(0, 1, 0, 9), 1, 0x10)
	add("abort", markerRecord(0, 0, 0, -1), 1, 0x10)
	add("commit-not-txn", markerRecord(0, 1, 0, 9), 1, 0)
	add("commit-log-append-time", markerRecord(0, 1, 0, 9), 1, 0x18)
	add("commit-key-version-1", markerRecord(1, 1, 0, 9), 1, 0x10)
	add("commit-compacted-delta", markerRecord(0, 1, 0, 9), 1, 0x10|ctlSpareDelta)
	add("leader-change-not-txn", markerRecord(0, 2, 0, 0), 1, 0)
	add("unknown-type", markerRecord(0, 0x7fff, -1, 0), 1, 0x40)
	add("negative-type", markerRecord(0, -3, 0, 0), 1, 0)
	add("empty", nil, 0, 0x10)
	add("empty-with-bytes", markerRecord(0, 1, 0, 9), 0, 0x10)
	add("bad-two-records", append(markerRecord(0, 1, 0, 9), markerRecord(0, 1, 0, 9)...), 2, 0x10)
	add("bad-compressed", markerRecord(0, 1, 0, 9), 1, 0x11)
	add("bad-key-version", markerRecord(-1, 1, 0, 9), 1, 0x10)
	add("bad-value-version", markerRecord(0, 0, -2, 9), 1, 0x10)
	add("bad-trailing", append(markerRecord(0, 1, 0, 9), 0), 1, 0x10)
	add("bad-truncated", markerRecord(0, 1, 0, 9)[:15], 1, 0x10)
	add("bad-count-negative", markerRecord(0, 1, 0, 9), -1, 0x10)
	add("bad-codec", markerRecord(0, 1, 0, 9), 1, 0x17)
	// key 3 bytes; value 5 bytes; null key; null value; extra header.
	add("bad-key-short", []byte{0x1e, 0, 0, 0, 0x06, 0, 0, 1, 0x0c, 0, 0, 0, 0, 0, 9, 0}, 1, 0x10)
	add("bad-value-short", []byte{0x1e, 0, 0, 0, 0x08, 0, 0, 0, 1, 0x0a, 0, 0, 0, 0, 9, 0}, 1, 0x10)
	add("bad-key-null", []byte{0x18, 0, 0, 0, 0x01, 0x0c, 0, 0, 0, 0, 0, 9, 0}, 1, 0x10)
	add("bad-value-null", []byte{0x14, 0, 0, 0, 0x08, 0, 0, 0, 1, 0x01, 0}, 1, 0x10)
	add("value-null-unknown-type", []byte{0x14, 0, 0, 0, 0x08, 0, 0, 0, 9, 0x01, 0}, 1, 0)
	add("with-header", []byte{0x26, 0, 0, 0, 0x08, 0, 0, 0, 1, 0x0c, 0, 0, 0, 0, 0, 9, 2, 2, 'h', 1}, 1, 0x10)
	add("bad-record", []byte{0x20, 0, 0, 0, 0x08, 0, 0}, 1, 0x10)
}

func genMarker(g *corpus) {
	const T = "FuzzMarker"
	g.add(T, "commit", int16(1), int64(42), int16(3), int32(7), int64(1700000000000), []byte{})
	g.add(T, "abort-prefixed", int16(0), int64(math.MaxInt64), int16(math.MaxInt16), int32(math.MinInt32), int64(math.MinInt64), []byte("prefix bytes"))
	g.add(T, "leader-change", int16(2), int64(-1), int16(-1), int32(-1), int64(-1), []byte{})
	g.add(T, "negative-type", int16(-1), int64(0), int16(0), int32(0), int64(0), []byte{0})
}
