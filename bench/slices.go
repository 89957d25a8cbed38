package bench

import (
	"math"
	"slices"
)

// slicePair is one slice of the engine's run and the baseline's slice
// right after it, of the same length, on the same directory.
type slicePair struct {
	engineBytes     int64
	engineSeconds   float64
	baselineBytes   int64
	baselineSeconds float64
	// engineCPU, baselineCPU: the CPU time the process could have had
	// in each slice, in seconds: its own CPU time plus the machine's
	// idle time (what other processes left); 0 where unknown.
	engineCPU, baselineCPU float64
}

// ratio is the engine's bytes per second over the baseline's in the pair,
// 0 where either side wrote nothing.
func (p slicePair) ratio() float64 {
	if p.engineSeconds <= 0 || p.baselineSeconds <= 0 || p.baselineBytes <= 0 {
		return 0
	}
	return (float64(p.engineBytes) / p.engineSeconds) / (float64(p.baselineBytes) / p.baselineSeconds)
}

// cpuRatio is the engine's bytes per second of CPU time it could have had
// over the baseline's, 0 where either is unknown.
func (p slicePair) cpuRatio() float64 {
	if p.engineCPU <= 0 || p.baselineCPU <= 0 || p.baselineBytes <= 0 {
		return 0
	}
	return (float64(p.engineBytes) / p.engineCPU) / (float64(p.baselineBytes) / p.baselineCPU)
}

// RatioSpread is the ratio to the baseline over the pairs of slices of an
// interleaved run: each pair's ratio is the engine's log bytes per second
// in its slice over the baseline's in the slice that follows. Pooled is
// the figure (ratio_to_baseline); Median, Min and Max say where single
// pairs lay and how far they strayed, P25 and P75 where the middle half
// lies.
type RatioSpread struct {
	Slices int     `json:"slices"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	P25    float64 `json:"p25"`
	P75    float64 `json:"p75"`
	// Pooled is the ratio of the sums over the same pairs: the engine's
	// bytes over its seconds (or CPU seconds) in all its slices, over the
	// baseline's.
	Pooled float64 `json:"pooled"`
}

// spreadOf summarizes the pairs' ratios; pairs in which a side wrote
// nothing (a slice cut to nothing by the run's end) are left out.
func spreadOf(pairs []slicePair, ratio func(slicePair) float64) RatioSpread {
	var rs []float64
	var sum slicePair
	for _, p := range pairs {
		if r := ratio(p); r > 0 && !math.IsInf(r, 0) {
			rs = append(rs, r)
			sum.engineBytes += p.engineBytes
			sum.engineSeconds += p.engineSeconds
			sum.engineCPU += p.engineCPU
			sum.baselineBytes += p.baselineBytes
			sum.baselineSeconds += p.baselineSeconds
			sum.baselineCPU += p.baselineCPU
		}
	}
	if len(rs) == 0 {
		return RatioSpread{}
	}
	slices.Sort(rs)
	return RatioSpread{Slices: len(rs), Median: quantileOf(rs, 0.5), Min: rs[0], Max: rs[len(rs)-1],
		P25: quantileOf(rs, 0.25), P75: quantileOf(rs, 0.75), Pooled: ratio(sum)}
}

// quantileOf returns the q-quantile of sorted xs, interpolating linearly
// between the two nearest ranks (so the median of an even count is the
// mean of the middle two).
func quantileOf(xs []float64, q float64) float64 {
	if len(xs) == 1 {
		return xs[0]
	}
	pos := q * float64(len(xs)-1)
	i := int(pos)
	if i >= len(xs)-1 {
		return xs[len(xs)-1]
	}
	frac := pos - float64(i)
	return xs[i] + frac*(xs[i+1]-xs[i])
}

// nextSlice returns the length of the next engine slice: slice, or
// what is left of the run's duration when that is less (0: the run is
// over). In records mode (duration 0) every slice is slice long.
func nextSlice(slice, duration, done float64) float64 {
	if duration <= 0 {
		return slice
	}
	return max(0, min(slice, duration-done))
}
