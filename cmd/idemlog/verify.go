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

// exitRepairable: verify found only crash images the next open repairs.
const exitRepairable = 3

const verifySynopsis = "Usage: idemlog verify [--max-batch-bytes N] PATH...\n"

const verifyAbout = `
Check log segments as recovery would, without changing anything. PATH is a
data directory (its subdirectories are partition directories), a partition
directory (it holds <20-digit base offset>.log files), or one .log file,
which may be a bare Kafka segment of any name, with or without indexes.

Every batch is checked: framing, size, CRC, codec, counts, offsets rising
and within int32 of the segment's base. The .index, .timeindex and
.txnindex beside a segment, if any, are checked against its batches. Across
a partition's segments, each must start at or above the offset where the
one before ended: gaps, as Kafka's compaction leaves them, are counted;
overlaps are errors. Batches without records (headers compaction kept for
a producer's state) are valid. In an idemlog partition (its checkpoints in
the partition directory) a gap is an error too, unless its topic.config's
cleanup.policy lists compact; so are a missing .txnindex (every segment
has one once the partition's checkpoints carry a checksum), a damaged
checkpoint or topic.config, a recovery point past the log end (records
that were durable are gone) and, in a log closed cleanly, a log start past
the log end.
The files of a log cleaning that a crash interrupted (Kafka's swap:
<base>.log.cleaned, <base>.log.swap and their indexes') are what the next
open repairs: it deletes .cleaned files and any .swap at or above one, and
puts the other .swap segments in place of the segments whose offsets they
cover, which is the log checked here; .deleted files, waiting out
file.delete.delay.ms, are noted.
In an idemlog partition not closed cleanly (its recovery-point checkpoint in
the partition directory, no .kafka_cleanshutdown there or in the data
directory above) a gap in a segment the next open recovers is an error:
recovery cuts the log there. An all-zero tail (or a recycled file's older
batches) is accepted only where a crash leaves one in a log that was not
closed cleanly: on its last segment, the unfinished active one, or on the
segment rolled just before it whose batches reach the next segment's base
exactly; opening the partition recovers both. A torn batch at the end of
that last segment, and .txnindex entries whose abort markers it took, are
what a crash leaves too: reported as repairable, not as corruption. So is a
rolled segment above the recovery point whose batches stop short of the
next segment's base (a power cut took its unsynced tail under a sync policy
other than always): the next open cuts the log there and deletes the later
segments, and the report says how many.
Flags may come before or after the paths.
`

const verifyDetails = `
Output:
  One line per segment: batches, records, bytes, offsets FIRST..NEXT (NEXT
  is one past the last offset), offsets skipped in gaps, and the index
  entries checked or "no index"; "note: ..." lines for what is accepted but
  unusual; one line per partition; a final "Summary: ..." line.
  "repairable: ..." lines for crash images the next open repairs, such as
  "unclean tail that recovery will cut (N bytes, from position P)".
  The first bad file ends the check of its PATH with an "error: ..." line
  naming the file and the byte position or index entry; the other PATHs are
  still checked. Every finding is printed once, on standard output, in the
  report; standard error is for the command line's own errors.

Exit status:
  0  every PATH is sound
  1  corruption: a file is damaged, inconsistent or unreadable, and data is
     lost or at risk (whatever else was found)
  2  the command line is wrong
  3  nothing but crash images that the next open repairs without losing
     anything that was synced (unclean tails, .txnindex entries past them,
     an interrupted cleaning's .cleaned and .swap files)
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
		// Verify prints the error in the report ("error: ..."): once.
		sum, err := logdump.Verify(stdout, p, logdump.VerifyOptions{MaxBatchSize: *maxBatch})
		total.Add(sum)
		if err != nil {
			failed++
		}
	}
	switch {
	case failed > 0:
		fmt.Fprintf(stdout, "Summary: %v: %d of %d paths FAILED\n", total, failed, len(paths))
		return exitFail
	case total.Repairable > 0:
		fmt.Fprintf(stdout, "Summary: %v: REPAIRABLE (the next open repairs it)\n", total)
		return exitRepairable
	}
	fmt.Fprintf(stdout, "Summary: %v: OK\n", total)
	return exitOK
}
