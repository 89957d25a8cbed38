package batch

import (
	"bytes"
	"fmt"
	"testing"
)

// TestBuilderLevels: a level set on the Builder reaches the compressor
// (the output changes with it) and every level decodes to the same
// records; switching back to the default gives the default's bytes.
func TestBuilderLevels(t *testing.T) {
	t.Parallel()
	var payload []byte
	for i := range 2000 {
		payload = fmt.Appendf(payload, "record %d of a batch that compresses %d\n", i, i%7)
	}
	build := func(codec Codec, level int) []byte {
		b := NewBuilder(codec)
		b.SetLevel(level)
		b.Append(1, nil, payload, nil)
		out, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		v, err := Validate(bytes.Clone(out), 0)
		if err != nil {
			t.Fatal(err)
		}
		var d Decoder
		recs, err := d.Records(v)
		if err != nil {
			t.Fatal(err)
		}
		var r Record
		if !recs.Next(&r) || !bytes.Equal(r.Value, payload) {
			t.Fatalf("%v level %d: record does not decode back", codec, level)
		}
		return bytes.Clone(out)
	}
	for _, c := range []struct {
		codec    Codec
		low, top int
	}{{CodecGzip, 1, 9}, {CodecZstd, 1, 19}, {CodecLZ4, 9, 17}} {
		low, top := build(c.codec, c.low), build(c.codec, c.top)
		if len(top) >= len(low) {
			t.Errorf("%v: level %d gave %d bytes, level %d %d", c.codec, c.top, len(top), c.low, len(low))
		}
	}
	// One Builder, the level changed between batches.
	b := NewBuilder(CodecGzip)
	b.SetLevel(1)
	b.Append(1, nil, payload, nil)
	one, _ := b.Build()
	n1 := len(one)
	b.Reset(CodecGzip)
	b.SetLevel(9)
	b.Append(1, nil, payload, nil)
	nine, _ := b.Build()
	if len(nine) >= n1 {
		t.Fatalf("level change on one Builder: %d then %d bytes", n1, len(nine))
	}
}
