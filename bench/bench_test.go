//go:build linux

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/engine"
	"github.com/idemlog/idemlog/internal/enginekill"
	"github.com/idemlog/idemlog/segment"
)

// small is a workload that runs in a fraction of a second.
func small(t *testing.T) Config {
	c := Defaults()
	c.Producers, c.Partitions = 2, 2
	c.Records = 4000
	c.Dir = filepath.Join(t.TempDir(), "data")
	c.BaselineMax = 30 * time.Millisecond
	c.SegmentBytes = 1 << 20
	// No retention, so that readers may start at offset 0 and a run's
	// bytes stay in the log to be read back.
	c.RetentionBytes = 0
	c.Quiet = true
	return c
}

func mustRun(t *testing.T, c Config) *Result {
	t.Helper()
	res, err := Run(context.Background(), c, nil)
	if err != nil {
		t.Fatalf("%+v: %v", c, err)
	}
	return res
}

// checkSane checks the invariants of any finished run.
func checkSane(t *testing.T, res *Result) {
	t.Helper()
	l := res.LatencyUs
	if !(0 < l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
		t.Errorf("latency percentiles out of order: %+v", l)
	}
	if res.Records <= 0 || res.Batches <= 0 || res.Bytes <= res.Batches*batch.HeaderSize || res.Seconds <= 0 ||
		res.RecordsPerSec <= 0 || res.BytesPerSec <= 0 || res.AllocsPerBatch < 0 {
		t.Errorf("bad totals: %+v", res)
	}
	if bl := res.Baseline; (bl.When != "after" && bl.When != "interleaved") || bl.WriteBytesPerSec <= 0 || bl.WriteFdatasyncBytesPerSec <= 0 ||
		bl.SyncGroup < 1 || bl.ChunkBytes <= 0 || res.RatioToBaseline <= 0 ||
		(bl.When == "after" && bl.EvictedBytes < res.Bytes && res.Workload.RetentionBytes == 0) { // retention deleted some
		t.Errorf("bad baseline: %+v, ratio %v", bl, res.RatioToBaseline)
	}
	if sp := res.RatioSpread; res.Baseline.When == "interleaved" &&
		(sp.Slices < 1 || sp.Pooled != res.RatioToBaseline || sp.Pooled <= 0 || !(0 < sp.Min && sp.Min <= sp.P25 && sp.P25 <= sp.Median && sp.Median <= sp.P75 && sp.P75 <= sp.Max)) {
		t.Errorf("bad ratio spread %+v, ratio %v", sp, res.RatioToBaseline)
	}
	if res.CPUSeconds <= 0 || res.CPUNsPerRecord <= 0 || res.DeviceWrittenBytes < -1 || res.Baseline.DeviceWrittenBytes < -1 || res.Syncs < 0 {
		t.Errorf("bad CPU, device or sync figures: cpu %v s, %v ns/record, device %d (baseline %d), syncs %d",
			res.CPUSeconds, res.CPUNsPerRecord, res.DeviceWrittenBytes, res.Baseline.DeviceWrittenBytes, res.Syncs)
	}
	if u := res.Baseline.WriteFdatasyncUnwrittenBytesPerSec; (u > 0) != (res.Baseline.ComparedWith == "write_fdatasync") {
		t.Errorf("write+fdatasync over unwritten blocks %v, compared with %s: want it measured under always only", u, res.Baseline.ComparedWith)
	}
	var sum int64
	for _, po := range res.PartitionOffsets {
		sum += po.EndOffset - po.StartOffset
	}
	if sum != res.Records {
		t.Errorf("partition offsets advanced by %d, want %d records", sum, res.Records)
	}
	if len(res.Timeline) == 0 {
		t.Errorf("no timeline")
	}
}

func TestRecordsExact(t *testing.T) {
	c := small(t)
	c.Producers, c.Partitions, c.Records, c.Batch = 3, 2, 1001, 7 // uneven everywhere
	res := mustRun(t, c)
	checkSane(t, res)
	if res.Records != 1001 || res.PayloadBytes != 1001*int64(c.RecordSize) {
		t.Fatalf("records %d, payload %d", res.Records, res.PayloadBytes)
	}
	// Producers 0 and 2 share partition 0: 334+333 records; producer 1
	// writes 334 to partition 1.
	if got := res.PartitionOffsets[0].EndOffset; got != 667 {
		t.Errorf("partition 0 ends at %d, want 667", got)
	}
}

// TestDirKeptAndAppended: --dir keeps data that verification and the
// engine accept, and a second run (in the other mode) continues the
// offsets; an unclean directory is recovered and appended to.
func TestDirKeptAndAppended(t *testing.T) {
	c := small(t)
	c.Mode = "plain"
	first := mustRun(t, c)
	if first.Reopened || first.DirRemoved {
		t.Fatalf("first run: reopened %v, removed %v", first.Reopened, first.DirRemoved)
	}
	c.Mode, c.Records = "idempotent", 3000
	second := mustRun(t, c)
	if !second.Reopened || second.Recovered {
		t.Fatalf("second run: reopened %v, recovered %v", second.Reopened, second.Recovered)
	}
	for i, po := range second.PartitionOffsets {
		if po.StartOffset != first.PartitionOffsets[i].EndOffset {
			t.Errorf("partition %d: second run starts at %d, first ended at %d", i, po.StartOffset, first.PartitionOffsets[i].EndOffset)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(c.Dir, "bench-*", "*.log"))
	if len(logs) < 2 {
		t.Fatalf("segments: %v", logs)
	}
	var records int64
	for _, f := range logs {
		rep, err := segment.VerifyFile(f, 0)
		if err != nil {
			t.Fatal(err)
		}
		records += rep.Records
	}
	if records != 7000 {
		t.Errorf("segments hold %d records, want 7000", records)
	}

	// Crash the engine in the middle of a third life, then run again.
	e, err := engine.Open(c.Dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := e.Partition("bench", 0)
	bld := batch.NewBuilder(batch.CodecNone)
	bld.Append(1, nil, []byte("x"), nil)
	b, _ := bld.Build()
	if _, err := p.Append(b); err != nil {
		t.Fatal(err)
	}
	enginekill.Kill(e)
	c.Records = 1000
	third := mustRun(t, c)
	if !third.Recovered || third.PartitionOffsets[0].StartOffset != second.PartitionOffsets[0].EndOffset+1 {
		t.Errorf("third run: recovered %v, offsets %+v after %+v", third.Recovered, third.PartitionOffsets, second.PartitionOffsets)
	}
	e, err = engine.Open(c.Dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var total int64
	for _, p := range e.Partitions() {
		total += p.HighWatermark()
	}
	if total != 8001 {
		t.Errorf("reopened engine holds %d records, want 8001", total)
	}
}

func TestTempDirRemoved(t *testing.T) {
	c := small(t)
	c.Dir = ""
	res := mustRun(t, c)
	if !res.DirRemoved || res.Dir == "" {
		t.Fatalf("dir %q removed %v", res.Dir, res.DirRemoved)
	}
	if _, err := os.Stat(res.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary dir %s still there: %v", res.Dir, err)
	}
}

func TestReaders(t *testing.T) {
	for _, rc := range []struct {
		readers, partitions, factor int
		isolation                   string
	}{
		{2, 3, 1, "read_uncommitted"}, // reader 0 tails partitions 0 and 2, reader 1 partition 1
		{4, 2, 2, "read_uncommitted"}, // two readers per partition
		{2, 2, 1, "read_committed"},   // no transactions: the committed view is everything
	} {
		c := small(t)
		c.Readers, c.Partitions, c.Isolation = rc.readers, rc.partitions, rc.isolation
		res := mustRun(t, c)
		if res.ReadRecords != int64(rc.factor)*res.Records || res.ReadBytes != int64(rc.factor)*res.Bytes {
			t.Errorf("%+v: read %d records, %d bytes; wrote %d, %d", rc, res.ReadRecords, res.ReadBytes, res.Records, res.Bytes)
		}
		if res.ReadRecordsPerSec <= 0 || res.ReadBytesPerSec <= 0 || res.ReadSeconds <= 0 {
			t.Errorf("%+v: read rates %v %v", rc, res.ReadRecordsPerSec, res.ReadBytesPerSec)
		}
	}
}

// TestTransactionalMode: records written in transactions of --txn-batches
// batches are all seen, once, by read_committed readers: the run commits
// its last, partial transaction too.
func TestTransactionalMode(t *testing.T) {
	for _, iso := range []string{"read_committed", "read_uncommitted"} {
		c := small(t)
		c.Mode, c.TxnBatches, c.Readers, c.Isolation = "transactional", 3, 2, iso
		res := mustRun(t, c)
		if res.Records == 0 || res.ReadRecords != res.Records {
			t.Errorf("%s: read %d records, wrote %d", iso, res.ReadRecords, res.Records)
		}
	}
}

// TestCodecsAndPayloads reads every record back: the counts and value
// sizes are what was asked, text compresses and random does not.
func TestCodecsAndPayloads(t *testing.T) {
	ratio := map[string]float64{}
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		for _, payload := range []string{"text", "random"} {
			if payload == "random" && codec != "none" && codec != "zstd" {
				continue
			}
			c := small(t)
			c.Codec, c.Payload, c.Records, c.Partitions, c.Producers = codec, payload, 600, 1, 1
			res := mustRun(t, c)
			ratio[codec+"/"+payload] = float64(res.Bytes) / float64(res.PayloadBytes)
			e, err := engine.Open(c.Dir, engine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			p, _ := e.Partition("bench", 0)
			var dec batch.Decoder
			var n int64
			var values [][]byte
			for off := int64(0); off < p.HighWatermark(); {
				ch, err := p.Read(off, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				for data := ch.Data; len(data) > 0; {
					sz, _ := batch.Size(data)
					b := batch.Batch(data[:sz])
					if b.Codec().String() != codec || (b.ProducerID() < 0) != (c.Mode == "plain") {
						t.Fatalf("%s/%s: batch codec %v producer %d", codec, payload, b.Codec(), b.ProducerID())
					}
					recs, err := dec.Records(b)
					if err != nil {
						t.Fatal(err)
					}
					var r batch.Record
					for recs.Next(&r) {
						if len(r.Value) != c.RecordSize || r.Key != nil {
							t.Fatalf("%s/%s: record of %d bytes, key %q", codec, payload, len(r.Value), r.Key)
						}
						if len(values) < 200 {
							values = append(values, bytes.Clone(r.Value))
						}
						n++
					}
					data = data[sz:]
				}
				off = ch.NextOffset
				ch.Release()
			}
			e.Close()
			if n != 600 {
				t.Fatalf("%s/%s: read %d records, want 600", codec, payload, n)
			}
			for i := 1; i < len(values); i++ {
				if bytes.Equal(values[i], values[i-1]) {
					t.Fatalf("%s/%s: records %d and %d are equal", codec, payload, i-1, i)
				}
			}
		}
	}
	if ratio["zstd/text"] > 0.6 || ratio["zstd/random"] < 1 || ratio["none/text"] < 1 {
		t.Errorf("log bytes / payload bytes: %v", ratio)
	}
}

func TestDurationAndInterrupt(t *testing.T) {
	c := small(t)
	c.Records, c.Duration = 0, 300*time.Millisecond
	res := mustRun(t, c)
	checkSane(t, res)
	if res.Seconds < 0.3 || res.Seconds > 3 || res.Interrupted {
		t.Errorf("a 300ms run took %.2f s (interrupted %v)", res.Seconds, res.Interrupted)
	}

	c = small(t)
	c.Records, c.Duration = 0, time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := Run(ctx, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The pairs measured before the signal stand; the informative
	// figures after the run are not measured.
	if bl := res.Baseline; !res.Interrupted || time.Since(start) > 5*time.Second || bl.When != "interleaved" || bl.WriteFdatasyncBytes != 0 {
		t.Errorf("interrupted %v after %v, baseline %+v", res.Interrupted, time.Since(start), bl)
	}
}

func TestOutputs(t *testing.T) {
	dir := t.TempDir()
	c := small(t)
	defer func(d time.Duration) { sampleInterval = d }(sampleInterval)
	sampleInterval = 100 * time.Millisecond
	c.Records, c.Duration = 0, 350*time.Millisecond
	c.Quiet = false
	c.Readers = 1
	c.CPUProfile = filepath.Join(dir, "cpu.pprof")
	c.MemProfile = filepath.Join(dir, "mem.pprof")
	c.Trace = filepath.Join(dir, "trace.out")
	c.Plot = filepath.Join(dir, "plot.svg")
	var progress bytes.Buffer
	res, err := Run(context.Background(), c, &progress)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{c.CPUProfile, c.MemProfile, c.Trace, c.Plot} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	// Not a terminal: plain lines, one per sample, after the line that
	// says where the data goes.
	if !strings.HasPrefix(progress.String(), "bench: data in "+c.Dir+" (kept); ") || !regexp.MustCompile(`\nbench +0\.\ds  `).MatchString(progress.String()) || strings.Count(progress.String(), "\n") < 2 || strings.Contains(progress.String(), "\r") {
		t.Errorf("progress: %q", progress.String())
	}
	// An interleaved run's progress says the ratio so far.
	if !strings.Contains(progress.String(), "x baseline so far") {
		t.Errorf("progress without the ratio so far: %q", progress.String())
	}
	svg, _ := os.ReadFile(c.Plot)
	if err := xml.Unmarshal(svg, new(struct{})); err != nil || !strings.Contains(string(svg), "<polyline") {
		t.Errorf("plot is not an SVG with a line: %v", err)
	}
	html := filepath.Join(dir, "plot.html")
	if err := WritePlot(html, res); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(html); !strings.Contains(string(b), "<svg") || !strings.Contains(string(b), "throughput") {
		t.Errorf("html plot: %.200s", b)
	}
	var sum bytes.Buffer
	if err := res.WriteSummary(&sum); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"throughput", "latency", "baseline", "ratio", "readers"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
	var js bytes.Buffer
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Records != res.Records {
		t.Errorf("JSON round trip: %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		edit  func(*Config)
		usage bool // else ErrUnavailable
		msg   string
	}{
		{func(c *Config) { c.Producers = 0 }, true, "--producers"},
		{func(c *Config) { c.Partitions = MaxPartitions + 1 }, true, "--partitions"},
		{func(c *Config) { c.RecordSize = -1 }, true, "--record-size"},
		{func(c *Config) { c.Batch = 0 }, true, "--batch"},
		{func(c *Config) { c.Batch, c.RecordSize = 1000, 1<<20 }, true, "MiB"},
		{func(c *Config) { c.Codec = "brotli" }, true, "--codec"},
		{func(c *Config) { c.Fsync = "sometimes" }, true, "--fsync"},
		{func(c *Config) { c.Fsync = "interval=0s" }, true, "--fsync"},
		{func(c *Config) { c.Mode = "fast" }, true, "--mode"},
		{func(c *Config) { c.TxnBatches = 0 }, true, "--txn-batches"},
		{func(c *Config) { c.Duration, c.Records = time.Second, 5 }, true, "exclude"},
		{func(c *Config) { c.Records = -5 }, true, "--records"},
		{func(c *Config) { c.Readers = -1 }, true, "--readers"},
		{func(c *Config) { c.Readers = MaxReaders + 1 }, true, "--readers"},
		{func(c *Config) { c.Isolation = "serializable" }, true, "--isolation"},
		{func(c *Config) { c.Payload = "zeros" }, true, "--payload"},
		{func(c *Config) { c.Plot = "x.png" }, true, "--plot"},
		{func(c *Config) { c.Topic = "a/b" }, true, "--topic"},
	} {
		cfg := Defaults()
		cfg.Dir = t.TempDir()
		c.edit(&cfg)
		_, err := Run(context.Background(), cfg, nil)
		want := ErrUnavailable
		if c.usage {
			want = ErrUsage
		}
		if !errors.Is(err, want) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v: got %v, want %v mentioning %q", cfg, err, want, c.msg)
		}
	}
}

func TestIntervalHist(t *testing.T) {
	prev := -1
	for v := int64(0); v < 1<<40; v = v*9/8 + 1 {
		i := bucketOf(v)
		if i < prev {
			t.Fatalf("bucketOf(%d) = %d after %d", v, i, prev)
		}
		prev = i
		if got := bucketValue(i); v >= 16 && (float64(got) < float64(v)*(1-1.0/16) || float64(got) > float64(v)*(1+1.0/16)) {
			t.Fatalf("bucket of %d says %d", v, got)
		}
	}
	var h intervalHist
	for v := int64(1); v <= 1000; v++ {
		h.record(v * 1000)
	}
	var counts [numBuckets]uint64
	h.drainInto(&counts)
	if p99 := quantile(&counts, 0.99); p99 < 990_000*15/16 || p99 > 990_000*17/16 {
		t.Errorf("p99 of 1..1000 us = %d ns", p99)
	}
	h.drainInto(&counts) // drained: adds nothing
	if q := quantile(&counts, 1); q < 1_000_000*15/16 || q > 1_000_000*17/16 {
		t.Errorf("max %d", q)
	}
}

// TestRetention: with --retention-bytes the run deletes segments as it
// writes, under fsync always the rolls reuse their files, and the bytes
// and the baseline are those written, not those left in the log.
func TestRetention(t *testing.T) {
	if !segment.ZeroFillSupported {
		t.Skip("recycling follows zero fills, Linux only")
	}
	c := small(t)
	c.Producers, c.Partitions = 1, 1
	c.Fsync = "always"
	c.RecordSize, c.Batch = 1000, 80 // 80 KB batches: files of them are reused
	c.Records = 16000                // 16 MB in 200 batches: 16 segments, retention every 20ms
	c.SegmentBytes = 1 << 20
	c.RetentionBytes = 1 << 20
	res := mustRun(t, c)
	checkSane(t, res)
	if res.SegmentsDeleted == 0 || res.SegmentsRecycled == 0 {
		t.Fatalf("segments deleted %d, recycled %d", res.SegmentsDeleted, res.SegmentsRecycled)
	}
	if min := res.Records * int64(c.RecordSize); res.Bytes < min {
		t.Fatalf("bytes %d below the %d of values written: counted from what retention left", res.Bytes, min)
	}
	c.Readers = 1
	if _, err := Run(context.Background(), c, nil); !errors.Is(err, ErrUsage) {
		t.Fatalf("--retention-bytes with --readers: %v, want ErrUsage", err)
	}
}
