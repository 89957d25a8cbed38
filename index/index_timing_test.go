//go:build linux

package index

import (
	"math/rand/v2"
	"testing"
)

// fullOffsetIndex returns a default-size (10 MiB, 1,310,720 entries) offset
// index filled with entries {base+2k+1, 1000(k+1)}.
func fullOffsetIndex(b *testing.B) *OffsetIndex {
	x := mustOpenOffset(b, offsetPath(b), 0)
	for k := int64(0); !x.Full(); k++ {
		if err := x.Append(testBase+2*k+1, 1000*(k+1)); err != nil {
			b.Fatal(err)
		}
	}
	return x
}

func BenchmarkOffsetLookup(b *testing.B) {
	x := fullOffsetIndex(b)
	last := x.LastOffset()
	b.Run("random", func(b *testing.B) {
		r := rand.New(rand.NewPCG(1, 2))
		targets := make([]int64, 1<<16)
		for i := range targets {
			targets[i] = testBase + r.Int64N(last-testBase+1)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			x.Lookup(targets[i&(len(targets)-1)])
			i++
		}
	})
	// Consumers mostly read near the end: the warm-section path.
	b.Run("tail", func(b *testing.B) {
		b.ReportAllocs()
		i := int64(0)
		for b.Loop() {
			x.Lookup(last - i&1023)
			i++
		}
	})
}

func BenchmarkOffsetAppend(b *testing.B) {
	x := mustOpenOffset(b, offsetPath(b), 0)
	b.ReportAllocs()
	k := int64(0)
	for b.Loop() {
		if x.Full() {
			b.StopTimer()
			x.Reset()
			k = 0
			b.StartTimer()
		}
		if err := x.Append(testBase+k+1, 1000*(k+1)); err != nil {
			b.Fatal(err)
		}
		k++
	}
}

func BenchmarkTimeLookup(b *testing.B) {
	x := mustOpenTime(b, timePath(b), 0)
	for k := int64(0); !x.Full(); k++ {
		if err := x.MaybeAppend(1_700_000_000_000+10*k, testBase+k); err != nil {
			b.Fatal(err)
		}
	}
	lastTs, _ := x.LastEntry()
	r := rand.New(rand.NewPCG(3, 4))
	targets := make([]int64, 1<<16)
	for i := range targets {
		targets[i] = 1_700_000_000_000 + r.Int64N(lastTs-1_700_000_000_000+1)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		x.Lookup(targets[i&(len(targets)-1)])
		i++
	}
}

func BenchmarkTimeMaybeAppend(b *testing.B) {
	x := mustOpenTime(b, timePath(b), 0)
	b.ReportAllocs()
	k := int64(0)
	for b.Loop() {
		if x.Full() {
			b.StopTimer()
			x.Reset()
			k = 0
			b.StartTimer()
		}
		if err := x.MaybeAppend(k, testBase+k); err != nil {
			b.Fatal(err)
		}
		k++
	}
}
