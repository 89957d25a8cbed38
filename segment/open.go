package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/index"
	"github.com/idemlog/idemlog/mmap"
	"github.com/idemlog/idemlog/txnindex"
)

// Open opens an existing segment. An active segment is mapped at full
// capacity for appends; any other is mapped read-only at its size and
// counts as sealed. Open trusts nothing but the file size: call LoadTail
// (cheap, after a clean shutdown) or Recover (a scan) before use.
func Open(dir string, base int64, opts Options, active bool) (*Segment, error) {
	opts = opts.withDefaults()
	path := filepath.Join(dir, FileName(base, ".log")+opts.NameSuffix)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot open segment %s: %w", path, errors.Join(ErrIO, err))
	}
	s := &Segment{dir: dir, base: base, opts: opts, log: f, fd: int(f.Fd()), nextOffset: base,
		maxTimestamp: -1, maxTimestampOff: base, firstTimestamp: -1}
	st, err := f.Stat()
	if err != nil {
		s.closeFiles()
		return nil, fmt.Errorf("cannot stat segment %s: %w", path, errors.Join(ErrIO, err))
	}
	if active {
		err = s.openActive(st.Size())
	} else {
		err = s.openSealed(st.Size())
	}
	if err != nil {
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

func (s *Segment) openSealed(size int64) error {
	s.size, s.sealed = size, true
	s.written.Store(size)
	s.reserved.Store(size)
	s.published.Store(size)
	if size > 0 {
		m, err := mmap.Map(s.log, 0, int(size), false)
		if err != nil {
			return fmt.Errorf("cannot map segment %d: %w", s.base, errors.Join(ErrIO, err))
		}
		s.m, s.data = m, m.Bytes()
	}
	if err := s.openIndexes(false); err != nil {
		return err
	}
	// The mapping holds the bytes readers need: the descriptor goes, and
	// what needs the file again (Recover, Sync, Activate) reopens it
	// (logFile). A log of thousands of sealed segments holds none.
	err := s.log.Close()
	s.log, s.fd = nil, -1
	return err
}

// openIndexes opens both indexes. An index that is missing or breaks its
// rules is not an error: it is recreated empty and the segment is marked
// for Recover, which rebuilds it from the .log.
func (s *Segment) openIndexes(writable bool) error {
	var err error
	if s.txns == nil {
		// A transaction index that breaks its rules (Kafka's sanity check:
		// an entry below the segment base) is emptied and the segment
		// recovered; the engine's replay of the segment's markers rebuilds it.
		if s.txns, err = txnindex.Open(s.path(".txnindex"), s.base); err != nil {
			if !errors.Is(err, txnindex.ErrCorrupt) {
				return fmt.Errorf("cannot open transaction index: %w", ioErr(err))
			}
			s.indexSuspect = true
			if s.txns, err = txnindex.Create(s.path(".txnindex"), s.base); err != nil {
				return fmt.Errorf("cannot open transaction index: %w", ioErr(err))
			}
		}
	}
	if writable {
		// A segment being written always has a .txnindex, empty until a
		// transaction aborts in it, so that a missing one is known lost
		// (partition.Open rebuilds it) rather than taken for "no aborts".
		if err := s.txns.EnsureFile(); err != nil {
			return fmt.Errorf("cannot open transaction index: %w", ioErr(err))
		}
	}
	if writable {
		s.offsets, err = index.OpenOffset(s.path(".index"), s.base, s.indexBytes(index.OffsetEntrySize))
	} else {
		s.offsets, err = index.OpenOffsetReadOnly(s.path(".index"), s.base)
	}
	if err != nil {
		if !rebuildable(err) {
			return fmt.Errorf("cannot open offset index: %w", ioErr(err))
		}
		s.indexSuspect = true
		_ = os.Remove(s.path(".index"))
		if s.offsets, err = index.OpenOffset(s.path(".index"), s.base, s.indexBytes(index.OffsetEntrySize)); err != nil {
			return fmt.Errorf("cannot open offset index: %w", ioErr(err))
		}
	}
	if writable {
		s.times, err = index.OpenTime(s.path(".timeindex"), s.base, s.indexBytes(index.TimeEntrySize))
	} else {
		s.times, err = index.OpenTimeReadOnly(s.path(".timeindex"), s.base)
	}
	if err != nil {
		if !rebuildable(err) {
			return fmt.Errorf("cannot open time index: %w", ioErr(err))
		}
		s.indexSuspect = true
		_ = os.Remove(s.path(".timeindex"))
		if s.times, err = index.OpenTime(s.path(".timeindex"), s.base, s.indexBytes(index.TimeEntrySize)); err != nil {
			return fmt.Errorf("cannot open time index: %w", ioErr(err))
		}
	}
	return nil
}

// indexBytes is the size an index of entrySize-byte entries is created
// (and preallocated) at: IndexMaxBytes (segment.index.bytes, 10 MiB by
// default), or less when the segment cannot hold that many entries. An
// entry is written only once more than IndexIntervalBytes were appended
// since the previous one (Segment.index), so a segment of MaxBytes gets
// fewer than MaxBytes/IndexIntervalBytes of them, plus the time index's
// final entry at the seal. A 64 MiB segment needs 128 and 192 KiB, not
// 2 x 10 MiB: every roll fallocated those and every seal trimmed them, and
// with retention every deletion freed them, each free a discard on a
// filesystem mounted with discard, on the device that syncs the log.
//
// The bound is taken over the larger of MaxBytes and the file: a segment
// written before segment.bytes was lowered is larger than MaxBytes, and
// Recover, which rebuilds its indexes with the same rule, stops at the
// first entry that does not fit. (Without this: it cut valid data there.)
func (s *Segment) indexBytes(entrySize int) int {
	capacity := s.opts.MaxBytes
	if st, err := s.log.Stat(); err == nil {
		capacity = max(capacity, st.Size())
	}
	// 16 spare entries: each clean restart while the segment stays active
	// adds a final time-index entry (Seal), and a full index only rolls the
	// segment early, but needlessly.
	entries := capacity/s.opts.IndexIntervalBytes + 16
	return int(min(int64(s.opts.IndexMaxBytes), entries*int64(entrySize)))
}

// rebuildable reports whether an index open failed because of the file's
// content (or absence), which a rebuild from the .log fixes, rather than
// the disk.
func rebuildable(err error) bool {
	return errors.Is(err, index.ErrCorrupt) || errors.Is(err, fs.ErrNotExist)
}

// LoadTail restores the writer's view of the segment (next offset, largest
// timestamp) from the indexes and the batches after the last index entry,
// without scanning the whole file. An error means the files disagree and
// the segment needs Recover.
func (s *Segment) LoadTail() error {
	if s.indexSuspect {
		return fmt.Errorf("cannot trust indexes of segment %d: %w", s.base, index.ErrCorrupt)
	}
	if s.size == 0 {
		return nil
	}
	first := batch.Batch(s.data[:s.size])
	if _, err := batch.Size(first); err != nil {
		return fmt.Errorf("cannot read first batch of segment %d: %w", s.base, err)
	}
	if first.BaseOffset() != s.base {
		// Recover's rule: a segment starts at its base.
		return fmt.Errorf("cannot trust segment %d: its first batch is at offset %d: %w", s.base, first.BaseOffset(), index.ErrCorrupt)
	}
	s.firstTimestamp = first.MaxTimestamp()
	_, pos := s.offsets.Lookup(1<<63 - 1)
	if pos < 0 || pos > s.size {
		// The .log was cut below its last indexed batch: the tail walk
		// would start past the data, find nothing, and leave the next
		// offset at the base, handing out offsets already given.
		return fmt.Errorf("cannot trust segment %d: its offset index points at position %d, past its %d bytes: %w", s.base, pos, s.size, index.ErrCorrupt)
	}
	s.bytesSinceIndex = s.size - pos
	if ts, off := s.times.LastEntry(); ts >= 0 {
		s.maxTimestamp, s.maxTimestampOff = ts, off
	} else {
		// No time-index entry: none is written while every timestamp is
		// 0 or less, and an entry {0, base} is all zeros, the index's
		// terminator, which the open drops. The largest timestamp may
		// then lie before the last offset-index entry: the whole segment
		// is scanned for it, or the seal's final entry would name a later
		// offset for it and time lookups would skip the earlier batches.
		pos = 0
	}
	for pos < s.size {
		b := batch.Batch(s.data[pos:s.size])
		n, err := batch.Size(b)
		if err != nil {
			return fmt.Errorf("cannot read tail of segment %d at %d: %w", s.base, pos, err)
		}
		if b.BaseOffset() < s.nextOffset {
			// A stale batch of a recycled file (recycle.go), past the
			// end of a segment that was never sealed.
			return fmt.Errorf("cannot read tail of segment %d at %d: offset %d below %d: %w", s.base, pos, b.BaseOffset(), s.nextOffset, index.ErrCorrupt)
		}
		if ts := b.MaxTimestamp(); ts > s.maxTimestamp {
			s.maxTimestamp, s.maxTimestampOff = ts, b.LastOffset()
		}
		s.nextOffset = b.NextOffset()
		pos += int64(n)
	}
	return nil
}

// Recover rebuilds the segment from its .log: every batch is validated
// (framing, size, CRC, offsets increasing and within the segment), the
// indexes are rebuilt, and the file is truncated after the last valid
// batch. It reports whether anything was cut; for the active segment the
// reserved zero tail does not count. visit, if not nil, sees each valid
// batch in order (producer-state rebuild).
func (s *Segment) Recover(maxBatchSize int, visit func(b batch.Batch)) (truncated bool, err error) {
	if _, err := s.logFile(); err != nil {
		return false, err
	}
	st, err := s.log.Stat()
	if err != nil {
		return false, fmt.Errorf("cannot stat segment %d: %w", s.base, errors.Join(ErrIO, err))
	}
	fileSize := min(st.Size(), int64(len(s.data)))
	if err := s.reopenIndexesForWrite(); err != nil {
		return false, err
	}
	// The aborted-transaction entries of a recovered segment are rebuilt by
	// the engine's replay of its markers.
	if err := errors.Join(s.offsets.Reset(), s.times.Reset(), s.txns.Reset()); err != nil {
		return false, fmt.Errorf("cannot reset indexes of segment %d: %w", s.base, err)
	}
	s.bytesSinceIndex, s.nextOffset = 0, s.base
	s.maxTimestamp, s.maxTimestampOff, s.firstTimestamp = -1, s.base, -1
	// An index error is no reason to cut data: a full index (an index
	// limit lowered since the segment was written) leaves the rest of the
	// batches unindexed (index). (Without this: the rebuild stopped there,
	// and the open deleted every later segment as if the batch were torn.)
	s.recovering = true
	defer func() { s.recovering = false }()
	var pos int64
	for pos < fileSize {
		rest := s.data[pos:fileSize]
		n, err := batch.Size(rest)
		if err != nil {
			break
		}
		b, err := batch.Validate(rest[:n], maxBatchSize)
		if err != nil {
			break
		}
		// After the first batch, each starts exactly where the one before
		// ended: idemlog never leaves gaps (Kafka's compaction does;
		// idemlog's covers dropped offsets with empty batches, see the
		// partition package's Compaction). A higher offset is not data: in a recycled
		// file, a crash that kept a new batch's later sectors but not the
		// one with the first bytes of its base offset leaves stale high
		// bytes there in front of a valid new body (the CRC does not cover
		// the base offset).
		// The last offset must not wrap (a base offset near MaxInt64: the
		// CRC does not cover it).
		// The first batch too starts exactly at the segment's base: a
		// segment is created at the offset its first append gets. A higher
		// one is a client's base offset that WriteMmap copied in before
		// stamping the real one, the stamp lost in a crash (or any other
		// torn base offset): kept, its records were served at offsets
		// never given to them.
		if b.BaseOffset() != s.nextOffset ||
			b.LastOffset() < b.BaseOffset() || b.LastOffset()-s.base > 1<<31-1 {
			break
		}
		if err := s.index(b, b.BaseOffset(), pos); err != nil {
			break
		}
		if visit != nil {
			visit(b)
		}
		pos += int64(n)
	}
	truncated = pos < fileSize && !allZero(s.data[pos:fileSize])
	if pos < st.Size() {
		if err := s.log.Truncate(pos); err != nil {
			return truncated, fmt.Errorf("cannot truncate segment %d at %d: %w", s.base, pos, ioErr(err))
		}
	}
	s.size = pos
	s.written.Store(pos)
	s.reserved.Store(pos)
	s.published.Store(pos)
	if s.sealed {
		return truncated, s.resealIndexes()
	}
	return truncated, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// reopenIndexesForWrite makes a sealed segment's indexes writable (and
// preallocated) so Recover can rebuild them.
func (s *Segment) reopenIndexesForWrite() error {
	if !s.sealed {
		return nil
	}
	if err := errors.Join(s.offsets.Close(), s.times.Close()); err != nil {
		return fmt.Errorf("cannot reopen indexes of segment %d: %w", s.base, err)
	}
	return s.openIndexes(true)
}

// resealIndexes trims a recovered sealed segment's indexes again.
func (s *Segment) resealIndexes() error {
	if s.maxTimestamp >= 0 {
		if err := s.times.AppendFinal(s.maxTimestamp, s.maxTimestampOff); err != nil {
			return fmt.Errorf("cannot finish time index: %w", err)
		}
	}
	if err := errors.Join(s.offsets.Trim(), s.times.Trim()); err != nil {
		return fmt.Errorf("cannot trim indexes of segment %d: %w", s.base, err)
	}
	return s.SyncIndexes()
}

// Activate turns a sealed segment back into the active one (after recovery
// cut the log inside it).
func (s *Segment) Activate() error {
	if !s.sealed {
		return nil
	}
	if _, err := s.logFile(); err != nil {
		return err
	}
	if s.m != nil {
		if err := s.m.Unmap(); err != nil {
			return fmt.Errorf("cannot remap segment %d: %w", s.base, err)
		}
		s.m, s.data = nil, nil
	}
	if err := errors.Join(s.offsets.Close(), s.times.Close()); err != nil {
		return fmt.Errorf("cannot reopen indexes of segment %d: %w", s.base, err)
	}
	s.sealed = false
	size := s.size
	maxTs, maxOff, firstTs, next, since := s.maxTimestamp, s.maxTimestampOff, s.firstTimestamp, s.nextOffset, s.bytesSinceIndex
	if err := s.openActive(size); err != nil {
		return err
	}
	s.maxTimestamp, s.maxTimestampOff, s.firstTimestamp, s.nextOffset, s.bytesSinceIndex = maxTs, maxOff, firstTs, next, since
	return nil
}
