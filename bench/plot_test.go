package bench

import (
	"strings"
	"testing"
)

// The run's last sample is often a few milliseconds of producers winding
// down: drawn as a full point it made every plot end in a drop to zero
// and a p99 spike. It is left out of the drawing when shorter than half
// the others; a last sample of nearly full length is drawn.
func TestPlotLeavesOutShortLastSample(t *testing.T) {
	full := Sample{Seconds: 1, RecordsPerSec: 1e6, P99Us: 20}
	timeline := func(last float64) []Sample {
		var tl []Sample
		for i := range 3 {
			s := full
			s.T = float64(i + 1)
			tl = append(tl, s)
		}
		return append(tl, Sample{T: 3 + last, Seconds: last, RecordsPerSec: 1e3, P99Us: 90000})
	}
	for _, c := range []struct {
		last   float64
		points int // per series
	}{{0.004, 3}, {0.4, 3}, {0.6, 4}, {1, 4}} {
		r := &Result{Timeline: timeline(c.last)}
		var b strings.Builder
		if err := writeSVG(&b, r); err != nil {
			t.Fatal(err)
		}
		// Two series (written, p99), a circle per point.
		if got := strings.Count(b.String(), "<circle"); got != 2*c.points {
			t.Errorf("last sample of %v s: %d points drawn, want %d per series", c.last, got, c.points)
		}
		if c.points == 3 && strings.Contains(b.String(), "90ms") {
			t.Errorf("last sample of %v s: its p99 spike sets the axis", c.last)
		}
	}
	if got := drawnSamples(nil); len(got) != 0 {
		t.Errorf("no samples: %v", got)
	}
}
