// Package txnindex implements Kafka's per-segment aborted-transaction index
// (<20-digit base>.txnindex), byte compatible with the file an Apache Kafka
// broker writes, and the two read_committed helpers built on it: AbortedFor
// (the broker's collection across segments) and Filter (the consumer's
// skipping of aborted batches).
//
// # Entry layout
//
// 34 bytes per entry, big-endian, no file header, no preallocation:
//
//	 0     2                10               18               26               34
//	+-----+----------------+----------------+----------------+----------------+
//	| ver | producerId i64 | firstOffset i64| lastOffset i64 | lastStable i64 |
//	+-----+----------------+----------------+----------------+----------------+
//
// ver is an int16 and always 0. Offsets are absolute, not relative to the
// segment base: an aborted transaction may start in an earlier segment.
// firstOffset is the base offset of the producer's first batch in the
// transaction and lastOffset is the offset of its ABORT marker. An entry
// goes into the index of the segment holding the marker, and only for
// aborted transactions that wrote data (an empty transaction has nothing to
// hide). The file is created on the first Append, so most segments have
// none.
//
// # Ordering and the load-time checks
//
// Markers are appended in offset order, so lastOffset strictly increases
// through a file; Append rejects anything else with ErrOutOfOrder rather
// than write a file that Open would refuse. Open rejects, with ErrCorrupt,
// a size that is not a multiple of 34 (a torn append), a version other than
// 0, a lastOffset that does not increase, and a lastOffset below the
// segment base (Kafka's own sanity check). ErrCorrupt tells the caller to
// recover the segment (Create, then rebuild the entries from the .log).
//
// # lastStableOffset and why read_committed stops on it
//
// lastStableOffset (LSO) is the first offset of the oldest transaction of a
// different producer still open when this ABORT marker was written, or
// marker offset + 1 if none was. Everything below it was decided at the
// time of the abort.
//
// A read_committed fetch returns the data in [F, U) together with the
// aborted transactions that overlap it: lastOffset >= F and firstOffset <
// U. Their markers may lie in any segment from the one holding F onwards,
// so the broker scans txn indexes forward, and it may stop after a segment
// holding an entry whose LSO >= U: any transaction aborted later, whose
// marker comes after this one, either was open at the time of this abort,
// so its firstOffset >= LSO >= U, or started after the marker, so its
// firstOffset >= marker offset + 1 >= LSO >= U. (The producer of this
// entry had no other transaction open, so "a different producer" loses
// nothing.) Neither overlaps [F, U), so no later segment can contribute.
//
// Collect follows Kafka's TransactionIndex.collectAbortedTxns exactly and
// returns at the first entry whose LSO >= U; by the argument above no later
// entry of a well-formed index would have been collected anyway.
//
// # Concurrency
//
// One writer (Append, TruncateTo, Reset, Sync, Close, Delete; a mutex
// serializes them anyway) and any number of readers (Entries, Collect,
// AbortedFor). The entries live in memory as an immutable slice published
// through an atomic.Pointer, so readers take no lock and allocate nothing.
// Append may extend the published slice's backing array in place: readers
// never look past their own length, and Entries hands out a
// capacity-clipped view so that a caller's append copies instead of writing
// into that spare capacity. TruncateTo always publishes a fresh array,
// because entries it drops may still be read through older views.
package txnindex
