package batch

import (
	"bytes"
	"testing"
)

// The hot paths must not allocate once warm. These are tests, not
// benchmarks, so that a regression fails CI instead of drifting a number.

func TestZeroAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts are checked in the full run")
	}
	value := bytes.Repeat([]byte("v"), 100)
	hdrs := []Header{{Key: []byte("k"), Value: []byte("v")}}
	b := NewBuilder(CodecNone)
	build := func() {
		b.Reset(CodecNone)
		b.SetProducer(1, 0, 0)
		for i := range 1000 {
			b.Append(int64(i), nil, value, hdrs)
		}
		if _, err := b.Build(); err != nil {
			t.Fatal(err)
		}
	}
	build()
	if n := testing.AllocsPerRun(20, build); n != 0 {
		t.Errorf("warm Build (codec none, 1000 records): %v allocs, want 0", n)
	}
	out, _ := b.Build()
	batch := bytes.Clone(out)
	if n := testing.AllocsPerRun(20, func() {
		if _, err := Validate(batch, 0); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Validate: %v allocs, want 0", n)
	}
	var d Decoder
	iterate := func() {
		it, err := d.Records(batch)
		if err != nil {
			t.Fatal(err)
		}
		var r Record
		var h Header
		for it.Next(&r) {
			hi := r.Headers()
			for hi.Next(&h) {
			}
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
	}
	if n := testing.AllocsPerRun(20, iterate); n != 0 {
		t.Errorf("record iteration: %v allocs, want 0", n)
	}
	dst := make([]byte, 0, 128)
	if n := testing.AllocsPerRun(20, func() {
		dst = AppendMarker(dst[:0], Marker{Type: ControlCommit, ProducerID: 1})
	}); n != 0 {
		t.Errorf("AppendMarker: %v allocs, want 0", n)
	}
}
