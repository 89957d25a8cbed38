package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/idemlog/idemlog/bench"
)

const benchSynopsis = "Usage: idemlog bench [flags]\n"

const benchAbout = `
Generate load on an embedded engine and measure it: --producers goroutines
append batches of --batch records of --record-size bytes to --partitions
partitions (producer i writes partition i % partitions), for --duration or
until --records records in all are written, while --readers goroutines may
tail the partitions from offset 0.

Modes: plain appends batches without a producer id (Partition.Append);
idempotent gives each producer goroutine its own idempotent producer
(Producer.Send: producer id, sequence numbers, deduplication).
Readers tail partitions from the start: read_uncommitted up to the high
watermark, read_committed below the last stable offset with aborted
transactions hidden. Transactional mode gives each producer goroutine its
own transactional id and commits every --txn-batches batches.

The data goes to a fresh temporary directory, removed at the end, unless
--dir names one: that is kept for 'idemlog dump' and 'idemlog verify', and
an existing one is reopened (recovered if it was not closed cleanly) and
appended to.

The data goes to its directory as fast as the machine takes it (gigabytes
in seconds), so by default the run is bounded in bytes: 32 MiB segments,
and retention deletes what lies beyond 128 MiB per partition, every 20ms
(--retention-bytes 0 turns it off; with --readers it is off, as readers
start at offset 0). The first line on stderr says where the data goes and
how much of it stays on disk at most.

The ratio (ratio_to_baseline) compares the run's log bytes per second with
the machine's own write speed measured on the same directory in the same
run: the run is cut into slices of --slice, and after each slice of the
engine (producers and readers running) the baseline writes for as long
with the producers and readers parked: write(2) of chunks of the run's
average batch size into files of --segment-bytes, preallocated, the
oldest deleted beyond what retention keeps, so that both sides hold the
same bytes in the page cache and meet the same writeback and the same
neighbours' load. For --fsync never and interval the baseline is plain
write(2); for always and bytes=N, whose appenders wait for syncs, it is
write(2) with an fdatasync every G chunks, G being the batches per sync the
run made so far, into one file per partition written, all at once (under
always the oldest file is reused, as the engine reuses deleted segments').
Where neither side waits for the device (--fsync never, interval) both are
bound by the CPU, and each side's rate is taken per second of the CPU time
the process could have had in its slices (its own CPU time plus the
machine's idle time): on a quiet machine that is the wall-clock rate, on a
shared one it leaves out what the other processes took, which changes from
one slice to the next. The ratio is pooled over the pairs of slices (the
engine's bytes over its time in all its slices, over the baseline's); the
report also gives the pairs' own ratios: median, min, max and quartiles,
and the wall-clock figures beside. Records/s and the timeline
count the engine's slices only. After the run the other baseline figures
(write+fdatasync under never and interval, write under always and bytes=N,
and under always write+fdatasync over unwritten blocks) are measured for at
most half a second each, for information. --slice 0 measures the compared
figure after the run instead, in one block: that figure then follows
whatever the page cache and the machine's other tenants do between the two.
`

const benchDetails = `
Output:
  While running, on stderr: first where the data goes and how much of it
  stays on disk at most, then a progress line, rewritten in place on a
  terminal, one per second of the engine's time otherwise, with the ratio
  so far (--quiet: none of these). Then a summary on
  stdout, or with --json one JSON object: the workload (every flag),
  records, batches, bytes (as in the log, compressed), payload_bytes,
  seconds, records_per_sec, bytes_per_sec, latency_us (p50, p90, p99,
  p999, max, mean per batch, from the Send/Append call to its return),
  allocs_per_batch, cpu_ns_per_record (process CPU time over the engine's
  slices, per record), syncs (fdatasync calls of the logs),
  device_written_bytes (what the block device under --dir wrote during the
  engine's slices; baseline.device_written_bytes during the baseline's; -1
  where /sys/dev/block cannot be read), disk_bound_bytes, baseline
  (write_bytes_per_sec, write_fdatasync_bytes_per_sec, sync_group, ...),
  ratio_to_baseline, ratio_basis (cpu_available or wall), ratio_spread
  (pooled: the ratio; slices, median, min, max, p25, p75: the pairs'
  own ratios), wall_ratio_spread (the same over wall-clock time),
  read_records_per_sec, read_bytes_per_sec, partition_offsets and a
  per-second timeline of the engine's time. --plot draws the timeline
  (throughput and p99; a last sample shorter than half the others is left
  out of the drawing).

Exit status: 0 after a run, 1 if it failed, 2 if the command line is wrong.
`

func runBench(args []string, stdout, stderr io.Writer) int {
	d := bench.Defaults()
	fs := newFlagSet("bench")
	c := d
	fs.IntVar(&c.Producers, "producers", d.Producers, "run `N` producer goroutines")
	fs.IntVar(&c.Partitions, "partitions", d.Partitions, "write to `N` partitions; producer i writes partition i % N")
	fs.IntVar(&c.RecordSize, "record-size", d.RecordSize, "`BYTES` of value per record (keys are null)")
	fs.IntVar(&c.Batch, "batch", d.Batch, "`RECORDS` per batch")
	fs.StringVar(&c.Codec, "codec", d.Codec, "`CODEC` of the batches: none, gzip, snappy, lz4 or zstd")
	fs.StringVar(&c.Fsync, "fsync", d.Fsync, "sync `POLICY`: never, always, interval=DUR or bytes=N")
	fs.StringVar(&c.Mode, "mode", d.Mode, "`MODE`: plain, idempotent or transactional")
	fs.IntVar(&c.TxnBatches, "txn-batches", d.TxnBatches, "`N` batches per transaction (transactional mode)")
	fs.DurationVar(&c.Duration, "duration", bench.DefaultDuration, "run for `DUR`, unless --records is given")
	fs.Var((*optInt64)(&c.Records), "records", "write `N` records in all, then stop, instead of running for --duration")
	fs.IntVar(&c.Readers, "readers", d.Readers, "run `N` readers, tailing the partitions from offset 0")
	fs.StringVar(&c.Isolation, "isolation", d.Isolation, "readers' `LEVEL`: read_uncommitted or read_committed")
	fs.StringVar(&c.Dir, "dir", "", "data `DIR`, kept after the run, appended to if it exists (default: a temporary directory, removed)")
	fs.StringVar(&c.Topic, "topic", d.Topic, "topic `NAME`")
	fs.Var((*optInt64)(&c.SegmentBytes), "segment-bytes", "segment size in `BYTES` (Kafka's default is 1 GiB; grown to hold two batches)")
	fs.Var((*optInt64)(&c.RetentionBytes), "retention-bytes", "retention.bytes per partition, `BYTES`, applied every 20ms during the run: the steady state of a log that deletes as it writes; 0 turns it off (off with --readers)")
	fs.StringVar(&c.Payload, "payload", d.Payload, "record values, `KIND`: text (compressible words) or random")
	fs.Int64Var(&c.Seed, "seed", d.Seed, "`N` seeding the payload generator")
	fs.DurationVar(&c.BaselineMax, "baseline-max", d.BaselineMax, "bound each baseline measurement made after the run to `DUR` (the informative ones to 500ms at most); 0 skips the baseline, slices included")
	fs.DurationVar(&c.Slice, "slice", d.Slice, "alternate the engine and the baseline in slices of `DUR`; 0 measures the baseline after the run")
	fs.BoolVar(&c.JSON, "json", false, "print the report as one JSON object")
	fs.StringVar(&c.Plot, "plot", "", "draw throughput and p99 per second into `FILE` (.svg or .html)")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the run to `FILE`")
	fs.StringVar(&c.MemProfile, "memprofile", "", "write a heap profile after the run to `FILE`")
	fs.StringVar(&c.Trace, "trace", "", "write an execution trace of the run to `FILE`")
	fs.BoolVar(&c.Quiet, "quiet", false, "show no progress on stderr")
	showUsage := func(w io.Writer, full bool) {
		fmt.Fprint(w, benchSynopsis)
		if full {
			fmt.Fprint(w, benchAbout)
			fmt.Fprint(w, "\nFlags:\n")
			printFlags(w, fs)
			fmt.Fprint(w, benchDetails)
		} else {
			// The flags are many: the error above stays in view.
			fmt.Fprint(w, "Run 'idemlog bench --help' for the flags.\n")
		}
	}
	rest, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		showUsage(stdout, true)
		return exitOK
	}
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("unexpected argument %q", rest[0])
	}
	if err == nil {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if set["records"] && !set["duration"] {
			c.Duration = 0
		}
		if set["readers"] && !set["retention-bytes"] {
			// Readers start at offset 0, which retention deletes.
			c.RetentionBytes = 0
		}
		if !set["segment-bytes"] {
			// The default segment holds two of the workload's batches
			// at least, and retention four segments.
			if need := 2 * int64(c.Batch) * int64(c.RecordSize+8); need > c.SegmentBytes && need <= bench.MaxBatchBytes*2 {
				c.SegmentBytes = need
				if !set["retention-bytes"] && c.RetentionBytes > 0 {
					c.RetentionBytes = max(c.RetentionBytes, 4*need)
				}
			}
		}
		// A value that changes nothing is a mistake to report, not to
		// echo in the workload as if it applied.
		switch {
		case set["isolation"] && c.Isolation != "read_uncommitted" && c.Isolation != "read_committed":
			err = fmt.Errorf("%w: --isolation %q: want read_uncommitted or read_committed", bench.ErrUsage, c.Isolation)
		case set["segment-bytes"] && c.SegmentBytes == 0:
			err = fmt.Errorf("%w: --segment-bytes 0 is no size: give a positive number of bytes (the default is %d)", bench.ErrUsage, d.SegmentBytes)
		case set["records"] && c.Records == 0:
			err = fmt.Errorf("%w: --records 0 writes nothing: give a positive count", bench.ErrUsage)
		case set["duration"] && c.Duration == 0:
			err = fmt.Errorf("%w: --duration 0 writes nothing: give a positive duration", bench.ErrUsage)
		case set["txn-batches"] && c.Mode != "transactional":
			err = fmt.Errorf("%w: --txn-batches applies to --mode transactional only", bench.ErrUsage)
		case set["isolation"] && c.Readers == 0:
			err = fmt.Errorf("%w: --isolation applies to readers: give --readers N", bench.ErrUsage)
		default:
			err = c.Validate()
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemlog bench: %v\n\n", err)
		showUsage(stderr, false)
		return exitUsage
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal the run winds down and reports; a second one
	// kills the process as usual.
	context.AfterFunc(ctx, stop)
	res, err := bench.Run(ctx, c, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "idemlog bench: %v\n", err)
		if errors.Is(err, bench.ErrUsage) || errors.Is(err, bench.ErrUnavailable) {
			return exitUsage
		}
		return exitFail
	}
	if c.JSON {
		err = res.WriteJSON(stdout)
	} else {
		err = res.WriteSummary(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemlog bench: %v\n", err)
		return exitFail
	}
	return exitOK
}

// optInt64 is an int64 flag whose zero value means "not given", so that the
// help shows no "(default 0)" for it.
type optInt64 int64

func (v *optInt64) String() string {
	if v == nil || *v == 0 {
		return ""
	}
	return strconv.FormatInt(int64(*v), 10)
}

func (v *optInt64) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return errors.New("parse error")
	}
	*v = optInt64(n)
	return nil
}
