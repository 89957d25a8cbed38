package batch

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// baselineMemcpy measures, in the same process and run, how fast this machine
// copies a buffer of n bytes: the raw limit a byte-streaming operation is
// reported against, as a ratio.
func baselineMemcpy(n int) (bytesPerSec float64) {
	src := bytes.Repeat([]byte{0xa5}, n)
	dst := make([]byte, n)
	iters := max(1, (256<<20)/n)
	start := time.Now()
	for range iters {
		copy(dst, src)
	}
	return float64(n*iters) / time.Since(start).Seconds()
}

func reportVsMemcpy(b *testing.B, n int) {
	el := b.Elapsed().Seconds()
	if el == 0 {
		return
	}
	got := float64(n) * float64(b.N) / el
	base := baselineMemcpy(n)
	b.ReportMetric(got/1e9, "GB/s")
	b.ReportMetric(base/1e9, "memcpy-GB/s")
	b.ReportMetric(got/base, "x-memcpy")
}

func benchBatch(b *testing.B, codec Codec, records, size int) Batch {
	bld := NewBuilder(codec)
	bld.SetProducer(1, 0, 0)
	value := make([]byte, size)
	for i := range value {
		value[i] = byte('a' + i%23)
	}
	for i := range records {
		bld.Append(int64(i), nil, value, nil)
	}
	out, err := bld.Build()
	if err != nil {
		b.Fatal(err)
	}
	return bytes.Clone(out)
}

// BenchmarkValidate64K: framing + CRC-32C + body checks of a 64 KiB batch.
func BenchmarkValidate64K(b *testing.B) {
	v := benchBatch(b, CodecNone, 64, 1000)
	b.SetBytes(int64(len(v)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Validate(v, 0); err != nil {
			b.Fatal(err)
		}
	}
	reportVsMemcpy(b, len(v))
}

// BenchmarkIterate1000x100: decode every record of an uncompressed batch.
func BenchmarkIterate1000x100(b *testing.B) {
	v := benchBatch(b, CodecNone, 1000, 100)
	var d Decoder
	b.SetBytes(int64(len(v)))
	b.ReportAllocs()
	var r Record
	for b.Loop() {
		it, err := d.Records(v)
		if err != nil {
			b.Fatal(err)
		}
		for it.Next(&r) {
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/record")
}

// BenchmarkBuild reports warm build cost and allocations per codec.
func BenchmarkBuild(b *testing.B) {
	value := make([]byte, 100)
	for i := range value {
		value[i] = byte('a' + i%23)
	}
	for _, c := range allCodecs {
		b.Run(fmt.Sprintf("codec=%v/records=1000x100", c), func(b *testing.B) {
			bld := NewBuilder(c)
			b.ReportAllocs()
			b.SetBytes(int64(1000 * len(value)))
			for b.Loop() {
				bld.Reset(c)
				bld.SetProducer(1, 0, 0)
				for i := range 1000 {
					bld.Append(int64(i), nil, value, nil)
				}
				if _, err := bld.Build(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecode reports warm decompression + iteration per codec.
func BenchmarkDecode(b *testing.B) {
	for _, c := range allCodecs {
		b.Run(fmt.Sprintf("codec=%v/records=1000x100", c), func(b *testing.B) {
			v := benchBatch(b, c, 1000, 100)
			var d Decoder
			var r Record
			b.ReportAllocs()
			b.SetBytes(1000 * 100)
			for b.Loop() {
				it, err := d.Records(v)
				if err != nil {
					b.Fatal(err)
				}
				for it.Next(&r) {
				}
			}
		})
	}
}

// BenchmarkCRC64K: the CRC-32C every append computes over a batch's body,
// alone, against memcpy of the same bytes.
func BenchmarkCRC64K(b *testing.B) {
	v := benchBatch(b, CodecNone, 64, 1000)
	b.SetBytes(int64(len(v) - offAttributes))
	b.ReportAllocs()
	var sink uint32
	for b.Loop() {
		sink += v.ComputeCRC()
	}
	_ = sink
	reportVsMemcpy(b, len(v)-offAttributes)
}

// BenchmarkParseHeader: framing and header checks of a small batch, the
// per-batch fixed cost before the CRC.
func BenchmarkParseHeader(b *testing.B) {
	v := benchBatch(b, CodecNone, 1, 100)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(v); err != nil {
			b.Fatal(err)
		}
	}
}
