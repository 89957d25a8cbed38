//go:build linux

package bench

import (
	"math"
	"testing"
	"time"
)

// An interleaved run's figures are the engine's: its slices add up to the
// duration, records/s and the timeline are over them, while the run takes
// about as long again for the baseline's slices, each as long as the
// engine's before it. Every pair is a measurement, in both spreads.
func TestInterleavedRun(t *testing.T) {
	c := small(t)
	c.Records, c.Duration, c.Slice = 0, 400*time.Millisecond, 20*time.Millisecond
	c.BaselineMax = 10 * time.Millisecond
	start := time.Now()
	res := mustRun(t, c)
	wall := time.Since(start).Seconds()
	checkSane(t, res)
	if res.Baseline.When != "interleaved" || res.Baseline.SliceSeconds != 0.02 {
		t.Fatalf("baseline %+v", res.Baseline)
	}
	if res.Seconds < 0.4 || res.Seconds > 0.8 {
		t.Errorf("engine time %.3f s for a 400ms run", res.Seconds)
	}
	if wall < 2*0.4 {
		t.Errorf("the run took %.3f s: the baseline's slices, as long as the engine's, did not run", wall)
	}
	if math.Abs(res.RecordsPerSec-float64(res.Records)/res.Seconds) > 1 {
		t.Errorf("records/s %.0f is not records over the engine's time", res.RecordsPerSec)
	}
	var tl float64
	for _, s := range res.Timeline {
		tl += s.Seconds
	}
	if math.Abs(tl-res.Seconds) > 1e-6 {
		t.Errorf("timeline covers %.6f s, engine time %.6f s", tl, res.Seconds)
	}
	sp, w := res.RatioSpread, res.WallRatioSpread
	if sp.Slices < 2 || w.Slices != sp.Slices || res.RatioBasis != "cpu_available" {
		t.Errorf("%d pairs (%d wall-clock), basis %q; want a pair per engine slice", sp.Slices, w.Slices, res.RatioBasis)
	}
	if bl := res.Baseline; bl.WriteBytes <= 0 || bl.RingBytes <= 0 || bl.ComparedWith != "write" {
		t.Errorf("baseline %+v", bl)
	}
}

// Under fsync always the appenders wait for the device: the pairs are
// compared over wall-clock time, with syncs in the baseline's slices.
func TestInterleavedRunAlways(t *testing.T) {
	c := small(t)
	c.Records, c.Duration, c.Slice = 0, 200*time.Millisecond, 20*time.Millisecond
	c.Fsync = "always"
	res := mustRun(t, c)
	checkSane(t, res)
	if res.RatioBasis != "wall" || res.RatioSpread != res.WallRatioSpread || res.Baseline.ComparedWith != "write_fdatasync" ||
		res.Baseline.WriteFdatasyncBytes <= 0 || res.Syncs <= 0 {
		t.Errorf("basis %q, spread %+v against wall %+v, baseline %+v, syncs %d", res.RatioBasis, res.RatioSpread, res.WallRatioSpread, res.Baseline, res.Syncs)
	}
}

// --slice 0 measures the baseline after the run, in one block.
func TestBaselineAfterRun(t *testing.T) {
	c := small(t)
	c.Slice = 0
	res := mustRun(t, c)
	checkSane(t, res)
	if res.Baseline.When != "after" || res.RatioSpread.Slices != 0 {
		t.Errorf("baseline %q, %d pairs; want after the run, none", res.Baseline.When, res.RatioSpread.Slices)
	}
}
