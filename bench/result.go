package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Result is what a run measured. Its JSON form is the report of
// `idemlog bench --json`.
type Result struct {
	Workload Workload `json:"workload"`
	// Dir is the data directory; DirRemoved says it was a temporary one,
	// removed at the end. Reopened: it held the topic already (the run
	// appended); Recovered: one of its partitions had not been closed
	// cleanly, so opening it ran recovery.
	Dir        string `json:"dir"`
	DirRemoved bool   `json:"dir_removed"`
	Reopened   bool   `json:"reopened"`
	Recovered  bool   `json:"recovered"`
	// Interrupted: the run was cancelled (Ctrl-C) before its end.
	Interrupted bool `json:"interrupted"`

	// Records, Batches: written by this run. Bytes: the record batches'
	// bytes as they lie in the log (compressed). PayloadBytes: the record
	// values given to the producers.
	Records      int64   `json:"records"`
	Batches      int64   `json:"batches"`
	Bytes        int64   `json:"bytes"`
	PayloadBytes int64   `json:"payload_bytes"`
	Seconds      float64 `json:"seconds"`

	RecordsPerSec      float64 `json:"records_per_sec"`
	BytesPerSec        float64 `json:"bytes_per_sec"`
	PayloadBytesPerSec float64 `json:"payload_bytes_per_sec"`
	// LatencyUs: per batch, in microseconds, from the call that seals and
	// appends it (Producer.Send; Builder.Build plus Partition.Append in
	// plain mode) to its return, so including the fsync wait under
	// always. LatencyScope says so in words.
	LatencyUs    Latency `json:"latency_us"`
	LatencyScope string  `json:"latency_scope"`
	// AllocsPerBatch is the heap allocations of the whole process during
	// the run (runtime.MemStats.Mallocs) divided by batches.
	AllocsPerBatch float64 `json:"allocs_per_batch"`
	// SyncsObserved counts the distinct recovery points producers saw
	// after their appends: a lower bound on the fdatasync calls that
	// acknowledged them (0 unless fsync is always or bytes=N).
	SyncsObserved int64 `json:"syncs_observed"`
	// Syncs counts the fdatasync calls of the partitions' logs during
	// the run (Log.Syncs: group commits, interval syncs, seals).
	Syncs int64 `json:"syncs"`
	// CPUSeconds is the process's CPU time (getrusage: user plus system,
	// every goroutine and the GC) over the engine's time, Seconds: in an
	// interleaved run, its slices only. CPUNsPerRecord divides it by the
	// records. On a shared machine CPU time says what the run cost where
	// wall time says how long it waited for the cores too.
	CPUSeconds     float64 `json:"cpu_seconds"`
	CPUNsPerRecord float64 `json:"cpu_ns_per_record"`
	// DeviceWrittenBytes is what the block device under the data dir
	// wrote over the engine's time (/sys/dev/block/MAJ:MIN/stat, every
	// process's writes and the filesystem's journal included), -1 where
	// it cannot be read. Under fsync never most of the run's bytes are
	// still dirty pages when it ends, or are dropped unwritten when
	// retention deletes their segment first.
	DeviceWrittenBytes int64 `json:"device_written_bytes"`
	// DiskBoundBytes is the most the run's segments can take on disk at
	// once: partitions x (retention.bytes + a segment); 0 when the run
	// is not bounded (no retention).
	DiskBoundBytes int64 `json:"disk_bound_bytes"`
	// With --retention-bytes: segments retention deleted during the run,
	// and segments that took a deleted one's file (under fsync always).
	SegmentsDeleted  int64 `json:"segments_deleted"`
	SegmentsRecycled int64 `json:"segments_recycled"`

	Baseline Baseline `json:"baseline"`
	// RatioToBaseline is the run's log bytes per second over the
	// baseline's (Baseline.ComparedWith). In an interleaved run it is
	// the pooled ratio over the pairs of slices (RatioSpread.Pooled), and
	// RatioSpread says how the pairs' own ratios spread; 0 when the
	// baseline was skipped.
	RatioToBaseline float64     `json:"ratio_to_baseline"`
	RatioSpread     RatioSpread `json:"ratio_spread"`
	// RatioBasis says what a pair's rates are taken over:
	// "cpu_available" (fsync never and interval, both sides bound by the
	// CPU: per second of the CPU time the process could have had, its
	// own plus the machine's idle time) or "wall" (always, bytes=N, and
	// where /proc/stat cannot be read). WallRatioSpread is the
	// wall-clock ratios' spread in any case.
	RatioBasis      string      `json:"ratio_basis,omitempty"`
	WallRatioSpread RatioSpread `json:"wall_ratio_spread"`

	// Readers' figures, over ReadSeconds (from the start until the last
	// reader caught up with the end of the log). They read from offset 0,
	// so on a reopened directory they also count earlier runs' records.
	ReadRecords       int64   `json:"read_records"`
	ReadBytes         int64   `json:"read_bytes"`
	ReadSeconds       float64 `json:"read_seconds"`
	ReadRecordsPerSec float64 `json:"read_records_per_sec"`
	ReadBytesPerSec   float64 `json:"read_bytes_per_sec"`

	// CloseSeconds is Engine.Close after the run: the final syncs, seals
	// and checkpoints (outside Seconds).
	CloseSeconds float64 `json:"close_seconds"`

	PartitionOffsets []PartitionOffsets `json:"partition_offsets"`
	// Timeline has one sample per second of the run (the last may be
	// shorter).
	Timeline []Sample `json:"timeline"`
	Host     Host     `json:"host"`
}

// Latency holds percentiles of per-batch latency.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Baseline is the machine's raw speed on the run's bytes, measured in the
// same run and directory: write(2) of the same number of bytes, in chunks of
// the run's average batch size, into a file preallocated with fallocate;
// and the same with an fdatasync after every SyncGroup chunks.
type Baseline struct {
	// When is "interleaved" (the compared figure measured in slices
	// alternating with the engine's, SliceSeconds each, the other ones
	// after the run for at most half a second each), "after" (a library
	// caller's run with no slices: every figure after the run) or
	// "skipped".
	When         string  `json:"when"`
	SliceSeconds float64 `json:"slice_seconds,omitempty"`
	// RingBytes: an interleaved baseline writes into files of the
	// engine's segment size and deletes the oldest beyond what the
	// engine's retention keeps, so that both hold the same bytes in the
	// page cache; this is the most its files take at once.
	RingBytes int64 `json:"ring_bytes,omitempty"`
	// DeviceWrittenBytes is what the device wrote during the baseline's
	// slices (-1: not readable), to set beside the run's.
	DeviceWrittenBytes int64 `json:"device_written_bytes"`
	// ChunkBytes is the average batch size of the run.
	ChunkBytes int64 `json:"chunk_bytes"`
	// WriteBytes is the run's bytes (less where the disk lacks room for
	// a second copy, or BaselineMax cut it short).
	WriteBytes       int64   `json:"write_bytes"`
	WriteBytesPerSec float64 `json:"write_bytes_per_sec"`
	// WriteFdatasyncBytes: the same bytes when the fsync policy is
	// always or bytes=N, over zero-filled blocks under always (as the
	// partition's own) and fallocated ones under bytes=N; otherwise the
	// write+fdatasync figure is informative only and is measured for at
	// most half a second.
	WriteFdatasyncBytes       int64   `json:"write_fdatasync_bytes"`
	WriteFdatasyncBytesPerSec float64 `json:"write_fdatasync_bytes_per_sec"`
	// WriteFdatasyncUnwritten*: under fsync always, the same once more
	// over blocks only fallocated (unwritten), as a new segment's are
	// where its syncs are too large for zero fills: each fdatasync then
	// also writes the extent metadata it converts. Informative (at most
	// half a second): it says how much of the ratio is the blocks' state,
	// which the write+fdatasync figure (over zero-filled blocks, the
	// machine's best case) leaves out.
	WriteFdatasyncUnwrittenBytes       int64   `json:"write_fdatasync_unwritten_bytes,omitempty"`
	WriteFdatasyncUnwrittenBytesPerSec float64 `json:"write_fdatasync_unwritten_bytes_per_sec,omitempty"`
	// SyncGroup is chunks per fdatasync: batches per sync observed in the
	// run (SyncGroupSource "observed"), or the number of producers
	// ("producers") when the run made no syncs to observe.
	SyncGroup       int64  `json:"sync_group"`
	SyncGroupSource string `json:"sync_group_source"`
	// SyncWriters is how many files the write+fdatasync figures write and
	// sync at once, each its share of the bytes: one per partition the
	// run wrote, as each partition syncs its own file. (Without this: one
	// serial writer made several partitions look faster than the machine.)
	SyncWriters int `json:"sync_writers"`
	// ComparedWith names the figure ratio_to_baseline divides by:
	// "write" (fsync never, interval) or "write_fdatasync" (always,
	// bytes=N: appenders wait for syncs).
	ComparedWith string `json:"compared_with"`
	// Truncated: BaselineMax stopped a measurement early.
	Truncated bool `json:"truncated"`
	// EvictedBytes is the size of the run's files whose pages were
	// dropped from the page cache before the baseline (evictPageCache).
	EvictedBytes int64 `json:"evicted_bytes"`
}

// PartitionOffsets is where the run's appends went in one partition.
type PartitionOffsets struct {
	Partition   int   `json:"partition"`
	StartOffset int64 `json:"start_offset"`
	EndOffset   int64 `json:"end_offset"`
}

// Sample is one second of the run.
type Sample struct {
	T                  float64 `json:"t"` // seconds since the start, at the sample's end
	Seconds            float64 `json:"seconds"`
	Records            int64   `json:"records"`
	RecordsPerSec      float64 `json:"records_per_sec"`
	PayloadBytesPerSec float64 `json:"payload_bytes_per_sec"`
	// P99Us and MaxUs are per-batch latencies over the sample, within 6%.
	P99Us             float64 `json:"p99_us"`
	MaxUs             float64 `json:"max_us"`
	ReadRecordsPerSec float64 `json:"read_records_per_sec"`
}

// Host describes the machine.
type Host struct {
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
}

// WriteJSON writes r as one JSON object and a newline.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteSummary writes r as a table for people.
func (r *Result) WriteSummary(w io.Writer) error {
	var b strings.Builder
	wl := r.Workload
	end := "for " + wl.Duration
	if wl.Records > 0 {
		end = fmt.Sprintf("%d records", wl.Records)
	}
	fmt.Fprintf(&b, "idemlog bench: %s, %d producers -> %d partitions, %d x %s records per batch, codec %s, fsync %s, %s payload, %s\n",
		wl.Mode, wl.Producers, wl.Partitions, wl.Batch, sizeString(float64(wl.RecordSize)), wl.Codec, wl.Fsync, wl.Payload, end)
	dirNote := "kept"
	switch {
	case r.DirRemoved:
		dirNote = "temporary, removed"
	case r.Recovered:
		dirNote = "kept; reopened and recovered, appended to"
	case r.Reopened:
		dirNote = "kept; reopened, appended to"
	}
	fmt.Fprintf(&b, "data dir       %s (%s)\n", r.Dir, dirNote)
	if r.DiskBoundBytes > 0 {
		fmt.Fprintf(&b, "               at most %s of segments on disk at once (retention %s per partition)\n",
			sizeString(float64(r.DiskBoundBytes)), sizeString(float64(wl.RetentionBytes)))
	}
	if r.Interrupted {
		fmt.Fprintf(&b, "               interrupted before the end\n")
	}
	fmt.Fprintf(&b, "written        %s records in %s batches, %s of values, %s in the log, %.2f s\n",
		countString(r.Records), countString(r.Batches), sizeString(float64(r.PayloadBytes)), sizeString(float64(r.Bytes)), r.Seconds)
	fmt.Fprintf(&b, "throughput     %s records/s, %s/s of values, %s/s into the log\n",
		countString(int64(r.RecordsPerSec)), sizeString(r.PayloadBytesPerSec), sizeString(r.BytesPerSec))
	l := r.LatencyUs
	fmt.Fprintf(&b, "latency        p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (per batch: %s)\n",
		usString(l.P50), usString(l.P90), usString(l.P99), usString(l.P999), usString(l.Max), r.LatencyScope)
	fmt.Fprintf(&b, "allocations    %.2f per batch\n", r.AllocsPerBatch)
	fmt.Fprintf(&b, "cpu            %.0f ns per record (%.2f s of process CPU time over %.2f s)\n", r.CPUNsPerRecord, r.CPUSeconds, r.Seconds)
	if r.DeviceWrittenBytes >= 0 {
		fmt.Fprintf(&b, "device         %s written by the disk under the data dir during the run", sizeString(float64(r.DeviceWrittenBytes)))
		if r.Baseline.When == "interleaved" && r.Baseline.DeviceWrittenBytes >= 0 {
			fmt.Fprintf(&b, ", %s during the baseline's slices", sizeString(float64(r.Baseline.DeviceWrittenBytes)))
		}
		b.WriteString("\n")
	}
	if r.Syncs > 0 {
		fmt.Fprintf(&b, "fdatasync      %s calls by the logs\n", countString(r.Syncs))
	}
	if r.Workload.RetentionBytes > 0 {
		fmt.Fprintf(&b, "retention      %s segments deleted, %s of them reused for new ones\n", countString(r.SegmentsDeleted), countString(r.SegmentsRecycled))
	}
	if r.SyncsObserved > 0 {
		fmt.Fprintf(&b, "syncs          %s observed, %.1f batches per sync\n", countString(r.SyncsObserved), float64(r.Batches)/float64(r.SyncsObserved))
	}
	bl := r.Baseline
	name := "write(2)"
	if bl.ComparedWith == "write_fdatasync" {
		name = "write+fdatasync"
	}
	switch bl.When {
	case "skipped":
		fmt.Fprintf(&b, "baseline       skipped\n")
	case "interleaved":
		rate := bl.WriteBytesPerSec
		if bl.ComparedWith == "write_fdatasync" {
			rate = bl.WriteFdatasyncBytesPerSec
			name = fmt.Sprintf("write+fdatasync every %d %s, %d %s", bl.SyncGroup, plural(bl.SyncGroup, "chunk"), bl.SyncWriters, plural(int64(bl.SyncWriters), "file"))
		}
		fmt.Fprintf(&b, "baseline       %s %s/s on %s, %s-byte chunks, in %s slices of %s alternating with the engine's\n",
			name, sizeString(rate), sizeString(float64(bl.WriteBytes+bl.WriteFdatasyncBytes-informativeBytes(bl))), countString(bl.ChunkBytes),
			countString(int64(r.RatioSpread.Slices)), secondsString(bl.SliceSeconds))
		if bl.ComparedWith == "write" && bl.WriteFdatasyncBytesPerSec > 0 {
			fmt.Fprintf(&b, "               (write+fdatasync every %d %s: %s/s, after the run, informative)\n", bl.SyncGroup, plural(bl.SyncGroup, "chunk"), sizeString(bl.WriteFdatasyncBytesPerSec))
		}
		if bl.ComparedWith == "write_fdatasync" && bl.WriteBytesPerSec > 0 {
			fmt.Fprintf(&b, "               (write(2): %s/s, after the run, informative)\n", sizeString(bl.WriteBytesPerSec))
		}
		if bl.WriteFdatasyncUnwrittenBytesPerSec > 0 {
			fmt.Fprintf(&b, "               (write+fdatasync over unwritten (fallocated) blocks %s/s, after the run, informative)\n", sizeString(bl.WriteFdatasyncUnwrittenBytesPerSec))
		}
		if sp := r.RatioSpread; sp.Slices == 0 {
			fmt.Fprintf(&b, "ratio          none: no pair of slices was measured\n")
		} else {
			basis := "wall-clock rates"
			if r.RatioBasis == "cpu_available" {
				basis = "rates per second of the CPU time left to the process"
			}
			fmt.Fprintf(&b, "ratio          %.2fx %s over %d pairs of slices, %s; per pair median %.2f, min %.2f, max %.2f, middle half %.2f-%.2f\n",
				r.RatioToBaseline, bl.ComparedWith, sp.Slices, basis, sp.Median, sp.Min, sp.Max, sp.P25, sp.P75)
			if w := r.WallRatioSpread; r.RatioBasis != "wall" && w.Slices > 0 {
				fmt.Fprintf(&b, "               wall-clock: %.2fx; per pair median %.2f, min %.2f, max %.2f, middle half %.2f-%.2f\n", w.Pooled, w.Median, w.Min, w.Max, w.P25, w.P75)
			}
		}
	default:
		fmt.Fprintf(&b, "baseline       write(2) %s/s on %s; write+fdatasync every %d %s %s/s on %s; %s-byte chunks, measured %s the run\n",
			sizeString(bl.WriteBytesPerSec), sizeString(float64(bl.WriteBytes)),
			bl.SyncGroup, plural(bl.SyncGroup, "chunk"), sizeString(bl.WriteFdatasyncBytesPerSec), sizeString(float64(bl.WriteFdatasyncBytes)),
			countString(bl.ChunkBytes), bl.When)
		if bl.WriteFdatasyncUnwrittenBytesPerSec > 0 {
			fmt.Fprintf(&b, "               write+fdatasync over unwritten (fallocated) blocks %s/s on %s\n",
				sizeString(bl.WriteFdatasyncUnwrittenBytesPerSec), sizeString(float64(bl.WriteFdatasyncUnwrittenBytes)))
		}
		if bl.SyncGroupSource != "observed" {
			fmt.Fprintf(&b, "               (sync group = producers: no syncs observed under fsync %s)\n", wl.Fsync)
		}
		if bl.EvictedBytes > 0 {
			fmt.Fprintf(&b, "               (the run's %s dropped from the page cache first)\n", sizeString(float64(bl.EvictedBytes)))
		}
		if r.RatioToBaseline == 0 {
			fmt.Fprintf(&b, "ratio          none: the %s baseline was cut short\n", name)
		} else {
			fmt.Fprintf(&b, "ratio          %.2fx %s", r.RatioToBaseline, name)
			if u := bl.WriteFdatasyncUnwrittenBytesPerSec; u > 0 {
				fmt.Fprintf(&b, " (%.2fx over unwritten blocks)", r.BytesPerSec/u)
			}
			b.WriteString("\n")
		}
	}
	if wl.Readers > 0 {
		fmt.Fprintf(&b, "readers        %d: %s records, %s in %.2f s: %s records/s, %s/s\n", wl.Readers,
			countString(r.ReadRecords), sizeString(float64(r.ReadBytes)), r.ReadSeconds,
			countString(int64(r.ReadRecordsPerSec)), sizeString(r.ReadBytesPerSec))
	}
	fmt.Fprintf(&b, "close          %.3f s\n", r.CloseSeconds)
	_, err := io.WriteString(w, b.String())
	return err
}

// informativeBytes is what an interleaved baseline's informative figure
// wrote after the run: the bytes the other kind measured.
func informativeBytes(bl Baseline) int64 {
	if bl.ComparedWith == "write_fdatasync" {
		return bl.WriteBytes
	}
	return bl.WriteFdatasyncBytes
}

// secondsString writes a duration in seconds as Go writes durations.
func secondsString(s float64) string {
	return time.Duration(s * float64(time.Second)).String()
}

func plural(n int64, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

// countString writes n with thousands separators.
func countString(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// sizeString writes a byte count in decimal units (MB = 10^6 bytes), as
// disk throughput is usually quoted.
func sizeString(n float64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", n/1e3)
	}
	return fmt.Sprintf("%.0f B", n)
}

// usString writes microseconds with a fitting unit.
func usString(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.2fs", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%.2fms", us/1e3)
	case us >= 10:
		return fmt.Sprintf("%.0fus", us)
	}
	return fmt.Sprintf("%.1fus", us)
}
