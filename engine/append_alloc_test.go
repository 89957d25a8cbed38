package engine

import (
	"bytes"
	"testing"

	"github.com/idemlog/idemlog/batch"
)

// In-process appends of client bytes (Partition.Append, idempotent)
// allocate nothing per batch, uncompressed or compressed. Uncompressed is
// checked in every build, CI's -race one included; compressed batches
// inflate into pooled Decoders, which the race detector's sync.Pool drops
// at random, so they are checked without it.
func TestAppendAllocs(t *testing.T) {
	codecs := []batch.Codec{batch.CodecNone}
	if !raceEnabled {
		codecs = append(codecs, batch.CodecZstd, batch.CodecLZ4)
	}
	for _, codec := range codecs {
		e := openEngine(t, t.TempDir(), Options{})
		e.CreateTopic("t", 1)
		p, _ := e.Partition("t", 0)
		const n = 400
		bs := make([][]byte, n)
		for i := range n {
			b := batch.NewBuilder(codec)
			b.SetProducer(7, 0, int32(i*10))
			for j := range 10 {
				b.Append(int64(j), nil, bytes.Repeat([]byte("v"), 50), nil)
			}
			out, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			bs[i] = bytes.Clone(out)
		}
		i := 0
		// warm up
		for ; i < 50; i++ {
			if _, err := p.Append(bs[i]); err != nil {
				t.Fatal(err)
			}
		}
		a := testing.AllocsPerRun(200, func() {
			if _, err := p.Append(bs[i]); err != nil {
				t.Fatal(err)
			}
			i++
		})
		if a != 0 {
			t.Errorf("codec %v: Append %v allocs per batch, want 0", codec, a)
		}
		e.Close()
	}
}

var raceEnabled bool
