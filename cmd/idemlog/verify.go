//go:build linux

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/logdump"
)

const verifySynopsis = "Usage: idemlog verify [--max-batch-bytes N] PATH...\n"

const verifyAbout = `
Check log segments as recovery would, without changing anything. PATH is a
data directory (its subdirectories are partition directories), a partition
directory (it holds <20-digit base offset>.log files), or one .log file,
which may be a bare Kafka segment of any name, with or without indexes.

Every batch is checked: framing, size, CRC, codec, counts, offsets rising
and within int32 of the segment's base. The .index and .timeindex beside a
segment, if any, are checked against its batches. Across a partition's
segments, each must start at or above the offset where the one before ended:
gaps, as Kafka's compaction leaves them, are counted; overlaps are errors.
In an idemlog partition not closed cleanly (its recovery-point checkpoint in
the partition directory, no .kafka_cleanshutdown there or in the data
directory above) a gap in a segment the next open recovers is an error:
recovery cuts the log there. An all-zero tail (or a recycled file's older
batches) is accepted only where a crash leaves one in a log that was not
closed cleanly: on its last segment, the unfinished active one, or on the
segment rolled just before it whose batches reach the next segment's base
exactly; opening the partition recovers both. Flags may come before or
after the paths.
`

const verifyDetails = `
Output:
  One line per segment: batches, records, bytes, offsets FIRST..NEXT (NEXT
  is one past the last offset), offsets skipped in gaps, and the index
  entries checked or "no index"; "note: ..." lines for what is accepted but
  unusual; one line per partition; a final "Summary: ..." line.
  The first bad file ends the check of its PATH with an "error: ..." line
  naming the file and the byte position or index entry; the other PATHs are
  still checked.

Exit status: 0 if every PATH is sound, 1 if a file is corrupt, inconsistent
or unreadable, 2 if the command line is wrong.
`

func runVerify(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("verify")
	maxBatch := fs.Int("max-batch-bytes", logdump.DefaultMaxBatchSize,
		"largest batch accepted, in `bytes`; a larger length field counts as corruption")
	u := commandUsage{name: "verify", synopsis: verifySynopsis, about: verifyAbout, details: verifyDetails}
	showUsage := func(w io.Writer, full bool) { u.print(w, fs, full) }
	paths, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		showUsage(stdout, true)
		return exitOK
	}
	if err == nil {
		switch {
		case len(paths) == 0:
			err = errors.New("missing PATH")
		case *maxBatch < batch.HeaderSize:
			err = fmt.Errorf("--max-batch-bytes %d is below the %d-byte batch header", *maxBatch, batch.HeaderSize)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemlog verify: %v\n\n", err)
		showUsage(stderr, false)
		return exitUsage
	}

	var total logdump.VerifySummary
	failed := 0
	// A bad PATH does not keep the others from being checked: which
	// partitions are sound is as useful as which is not.
	for _, p := range paths {
		sum, err := logdump.Verify(stdout, p, logdump.VerifyOptions{MaxBatchSize: *maxBatch})
		total.Add(sum)
		if err != nil {
			fmt.Fprintf(stderr, "idemlog verify: %v\n", err)
			failed++
		}
	}
	if failed > 0 {
		fmt.Fprintf(stdout, "Summary: %v: %d of %d paths FAILED\n", total, failed, len(paths))
		return exitFail
	}
	fmt.Fprintf(stdout, "Summary: %v: OK\n", total)
	return exitOK
}
