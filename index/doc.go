// Package index implements Kafka's per-segment offset index
// (<20-digit base>.index) and time index (<20-digit base>.timeindex):
// memory-mapped files of fixed-size big-endian entries, byte compatible
// with the files an Apache Kafka broker writes.
//
// # Entry layouts
//
// Offsets are stored relative to the segment's base offset B, which is why
// every offset in a segment must fit in int32 relative to B.
//
// Offset index, 8 bytes per entry:
//
//	 0               4               8
//	+---------------+---------------+
//	| relOffset i32 | position  i32 |   relOffset = offset - B
//	+---------------+---------------+   position  = byte position in B.log
//
// Time index, 12 bytes per entry:
//
//	 0                               8               12
//	+-------------------------------+---------------+
//	| timestamp                 i64 | relOffset i32 |
//	+-------------------------------+---------------+
//
// Offset-index entries strictly increase in both fields. Time-index
// timestamps strictly increase and their offsets never decrease.
//
// # The sparse-entry rule (the partition's job, not this package's)
//
// The segment keeps a counter of bytes appended since the last index
// entry. On each append, if the counter is greater than
// index.interval.bytes (default 4096) BEFORE this append's size is added,
// the segment writes an offset-index entry {last offset of this append,
// start position of this append} and a time-index entry {max timestamp so
// far in the segment, offset of the batch holding it} (MaybeAppend, which
// drops it unless the timestamp grew), then resets the counter to 0; only
// then does it add the append's size. Recovery replays the same rule per
// batch. Lookup therefore gives a lower bound: the caller scans the .log
// forward from the returned position to the first batch whose last offset
// is >= the target.
//
// # Preallocation and trimming
//
// A writable index is preallocated (by its segment: room for an entry per
// index.interval.bytes of the segment's capacity, at most
// segment.index.bytes) with mmap.Fallocate before it is mapped: stores through a
// shared mapping into unallocated blocks raise SIGBUS when the disk is
// full, whereas a failed fallocate is an ordinary error at open. On roll
// and on clean close the segment calls Trim, which cuts the file to the
// bytes actually used, as Kafka does.
//
// # Finding the entry count: the zero terminator
//
// Kafka treats every byte of an existing index file as entries, which is
// only right for trimmed files. After a crash the file is still
// preallocated, its tail all zeros. This package instead takes the used
// prefix to end at the first all-zero entry, which it finds by binary
// search. That is sound because no genuine entry is all zero after the
// first, and, in the offset index, not even the first:
//
//   - Offset index: the byte counter starts at 0 with the segment, so the
//     batch at position 0 never gets an entry (0 is not > interval for any
//     interval >= 0); the first entry's position is > 0, and positions
//     strictly increase. Every entry has position != 0. Append enforces
//     this, so an index written here always satisfies it.
//   - Time index: the first timestamp is >= 0 (an empty index's last
//     timestamp is NoTimestamp = -1 and only greater ones are appended)
//     and later ones are strictly greater, so entries 1.. have a timestamp
//     > 0. Entry 0 may genuinely be {0, 0}, so the search covers entries
//     1.. only; a lone {0, 0} entry is indistinguishable from an empty slot
//     and is dropped at open. That is harmless: lookups then start from
//     the segment's start, which is always a valid lower bound.
//
// Everything after the last entry must stay zero for this to hold, so
// TruncateTo and Reset zero the entries they drop, and a writable open
// cuts the file back to the used prefix before preallocating again (fresh
// blocks read as zeros, whatever the torn tail held).
//
// The sampled entries the search visits, plus the first and the last, are
// checked to be ordered; a failure, a size that is not a multiple of the
// entry size, or a last offset below the base is ErrCorrupt, and the
// caller rebuilds the index from the .log. SanityCheck checks every entry.
// Torn writeback after a crash can leave a prefix that passes the sampled
// checks but not SanityCheck; segments above the recovery point are
// rebuilt anyway (Kafka does the same), and entries below it were synced.
//
// # Concurrency
//
// One writer (the partition's appender) and any number of readers.
// Lookup, Entries, Entry, LastOffset, LastEntry and SanityCheck may run
// concurrently with Append, MaybeAppend, AppendFinal and Trim: the entry
// count is published atomically after the entry's bytes are written, and
// Trim never moves or unmaps the mapping. TruncateTo, Reset, Close, Delete
// and Rename must not overlap any reader: the caller guarantees it (for
// instance readers hold a reference on the segment, and the log drains
// them before truncating or closing). No lock is taken on the lookup path.
package index
