// Package partition is one partition's log: an ordered list of segments
// (package segment) in `<dir>/<topic>-<partition>/`, with offsets, reads,
// rolls, fsync policies, crash recovery and retention.
//
// # Appends
//
// Append validates a batch's framing and CRC, assigns it the next offsets,
// and copies it once into the active segment with the base offset stamped
// in the copy. Appends to one partition are serialized by one mutex held
// for the copy only; the sync that an acknowledgement may wait for happens
// outside it, shared by every appender waiting at the time (group commit).
//
// # What an acknowledgement promises
//
//	policy     acknowledged means                          high watermark
//	never      in the page cache (survives a process       the log end
//	           crash, not a power loss)
//	interval   as never; synced within Interval            the log end
//	bytes      as never; at most Bytes written since the   the log end
//	           last sync (the appender crossing the mark
//	           waits for the sync)
//	always     on disk (fdatasync returned)                the log end, or with
//	                                                       DurableVisibility the
//	                                                       durable end
//
// With DurableVisibility, readers never see a batch that a power loss
// could take back.
//
// Under always, while syncs are small (<= 64 KiB each on average), the
// maintainer zero-fills the segment ahead of the writer
// (segment.ReserveZeroFill), so that an fdatasync flushes data only
// instead of also committing fallocate's extent conversions to the
// journal: a producer syncing every 11 KB batch ran at 584-861k records/s
// against 357-464k on the project's machine (docs/PERFORMANCE.md). Larger
// syncs keep fallocate, as the zeros would double the bytes the device
// writes.
//
// Under always, too, a segment that retention deletes leaves its file
// for the next roll (segment.Recycle, Options.NoRecycle): written blocks
// at no cost in bandwidth, so in the steady state of a log with retention
// even large syncs flush data only (100 KB per sync: 1.49-1.51x the
// records/s of new files, BenchmarkAppendAlwaysRecycled). The file's old
// batches past the writer's end are cut by the seal, or by recovery, which
// stops at the first batch below the expected offset and keeps the
// segments after a rolled one whose batches reach the next base.
//
// Under always, appends that arrive while a group sync is in flight are
// staged (segment.SetStaging): copied into a buffer of the active
// segment instead of written with a pwrite each under the writer mutex.
// They could not be acknowledged before the next sync anyway; when the
// sync in flight ends, its leader writes them all with one pwrite and
// publishes them, and the next sync makes them durable. A sync's end
// offset is read under the writer mutex while nothing is staged, so every
// byte it counts durable was in a file when its fdatasync began. With 16
// producers on one partition this cut CPU per record by 20-40% (pwrite of
// an 11 KB batch: 11 us of CPU under contention, 4 us alone).
//
// # Reads
//
// Readers take no lock: they load the immutable segment list and the high
// watermark from atomics, hold a reference on the segment they read, and
// get whole batches that alias the mapping (Chunk). Retention can remove a
// segment from the list while a reader holds it; the files are closed when
// the last reference goes (reference counts rather than copies: a read is
// zero-copy, and a reader pins at most one segment). Retention only takes
// segments off the list under the writer's mutex, checkpoints the new log
// start after releasing it, and leaves the files to the maintainer (or the
// last reader); Open deletes segments wholly below the log start that a
// crash left.
//
// A reader waiting for data (a Kafka Fetch long-poll) parks on Advanced, a
// channel closed at the next rise of the high watermark; one shared channel
// serves every waiter, and an append pays one atomic load while nobody
// waits.
//
// # Recovery
//
// Close writes a clean-shutdown marker after syncing and trimming
// everything; Open then trusts the files and reads only the tail of the
// last segment. Without the marker, Open validates every batch from the
// segment holding the checkpointed recovery point to the end (each must
// start exactly at the offset after the one before), truncates at the
// first torn or corrupt batch, drops later segments (unless the cut
// segment's batches reach the next one's base: what was cut is a recycled
// file's stale tail) and rebuilds their indexes. The recovery point advances with every sync and is checkpointed
// on rolls, flushes and Close; a stale checkpoint only lengthens the scan.
//
// With Options.Lazy, a log closed cleanly opens dormant: the marker
// records the log end and what retention needs, and Open reads only it,
// the checkpoints and the directory listing. The segments are opened at
// the first append, read below the high watermark, lookup by time or
// retention pass with something to delete, exactly as an eager Open
// would; until then the log holds no descriptor, mapping or goroutine,
// and its Close writes nothing (the marker still describes every file).
// A directory without segments is dormant too, empty at its log start.
//
// # Compaction
//
// Clean runs one pass of Kafka's log cleaner over a log (compact.go):
//
//	offsets: 0 ........ firstDirty ............ firstUncleanable ... LEO
//	         | clean    | dirty, cleanable      | uncleanable      |
//	segs:    [s0][s1]...[sK]......[sM]           [sM+1]...  [active]
//
// firstUncleanable is the least of the active segment's base, the high
// watermark, the last stable offset and the first segment with a record
// younger than min.compaction.lag.ms,
// lowered to a segment base. The pass maps every key of the dirty
// range to its newest offset (exact keys, at most CleanConfig.MaxKeys:
// a full map ends the pass at the last key it took), then copies every
// segment from the first up to the one holding the map's last offset,
// group by group (as many segments as fit in segment.bytes), keeping per
// batch and record what Kafka keeps: the newest record of each key,
// tombstones and transaction markers until the delete horizon stamped in
// their batch (KIP-534), no data of aborted transactions, and the last
// batch of every producer, emptied if need be, so that its sequence and
// epoch survive. Offsets never change.
//
// A cleaned segment has no gap between its batches: a run of dropped
// batches becomes one empty batch without producer (a filler, 61 bytes)
// covering their offsets, and the segment ends exactly at the next one's
// base. Recovery reads a gap as the end of the data (a recycled file's
// torn base offset looks like one), so a Kafka-style gap would be cut by
// the first recovery scan; consumers skip empty batches as they skip
// those Kafka's cleaner leaves.
//
// A group's copy is written as <base>.log.cleaned (and .index, .timeindex,
// .txnindex), synced, and swapped in (compact_swap.go):
//
//	state on disk                         an open after a crash finds
//	*.cleaned (+ some *.swap)             the old segments (rolled back)
//	all *.swap, synced (commit point)     the cleaned segment (completed)
//	old files *.deleted, new *.swap       the cleaned segment
//	some *.swap renamed to final          the cleaned segment
//	*.deleted left                        the cleaned segment
//
// The copy reads the old segments through references, without the
// writer's lock; the lock is held only for the renames of the old files
// and of the new ones and the switch of the segment list (Kafka's
// replaceSegments also runs under the log's lock). Readers holding an old
// segment keep its mapping; retention leaves a group being swapped in the
// list until the switch.
package partition
