package bench

import (
	"math/bits"
	"sync/atomic"
)

// The run keeps two latency records per producer. The exact one is an HDR
// histogram that only its producer goroutine touches, merged when the run
// ends. The other, intervalHist, is read and reset every second by the
// sampler for the live p99 and the timeline: log-linear buckets of atomic
// counters, 16 per power of two (values within 1/16, about 6%, of the
// truth), so neither side takes a lock.

const (
	subBits    = 4
	subBuckets = 1 << subBits
	// numBuckets covers values below 2^44 ns (about 4.9 hours).
	numBuckets = (44 - subBits + 1) * subBuckets
)

type intervalHist struct {
	counts [numBuckets]atomic.Uint64
}

// bucketOf returns the bucket of v (nanoseconds).
func bucketOf(v int64) int {
	if v < subBuckets {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - subBits - 1 // v>>e is in [16, 32)
	i := (e+1)*subBuckets + int(uint64(v)>>e) - subBuckets
	return min(i, numBuckets-1)
}

// bucketValue returns the middle of bucket i's range.
func bucketValue(i int) int64 {
	if i < subBuckets {
		return int64(i)
	}
	e := i/subBuckets - 1
	lo := int64(subBuckets+i%subBuckets) << e
	return lo + (int64(1)<<e)/2
}

func (h *intervalHist) record(v int64) { h.counts[bucketOf(v)].Add(1) }

// drainInto adds h's counts to dst and zeroes them.
func (h *intervalHist) drainInto(dst *[numBuckets]uint64) {
	for i := range h.counts {
		if h.counts[i].Load() != 0 {
			dst[i] += h.counts[i].Swap(0)
		}
	}
}

// quantile returns the value at quantile q (0..1) of counts, 0 if empty.
func quantile(counts *[numBuckets]uint64, q float64) int64 {
	var total uint64
	for _, c := range counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := uint64(q*float64(total) + 0.5)
	rank = min(max(rank, 1), total)
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen >= rank {
			return bucketValue(i)
		}
	}
	return bucketValue(numBuckets - 1)
}
