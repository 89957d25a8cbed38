package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// WritePlot writes r's timeline to path: throughput and p99 latency per
// second, as an SVG image, or as an HTML page holding the image and the
// summary when path ends in .html.
func WritePlot(path string, r *Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return writePlotTo(f, path, r)
}

// writePlotTo is WritePlot into f, created for path, which it closes.
func writePlotTo(f *os.File, path string, r *Result) error {
	var err error
	switch strings.ToLower(filepath.Ext(path)) {
	case ".html", ".htm":
		err = writeHTML(f, r)
	default:
		err = writeSVG(f, r)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func writeHTML(w io.Writer, r *Result) error {
	var sum strings.Builder
	if err := r.WriteSummary(&sum); err != nil {
		return err
	}
	if _, err := fmt.Fprint(w, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>idemlog bench</title></head>\n<body style=\"font-family:sans-serif\">\n"); err != nil {
		return err
	}
	if err := writeSVG(w, r); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "<pre>%s</pre>\n</body></html>\n", html.EscapeString(sum.String()))
	return err
}

const (
	plotW      = 900
	panelH     = 220
	plotLeft   = 80
	plotRight  = 80
	plotTop    = 80
	panelGap   = 60
	plotBottom = 50
)

type panel struct {
	title  string
	y0     float64 // top of the panel
	series []series
	ymax   float64
	ylabel func(float64) string
	// right is an optional second axis: its value for a left-axis value.
	right      func(float64) string
	rightTitle string
}

type series struct {
	name   string
	color  string
	dashed bool
	ys     []float64
}

// drawnSamples returns the samples the plot draws: all but a last one
// shorter than half the longest before it. Such a sample is the run's
// last few milliseconds: drawn as a point like the others, its rate (the
// producers winding down) fell to near zero and its p99 (a handful of
// batches, one of them the last, cut-short one) spiked at the end of
// every plot.
func drawnSamples(tl []Sample) []Sample {
	n := len(tl)
	if n < 2 {
		return tl
	}
	longest := 0.0
	for _, s := range tl[:n-1] {
		longest = max(longest, s.Seconds)
	}
	if tl[n-1].Seconds < longest/2 {
		return tl[:n-1]
	}
	return tl
}

func writeSVG(w io.Writer, r *Result) error {
	drawn := drawnSamples(r.Timeline)
	xs := make([]float64, len(drawn))
	var rec, read, p99 []float64
	for i, s := range drawn {
		xs[i] = s.T - s.Seconds/2
		rec = append(rec, s.RecordsPerSec)
		read = append(read, s.ReadRecordsPerSec)
		p99 = append(p99, s.P99Us)
	}
	xmax := 1.0
	if n := len(r.Timeline); n > 0 {
		xmax = max(xmax, r.Timeline[n-1].T)
	}
	top := panel{title: "throughput (records/s; one-second samples)", y0: plotTop,
		series: []series{{name: "written", color: "#1f77b4", ys: rec}}, ylabel: siString}
	if r.Workload.RecordSize > 0 {
		size := float64(r.Workload.RecordSize)
		top.right = func(v float64) string { return siString(v*size) + "B/s" }
		top.rightTitle = "values"
	}
	if r.Workload.Readers > 0 {
		top.series = append(top.series, series{name: "read", color: "#2ca02c", dashed: true, ys: read})
	}
	bottom := panel{title: "p99 latency per batch (one-second samples)", y0: plotTop + panelH + panelGap,
		series: []series{{name: "p99", color: "#d62728", ys: p99}}, ylabel: latencyLabel}
	height := plotTop + 2*panelH + panelGap + plotBottom

	var b strings.Builder
	fmt.Fprintf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
		plotW, height, plotW, height)
	fmt.Fprintf(&b, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n")
	wl := r.Workload
	fmt.Fprintf(&b, "<text x=\"%d\" y=\"20\" font-size=\"14\" font-weight=\"bold\">%s</text>\n", plotLeft, html.EscapeString(fmt.Sprintf(
		"idemlog bench: %s, %d producers, %d partitions, %d x %d B, codec %s, fsync %s",
		wl.Mode, wl.Producers, wl.Partitions, wl.Batch, wl.RecordSize, wl.Codec, wl.Fsync)))
	fmt.Fprintf(&b, "<text x=\"%d\" y=\"38\">%s</text>\n", plotLeft, html.EscapeString(fmt.Sprintf(
		"%s records/s, %s/s into the log, p99 %s over %.1f s; %.2fx baseline",
		countString(int64(r.RecordsPerSec)), sizeString(r.BytesPerSec), usString(r.LatencyUs.P99), r.Seconds, r.RatioToBaseline)))
	for _, p := range []*panel{&top, &bottom} {
		for _, s := range p.series {
			for _, y := range s.ys {
				p.ymax = max(p.ymax, y)
			}
		}
		drawPanel(&b, p, xs, xmax)
	}
	// The time axis, under the bottom panel.
	step := niceStep(xmax / 10)
	y := bottom.y0 + panelH
	for t := 0.0; t <= xmax+1e-9; t += step {
		x := xpos(t, xmax)
		fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", x, y+16, trimFloat(t))
	}
	fmt.Fprintf(&b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"middle\">seconds</text>\n", plotLeft+(plotW-plotLeft-plotRight)/2, y+34)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func xpos(t, xmax float64) float64 {
	return plotLeft + t/xmax*float64(plotW-plotLeft-plotRight)
}

func drawPanel(b *strings.Builder, p *panel, xs []float64, xmax float64) {
	x0, x1 := float64(plotLeft), float64(plotW-plotRight)
	y0, y1 := p.y0, p.y0+panelH
	fmt.Fprintf(b, "<text x=\"%.0f\" y=\"%.1f\" font-weight=\"bold\">%s</text>\n", x0, y0-8, html.EscapeString(p.title))
	step := niceStep(max(p.ymax, 1e-9) / 5)
	top := step * math.Ceil(max(p.ymax, 1e-9)/step)
	ypos := func(v float64) float64 { return y1 - v/top*panelH }
	for v := 0.0; v <= top+step/2; v += step {
		y := ypos(v)
		fmt.Fprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x0, y, x1, y)
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", x0-6, y+4, html.EscapeString(p.ylabel(v)))
		if p.right != nil {
			fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x1+6, y+4, html.EscapeString(p.right(v)))
		}
	}
	if p.right != nil {
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", x1+plotRight-4, y0-8, html.EscapeString(p.rightTitle))
	}
	fmt.Fprintf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", x0, y0, x1-x0, panelH)
	for i, s := range p.series {
		if len(xs) == 0 {
			break
		}
		var pts strings.Builder
		for j, y := range s.ys {
			fmt.Fprintf(&pts, "%.1f,%.1f ", xpos(xs[j], xmax), ypos(y))
		}
		dash := ""
		if s.dashed {
			dash = " stroke-dasharray=\"6 4\""
		}
		fmt.Fprintf(b, "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", strings.TrimSpace(pts.String()), s.color, dash)
		for j, y := range s.ys {
			fmt.Fprintf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"><title>%.1f s: %s</title></circle>\n",
				xpos(xs[j], xmax), ypos(y), s.color, xs[j], html.EscapeString(p.ylabel(y)))
		}
		if len(p.series) > 1 {
			lx := x1 - 120
			ly := y0 + 16 + float64(i)*16
			fmt.Fprintf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>\n", lx, ly-4, lx+24, ly-4, s.color, dash)
			fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", lx+30, ly, html.EscapeString(s.name))
		}
	}
}

// latencyLabel writes an axis value in microseconds.
func latencyLabel(us float64) string {
	switch {
	case us >= 1e6:
		return trimFloat(us/1e6) + "s"
	case us >= 1e3:
		return trimFloat(us/1e3) + "ms"
	}
	return trimFloat(us) + "us"
}

// niceStep returns 1, 2 or 5 times a power of ten, at least v.
func niceStep(v float64) float64 {
	if v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// siString writes v with an SI prefix.
func siString(v float64) string {
	switch {
	case v >= 1e9:
		return trimFloat(v/1e9) + "G"
	case v >= 1e6:
		return trimFloat(v/1e6) + "M"
	case v >= 1e3:
		return trimFloat(v/1e3) + "k"
	}
	return trimFloat(v)
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
