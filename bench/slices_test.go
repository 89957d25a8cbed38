package bench

import (
	"math"
	"testing"
)

func TestQuantileOf(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		q    float64
		want float64
	}{
		{[]float64{3}, 0.5, 3},
		{[]float64{1, 2, 3}, 0.5, 2},
		{[]float64{1, 2, 3, 10}, 0.5, 2.5}, // even count: the mean of the middle two
		{[]float64{1, 2, 3, 4, 5}, 0.25, 2},
		{[]float64{1, 2, 3, 4, 5}, 0.75, 4},
		{[]float64{1, 2}, 0.25, 1.25},
		{[]float64{1, 2}, 1, 2},
		{[]float64{1, 2}, 0, 1},
	} {
		if got := quantileOf(c.xs, c.q); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("quantile %v of %v = %v, want %v", c.q, c.xs, got, c.want)
		}
	}
}

// pairOf builds a pair whose wall-clock ratio is r (engine 1 MB in 1 s
// against the baseline's 1/r MB in 1 s) and whose CPU ratio is c.
func pairOf(r, c float64) slicePair {
	return slicePair{engineBytes: 1e6, engineSeconds: 1, baselineBytes: int64(1e6 / r), baselineSeconds: 1,
		engineCPU: 1, baselineCPU: c}
}

func TestSpreadOf(t *testing.T) {
	pairs := []slicePair{pairOf(1, 1), pairOf(0.5, 2), pairOf(4, 0.5), pairOf(2, 1), pairOf(0.8, 1)}
	sp := spreadOf(pairs, slicePair.ratio)
	if sp.Slices != 5 || math.Abs(sp.Median-1) > 1e-6 || math.Abs(sp.Min-0.5) > 1e-6 || math.Abs(sp.Max-4) > 1e-6 ||
		math.Abs(sp.P25-0.8) > 1e-6 || math.Abs(sp.P75-2) > 1e-6 {
		t.Errorf("wall-clock spread %+v, want 5 slices, median 1, min 0.5, max 4, quartiles 0.8 and 2", sp)
	}
	// Pooled: 5 MB over 5 s against the baseline's 1e6 x (1 + 2 + 0.25 +
	// 0.5 + 1.25) bytes over 5 s.
	if want := 5e6 / float64(int64(1e6)+int64(2e6)+int64(0.25e6)+int64(0.5e6)+int64(1e6/0.8)); math.Abs(sp.Pooled-want) > 1e-9 {
		t.Errorf("pooled %v, want %v", sp.Pooled, want)
	}
	// The CPU ratio scales each pair's wall ratio by baseline CPU over
	// engine CPU: 1, 1, 2, 2, 0.8.
	cp := spreadOf(pairs, slicePair.cpuRatio)
	if cp.Slices != 5 || math.Abs(cp.Median-1) > 1e-6 || math.Abs(cp.Min-0.8) > 1e-6 || math.Abs(cp.Max-2) > 1e-6 {
		t.Errorf("CPU spread %+v, want median 1, min 0.8, max 2", cp)
	}
	// Pooled over CPU time: a starved pair (little CPU, few bytes) weighs
	// as little as the CPU time it had, where its own ratio (1e-3/1e-3 =
	// 1) counts as much as any in the median.
	starved := slicePair{engineBytes: 1e3, engineSeconds: 1, baselineBytes: 1e6, baselineSeconds: 1, engineCPU: 0.001, baselineCPU: 1}
	if got := spreadOf([]slicePair{pairOf(1, 1), pairOf(1, 1), starved}, slicePair.cpuRatio).Pooled; math.Abs(got-((2e6+1e3)/2.001)/(3e6/3)) > 1e-9 {
		t.Errorf("pooled with a starved pair: %v", got)
	}
}

// A pair in which a side wrote nothing, or whose CPU time is unknown, is
// no measurement: it is left out, not counted as a ratio of 0 or +Inf.
func TestSpreadOfLeavesOutEmptyPairs(t *testing.T) {
	pairs := []slicePair{
		pairOf(2, 1),
		{engineBytes: 1e6, engineSeconds: 1, baselineBytes: 0, baselineSeconds: 1, engineCPU: 1, baselineCPU: 1},
		{engineBytes: 0, engineSeconds: 1, baselineBytes: 1e6, baselineSeconds: 1, engineCPU: 1, baselineCPU: 1},
		{engineBytes: 1e6, engineSeconds: 0, baselineBytes: 1e6, baselineSeconds: 1},
		pairOf(4, 1),
	}
	sp := spreadOf(pairs, slicePair.ratio)
	if sp.Slices != 2 || math.Abs(sp.Median-3) > 1e-6 || math.Abs(sp.Min-2) > 1e-6 {
		t.Errorf("spread %+v, want the 2 measured pairs, median 3", sp)
	}
	if cp := spreadOf(pairs[3:4], slicePair.cpuRatio); cp != (RatioSpread{}) {
		t.Errorf("a pair without CPU times gave %+v", cp)
	}
	if sp := spreadOf(nil, slicePair.ratio); sp != (RatioSpread{}) {
		t.Errorf("no pairs gave %+v", sp)
	}
}

func TestNextSlice(t *testing.T) {
	for _, c := range []struct{ slice, duration, done, want float64 }{
		{0.025, 3, 0, 0.025},
		{0.025, 3, 2.99, 0.01}, // what is left of the duration
		{0.025, 3, 3, 0},       // the run is over
		{0.025, 3, 3.01, 0},    // an overrun slice leaves nothing
		{0.025, 0, 100, 0.025}, // records mode: every slice full
	} {
		if got := nextSlice(c.slice, c.duration, c.done); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("nextSlice(%v, %v, %v) = %v, want %v", c.slice, c.duration, c.done, got, c.want)
		}
	}
}
