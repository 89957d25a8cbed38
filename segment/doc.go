// Package segment is one segment of a partition log: a Kafka `.log` file of
// concatenated record batches, written through a shared memory mapping, with
// its offset index and time index.
//
// # Files
//
//	<base>.log        batches, byte for byte as Kafka stores them
//	<base>.index      sparse offset index (package index)
//	<base>.timeindex  sparse time index (package index)
//
// base is the offset of the segment's first batch, as 20 zero-padded digits.
//
// # Writing
//
// One goroutine, the partition's writer, appends. The whole segment
// capacity (segment.bytes) is mapped once at creation, but bytes are only
// ever stored below the reserved mark: blocks up to it were allocated with
// fallocate (mmap.Fallocate) or by writing zeros over them (ReserveZeroFill),
// so a full disk surfaces as an error from Append and never as SIGBUS from
// a store. The reservation runs ahead of the write cursor in chunks, and a
// background call (Prepare) can extend it, zero-filling the run when asked
// (fdatasync is then cheaper for appends there: no unwritten extents to
// convert), and prefault the pages with MADV_POPULATE_WRITE so the writer
// rarely takes a page fault itself.
//
// Append copies the caller's batch into the file with pwritev (or stores it
// through the mapping, see WriteMode) and updates the indexes: an offset-index entry is
// added before an append when more than IndexIntervalBytes were appended
// since the previous entry, and the time index follows the largest
// timestamp seen.
//
// # Reading
//
// Readers see bytes below the published size (Publish), which the partition
// advances after an append, or after the sync that makes it durable when
// only durable data may be read. The published size is an atomic; the bytes
// below it were written before it was stored, so a reader that loads it sees
// them complete.
//
// # Closing
//
// Seal trims the .log and indexes to their real sizes (a roll, or a clean
// shutdown); a segment opened sealed is mapped read-only, and one sealed
// in this process keeps its writable mapping until closed. After an unclean
// shutdown the active segment's file is longer than its data (the
// reservation): Recover scans it, keeps the valid prefix and truncates the
// rest.
//
// # Recycling
//
// A retired segment's .log may become a later segment's file (Recycle,
// OpenSpare): written blocks, so syncs over them write no metadata (no
// extent conversion). Its old batches lie past the new data until Seal
// trims them; those whose header straddles a sector boundary get their
// CRC complemented first. recycle.go has the argument for recovery, and
// its caveats.
package segment
