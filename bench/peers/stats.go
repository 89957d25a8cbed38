package main

import (
	"slices"
	"time"
)

// Latency holds percentiles of a latency sample, in microseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
	N   int     `json:"n"`
}

// latencyOf sorts ns (nanoseconds) in place and returns its percentiles.
// Samples are kept whole (8 bytes each) rather than in a histogram: a run
// has at most a few hundred thousand, and exact ranks need no tuning.
func latencyOf(ns []int64) Latency {
	if len(ns) == 0 {
		return Latency{}
	}
	slices.Sort(ns)
	at := func(q float64) float64 {
		i := min(len(ns)-1, int(q*float64(len(ns))))
		return float64(ns[i]) / float64(time.Microsecond)
	}
	return Latency{P50: at(0.50), P99: at(0.99), Max: at(1), N: len(ns)}
}

// median returns the median of v (the mean of the middle two for an even
// count), 0 for none. v is not modified.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}
