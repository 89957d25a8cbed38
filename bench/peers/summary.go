package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Summary is one target's figures on one workload over all rounds.
type Summary struct {
	Workload string `json:"workload"`
	Target   string `json:"target"`
	// RecordsPerSec has one figure per round, in round order.
	RecordsPerSec        []float64 `json:"records_per_sec"`
	MedianRecordsPerSec  float64   `json:"median_records_per_sec"`
	MedianMBPerSec       float64   `json:"median_payload_mb_per_sec"`
	MedianDiskMBPerSec   float64   `json:"median_disk_mb_per_sec,omitempty"`
	MedianCPUUsPerRecord float64   `json:"median_cpu_us_per_record"`
	// MedianBrokerCPUUsPerRecord: with the broker in a child process, its
	// CPU time per record (MedianCPUUsPerRecord is then the client's).
	MedianBrokerCPUUsPerRecord float64 `json:"median_broker_cpu_us_per_record,omitempty"`
	// Latencies: the median over rounds of each round's percentile.
	RecordLatencyUs  Latency `json:"record_latency_us,omitzero"`
	RequestLatencyUs Latency `json:"request_latency_us,omitzero"`
	BatchLatencyUs   Latency `json:"batch_latency_us,omitzero"`
	// Ratios: this target's records per second over a reference's, round
	// by round (both measured in the same round, minutes apart at most).
	Ratios []Ratio `json:"ratios,omitempty"`
}

// Ratio compares a target with a reference target.
type Ratio struct {
	To     string    `json:"to"`
	Rounds []float64 `json:"rounds"`
	Median float64   `json:"median"`
}

// summarize makes one Summary per target present in byTarget (phases in
// round order), in the order of targets, with ratios to every reference
// present other than the target itself.
func summarize(workload string, targets []string, byTarget map[string][]Phase, refs ...string) []Summary {
	var out []Summary
	for _, t := range targets {
		phs := byTarget[t]
		if len(phs) == 0 {
			continue
		}
		s := Summary{Workload: workload, Target: t}
		var mbs, disks, cpus, bcpus []float64
		var lat [6][]float64
		var bat [2][]float64
		for _, ph := range phs {
			s.RecordsPerSec = append(s.RecordsPerSec, ph.RecordsPerSec)
			mbs = append(mbs, ph.MBPerSec)
			disks = append(disks, ph.DiskMBPerSec)
			cpus = append(cpus, ph.CPUUsPerRecord)
			bcpus = append(bcpus, ph.BrokerCPUUsPerRecord)
			for i, v := range []float64{ph.RecordLatencyUs.P50, ph.RecordLatencyUs.P99, ph.RequestLatencyUs.P50,
				ph.RequestLatencyUs.P99, ph.BatchLatencyUs.P50, ph.BatchLatencyUs.P99} {
				if i < 4 {
					lat[i] = append(lat[i], v)
				} else {
					bat[i-4] = append(bat[i-4], v)
				}
			}
		}
		s.MedianRecordsPerSec = median(s.RecordsPerSec)
		s.MedianMBPerSec = median(mbs)
		s.MedianDiskMBPerSec = median(disks)
		s.MedianCPUUsPerRecord = median(cpus)
		s.MedianBrokerCPUUsPerRecord = median(bcpus)
		s.RecordLatencyUs = Latency{P50: median(lat[0]), P99: median(lat[1])}
		s.RequestLatencyUs = Latency{P50: median(lat[2]), P99: median(lat[3])}
		s.BatchLatencyUs = Latency{P50: median(bat[0]), P99: median(bat[1])}
		for _, ref := range refs {
			rp := byTarget[ref]
			if ref == t || len(rp) != len(phs) {
				continue
			}
			r := Ratio{To: ref}
			for i := range phs {
				if rp[i].RecordsPerSec > 0 {
					r.Rounds = append(r.Rounds, phs[i].RecordsPerSec/rp[i].RecordsPerSec)
				}
			}
			r.Median = median(r.Rounds)
			s.Ratios = append(s.Ratios, r)
		}
		out = append(out, s)
	}
	return out
}

// printSummaries writes the table: one line per workload and target.
// Latency columns show p50/p99 in microseconds when measured.
func printSummaries(w io.Writer, sums []Summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\ttarget\tmedian rec/s\tMB/s\tdisk MB/s\tcpu us/rec [client+broker]\trounds rec/s\tratios (median; rounds)\tlatency p50/p99 us")
	last := ""
	for _, s := range sums {
		wl := s.Workload
		if wl == last {
			wl = ""
		}
		last = s.Workload
		var rounds []string
		for _, v := range s.RecordsPerSec {
			rounds = append(rounds, rate(v))
		}
		var ratios []string
		for _, r := range s.Ratios {
			var rs []string
			for _, v := range r.Rounds {
				rs = append(rs, fmt.Sprintf("%.2f", v))
			}
			ratios = append(ratios, fmt.Sprintf("%.2fx %s (%s)", r.Median, r.To, strings.Join(rs, " ")))
		}
		var lats []string
		for _, l := range []struct {
			name string
			l    Latency
		}{{"record", s.RecordLatencyUs}, {"request", s.RequestLatencyUs}, {"batch", s.BatchLatencyUs}} {
			if l.l.P50 > 0 || l.l.P99 > 0 {
				lats = append(lats, fmt.Sprintf("%s %.0f/%.0f", l.name, l.l.P50, l.l.P99))
			}
		}
		cpu := fmt.Sprintf("%.2f", s.MedianCPUUsPerRecord)
		if s.MedianBrokerCPUUsPerRecord > 0 {
			cpu = fmt.Sprintf("%.2f+%.2f", s.MedianCPUUsPerRecord, s.MedianBrokerCPUUsPerRecord)
		}
		disk := "-"
		if s.MedianDiskMBPerSec > 0 {
			disk = fmt.Sprintf("%.1f", s.MedianDiskMBPerSec)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%s\t%s\t%s\t%s\t%s\n", wl, s.Target, rate(s.MedianRecordsPerSec),
			s.MedianMBPerSec, disk, cpu, strings.Join(rounds, " "), strings.Join(ratios, "; "), strings.Join(lats, ", "))
	}
	return tw.Flush()
}

// rate prints a records-per-second figure compactly (1.23M, 456k).
func rate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.0fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
