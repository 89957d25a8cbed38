package producer

import (
	"encoding/binary"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/pidtable"
)

// offBaseSequence is where a v2 batch header keeps its base sequence.
const offBaseSequence = 53

// BenchmarkCheckApply: the producer-state rules of one in-order batch
// (Check, then Apply), without the table lookup around them; and the
// check of an exact retry, which answers from the 5-batch cache.
func BenchmarkCheckApply(b *testing.B) {
	bld := batch.NewBuilder(batch.CodecNone)
	bld.SetProducer(7, 0, 0)
	bld.Append(1, nil, make([]byte, 100), nil)
	v, err := bld.Build()
	if err != nil {
		b.Fatal(err)
	}
	v = append(batch.Batch(nil), v...)
	b.Run("in-order", func(b *testing.B) {
		var s pidtable.State
		b.ReportAllocs()
		seq, off := int32(0), int64(0)
		for b.Loop() {
			binary.BigEndian.PutUint32(v[offBaseSequence:], uint32(seq))
			if _, isDup, err := Check(&s, v); err != nil || isDup {
				b.Fatal(err, isDup)
			}
			Apply(&s, v, off)
			seq, off = seq+1, off+1
		}
	})
	b.Run("retry", func(b *testing.B) {
		var s pidtable.State
		binary.BigEndian.PutUint32(v[offBaseSequence:], 0)
		Apply(&s, v, 0)
		b.ReportAllocs()
		for b.Loop() {
			if _, isDup, err := Check(&s, v); err != nil || !isDup {
				b.Fatal(err, isDup)
			}
		}
	})
}
