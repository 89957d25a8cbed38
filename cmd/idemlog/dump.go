package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/logdump"
)

const dumpSynopsis = "Usage: idemlog dump [--json] [--no-records] FILE...\n"

const dumpAbout = `
Decode Kafka log segments (.log files: record batches of magic 2 laid end to
end, as idemlog and Kafka write them) and print every batch and its records,
in the layout of Kafka's kafka-dump-log.sh. A FILE may also be a partition
directory, whose .log files are dumped in base-offset order, an offset
index (.index) or time index (.timeindex), whose entries are printed (an
index's base offset comes from its <20-digit base offset> name), a producer
state snapshot (.snapshot: one line per producer) or an aborted-transaction
index (.txnindex: one line per aborted transaction). Files are only read.

A batch with a bad CRC or undecodable records is reported with its byte
position and the dump goes on; so is an index entry out of order. A torn
tail, an impossible batch length or an unknown magic stops the dump of that
file at that position. Flags may come before or after the files.
`

const dumpDetails = `
Output:
  Text: a "Dumping FILE" line, one "baseOffset: ..." line per batch, one
  "| offset: ..." line per record, problems on "error: ..." lines, and a
  "Summary: ..." line. For compacted logs a batch line also shows
  "deleteHorizonMs: T" (KIP-534's delete horizon, attribute bit 6), and
  ends with "gapBefore: N" when N offsets were skipped before the batch
  (from the segment's base for its first; in a partition directory, from
  the previous segment's last batch; negative: an overlap, which no log
  writes) and "emptied: true" for a batch without records, a header
  compaction kept for its offsets and producer state. The summary counts
  both.
  JSON: one object per batch per line, with the fields baseOffset,
  lastOffset, producerId, producerEpoch, baseSequence, isTransactional,
  isControl, compression, crcValid, deleteHorizonMs (-1: none), gapBefore,
  emptied and records (offset, timestamp, key, value, headers); keys and
  values are base64, null when null. Indexes:
  {"offset":O,"position":P} or {"timestamp":T,"offset":O} per entry.
  Snapshots: {"producerId", "producerEpoch", "coordinatorEpoch",
  "currentTxnFirstOffset" (-1: none), "lastTimestamp", "lastSequence",
  "lastOffset", "offsetDelta"} per producer. .txnindex: {"producerId",
  "firstOffset", "lastOffset", "lastStableOffset"} per aborted transaction.
  Problems go to stderr.

Exit status: 0 if every file is clean, 1 if a file is corrupt, truncated or
unreadable, 2 if the command line is wrong.
`

func runDump(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("dump")
	jsonOut := fs.Bool("json", false, "print one JSON object per batch (or index entry) per line")
	noRecords := fs.Bool("no-records", false, "print batches without their records")
	maxBatch := fs.Int("max-batch-bytes", logdump.DefaultMaxBatchSize,
		"largest batch accepted, in `bytes`; a larger length field counts as corruption")
	maxInflate := fs.Int("max-inflate-bytes", batch.DefaultInflateLimit,
		"most `bytes` one batch's records may decompress to")
	// --help gets everything; a mistake gets the synopsis and the flags,
	// short enough that the error above them stays in view.
	u := commandUsage{name: "dump", synopsis: dumpSynopsis, about: dumpAbout, details: dumpDetails}
	showUsage := func(w io.Writer, full bool) { u.print(w, fs, full) }
	files, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		showUsage(stdout, true)
		return exitOK
	}
	if err == nil {
		switch {
		case len(files) == 0:
			err = errors.New("missing FILE")
		case *maxBatch < batch.HeaderSize:
			err = fmt.Errorf("--max-batch-bytes %d is below the %d-byte batch header", *maxBatch, batch.HeaderSize)
		case *maxInflate <= 0:
			err = fmt.Errorf("--max-inflate-bytes %d is not positive", *maxInflate)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemlog dump: %v\n\n", err)
		showUsage(stderr, false)
		return exitUsage
	}

	opts := logdump.Options{
		JSON:         *jsonOut,
		NoRecords:    *noRecords,
		MaxBatchSize: *maxBatch,
		MaxInflate:   *maxInflate,
		Warn:         stderr,
	}
	status := exitOK
	// Every file is dumped even after a bad one: when a partition is
	// damaged, what the other segments hold is exactly what one wants.
	for _, f := range files {
		err := logdump.DumpPath(stdout, f, opts)
		if err == nil {
			continue
		}
		status = exitFail
		// A directory's bad files come joined; each gets its own line.
		errs := []error{err}
		var files logdump.FileErrors
		if errors.As(err, &files) {
			errs = files
		}
		for _, e := range errs {
			fmt.Fprintf(stderr, "idemlog dump: %v\n", e)
		}
	}
	return status
}
