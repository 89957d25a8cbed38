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
package partition
