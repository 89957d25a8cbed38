package interop

import (
	"bytes"
	"testing"

	"github.com/idemlog/idemlog/batch"
)

// TestFranzToIdemlog: batches laid out by kmsg and compressed by kgo must be
// accepted as a client append and decode to exactly what went in.
func TestFranzToIdemlog(t *testing.T) {
	var d batch.Decoder
	for _, tc := range fixedCases() {
		for _, c := range allCodecs {
			t.Run(tc.name+"/"+c.String(), func(t *testing.T) {
				s := tc.spec
				s.Codec = c
				raw := franzBuild(t, s)
				b, err := batch.ValidateProduce(raw, maxTestBatch)
				if err != nil {
					t.Fatalf("ValidateProduce of franz-go batch: %v", err)
				}
				checkIdemHeader(t, b, s)
				if diff := diffRecords(idemDecode(t, &d, b), s.Records); diff != "" {
					t.Fatalf("idemlog decode of franz-go batch: %s", diff)
				}
			})
		}
	}
}

// TestIdemlogToFranz: batches from batch.Builder must parse with kmsg,
// carry a CRC franz-go agrees with, inflate with kgo's decompressor (both
// snappy framings) and yield exactly what went in.
func TestIdemlogToFranz(t *testing.T) {
	bld := new(batch.Builder)
	for _, tc := range fixedCases() {
		for _, v := range idemVariants {
			t.Run(tc.name+"/"+v.String(), func(t *testing.T) {
				s := tc.spec
				s.Codec = v.codec
				raw := idemBuild(t, bld, s, v.snappyRaw)
				fb := franzDecode(t, raw)
				checkFranzHeader(t, fb, s)
				if diff := diffRecords(fb.model(t), s.Records); diff != "" {
					t.Fatalf("franz-go decode of idemlog batch: %s", diff)
				}
				// Record encoding has one canonical form, so whatever
				// the codec, the inflated section must be kmsg's.
				if want := franzSection(s.Records); !bytes.Equal(fb.Section, want) {
					t.Fatalf("inflated records section differs from kmsg's encoding (%d vs %d bytes)", len(fb.Section), len(want))
				}
			})
		}
	}
}

// TestUncompressedBytesIdentical: with no codec there is nothing left to
// choose, so idemlog's Builder and a kmsg layout must agree on every byte,
// header and CRC included.
func TestUncompressedBytesIdentical(t *testing.T) {
	bld := new(batch.Builder)
	for _, tc := range fixedCases() {
		t.Run(tc.name, func(t *testing.T) {
			idem := idemBuild(t, bld, tc.spec, false)
			franz := franzBuild(t, tc.spec)
			if !bytes.Equal(idem, franz) {
				t.Fatalf("idemlog and franz-go bytes differ at offset %d (lengths %d, %d)",
					firstDiff(idem, franz), len(idem), len(franz))
			}
		})
	}
}

// TestNilHeaderKeyIsEmpty: the Builder documents a nil header key as the
// empty string, since the wire has no null header key; franz-go must read
// it as "".
func TestNilHeaderKeyIsEmpty(t *testing.T) {
	bld := batch.NewBuilder(batch.CodecNone)
	bld.Append(5, nil, nil, []batch.Header{{Key: nil, Value: nil}, {Key: nil, Value: []byte{}}})
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	fb := franzDecode(t, bytes.Clone(b))
	want := []rec{{TS: 5, Headers: []hdr{{Key: "", Value: nil}, {Key: "", Value: []byte{}}}}}
	if diff := diffRecords(fb.model(t), want); diff != "" {
		t.Fatal(diff)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
