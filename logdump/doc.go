// Package logdump decodes a Kafka log segment (a `.log` file) and prints
// every record batch in it, the way Kafka's DumpLogSegments tool
// (kafka-dump-log.sh) does.
//
// A segment has no file header and no index of its own: it is record batches
// (magic 2) laid end to end, each framed by its baseOffset and batchLength.
// Dumping therefore walks the file batch by batch: read the 17 bytes that hold
// the framing and the magic, check that the length is possible, read the rest
// of the batch, check its CRC and structure, and decode its records. The
// reader keeps one buffer, grown to the largest batch met and never past
// Options.MaxBatchSize, so a large segment streams in constant memory and a
// lying length field costs no more memory than the bytes actually present.
//
// Damage comes in two kinds, and they are treated differently. A batch whose
// framing is intact but whose contents are wrong (CRC mismatch, malformed
// records, a stream that does not decompress) is reported with its file
// position and the walk goes on, because the length field still says where
// the next batch starts. A torn tail (fewer bytes than the framing or the
// length promise), an impossible length, or a magic other than 2 leaves
// nothing to trust about where the next batch would be, so the walk stops
// there; this is also where Kafka's recovery would truncate the segment.
// Either way Dump returns an error wrapping the batch package's sentinel
// (batch.ErrCRC, batch.ErrTruncated, ...), after printing everything it
// could. One exception: zeros from a batch boundary to the end of the file
// are the preallocated space of an active segment when DumpFile finds the
// file is the last segment of a partition not closed cleanly; the summary
// counts them (Summary.ZeroTail) and the dump succeeds. Anywhere else they
// are an error.
//
// Two output formats are offered. The default text format follows
// DumpLogSegments: a "baseOffset: ... isvalid: true" line per batch and a
// "| offset: ..." line per record, framed by a "Dumping FILE" line and a
// summary. The JSON format (Options.JSON) prints exactly one object per
// batch per line, with a fixed set of fields in a fixed order, for scripts
// and golden tests; keys, values and header values are base64 as
// encoding/json writes []byte, with null for a null key or value and "" for
// an empty one.
//
// DumpPath also takes a partition directory, whose .log files it dumps in
// base-offset order, and the offset (.index) and time (.timeindex) indexes,
// whose entries it prints as DumpLogSegments does, one JSON object per
// entry with Options.JSON. The zeros that end an index never trimmed (its
// log was not closed cleanly) are preallocated space, not entries. Producer
// snapshots (.snapshot) and aborted-transaction indexes (.txnindex) are
// decoded too, one line (or JSON object) per producer or per transaction.
//
// Verify (Linux only, as it maps files) checks segments instead of
// printing them: a data directory, a partition directory or one segment,
// each file with segment.VerifyFile, and across a partition's segments the
// rules recovery relies on: offsets never overlap, only the segments a
// crash left unfinished in a log not closed cleanly may end in zeros, and
// in an idemlog partition not closed cleanly the segments its next open
// recovers have no gaps. An idemlog partition (its checkpoints in its own
// directory) has no gaps at all unless its topic is compacted (its
// topic.config's cleanup.policy lists compact: then gaps are normal
// outside the active segment, overlaps never), a .txnindex per segment
// once its checkpoints are checksummed, sound checkpoints, and a recovery
// point within its log. What a crash leaves and the next open repairs (a
// torn tail of the last segment of a log not closed cleanly, .txnindex
// entries whose markers it took, the .cleaned and .swap files of an
// interrupted log cleaning) is counted in VerifySummary.Repairable, not
// returned as an error; a .swap segment is checked as the segment it
// becomes.
//
// For compacted logs a dump shows each batch's gap (the offsets skipped
// before it), the batches cleaning emptied (no records, kept for their
// producer state) and delete horizons (KIP-534).
package logdump
