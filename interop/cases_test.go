package interop

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/idemlog/idemlog/batch"
)

type namedSpec struct {
	name string
	spec spec
}

func plain(recs ...rec) spec {
	return spec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: recs}
}

func withProducer(s spec, pid int64, epoch int16, seq int32, txn bool) spec {
	s.ProducerID, s.ProducerEpoch, s.BaseSequence, s.Transactional = pid, epoch, seq, txn
	return s
}

// fixedCases are the hand-picked shapes every codec is run through in both
// directions. Each one targets a place where two encoders could plausibly
// disagree.
func fixedCases() []namedSpec {
	const ts = 1_700_000_000_000
	rng := rand.New(rand.NewPCG(1, 2))

	// Random bytes do not compress, so the compressed section is larger
	// than 1 MiB too and snappy's xerial framing needs 33+ blocks.
	big := make([]byte, 1<<20+17)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	bigCompressible := bytes.Repeat([]byte("idemlog franz-go interop "), (2<<20)/25)

	many := make([]rec, 5000)
	for i := range many {
		many[i] = rec{
			TS:    ts + int64(i%97) - 40, // deltas of both signs
			Key:   fmt.Appendf(nil, "key-%d", i),
			Value: bytes.Repeat([]byte{byte(i)}, i%300),
		}
		switch i % 7 {
		case 0:
			many[i].Key = nil
		case 1:
			many[i].Value = nil
		case 2:
			many[i].Key = []byte{}
		case 3:
			many[i].Headers = []hdr{{Key: "h", Value: nil}, {Key: "", Value: []byte{}}}
		}
	}

	nullEmpty := []rec{
		{TS: ts, Key: nil, Value: nil},
		{TS: ts, Key: []byte{}, Value: []byte{}},
		{TS: ts, Key: nil, Value: []byte{}},
		{TS: ts, Key: []byte{}, Value: nil},
		{TS: ts, Key: []byte("k"), Value: []byte("v")},
		{TS: ts, Key: []byte{0}, Value: []byte{0, 0}},
	}
	headers := []rec{{
		TS: ts, Key: []byte("k"), Value: []byte("v"),
		Headers: []hdr{
			{Key: "trace-id", Value: []byte("abc123")},
			{Key: "null-value", Value: nil},
			{Key: "empty-value", Value: []byte{}},
			{Key: "", Value: []byte("empty key")},
			{Key: "dup", Value: []byte("1")},
			{Key: "dup", Value: []byte("2")},
			{Key: "utf8-ключ-🔑", Value: []byte{0xff, 0x00, 0xfe}},
		},
	}, {
		TS: ts + 1, Key: nil, Value: nil,
		Headers: []hdr{{Key: "only", Value: nil}},
	}}
	timestamps := []rec{
		{TS: ts, Value: []byte("a")},
		{TS: ts - 5000, Value: []byte("earlier than base")},
		{TS: ts + math.MaxInt32 + 10, Value: []byte("delta beyond int32")},
		{TS: ts + 1, Value: []byte("b")},
	}

	return []namedSpec{
		{"single", plain(rec{TS: ts, Key: []byte("k"), Value: []byte("v")})},
		{"null-empty", plain(nullEmpty...)},
		{"headers", plain(headers...)},
		{"timestamps", plain(timestamps...)},
		{"zero-timestamp", plain(rec{TS: 0, Value: []byte("x")}, rec{TS: -1, Value: []byte("no timestamp")})},
		{"large-value", plain(rec{TS: ts, Key: []byte("big"), Value: big})},
		{"large-key-and-value", plain(rec{TS: ts, Key: big[:300_000], Value: bigCompressible}, rec{TS: ts, Value: []byte("small")})},
		{"many-records", plain(many...)},
		// kgo's producer writes sequence 0, not Java's -1, when it has
		// no producer id (sink.go, seqRecBatch.appendTo).
		{"kgo-no-producer", withProducer(plain(nullEmpty...), -1, -1, 0, false)},
		{"idempotent", withProducer(plain(nullEmpty...), 4242, 7, 100, false)},
		{"idempotent-seq-wrap", withProducer(plain(nullEmpty...), 1, 0, math.MaxInt32-2, false)},
		{"idempotent-max-fields", withProducer(plain(headers...), math.MaxInt64, math.MaxInt16, math.MaxInt32, false)},
		{"transactional", withProducer(plain(headers...), 99, 3, 0, true)},
		{"transactional-many", withProducer(plain(many[:1000]...), 1<<40, 12, 5000, true)},
	}
}

// codecVariant is one way of writing a codec. Snappy has two framings,
// Java's xerial and raw blocks, and kgo's decompressor has to tell them apart
// by content alone.
type codecVariant struct {
	codec     batch.Codec
	snappyRaw bool
}

func (v codecVariant) String() string {
	if v.codec == batch.CodecSnappy {
		if v.snappyRaw {
			return "snappy-raw"
		}
		return "snappy-xerial"
	}
	return v.codec.String()
}

var idemVariants = []codecVariant{
	{batch.CodecNone, false}, {batch.CodecGzip, false}, {batch.CodecSnappy, false},
	{batch.CodecSnappy, true}, {batch.CodecLZ4, false}, {batch.CodecZstd, false},
}
