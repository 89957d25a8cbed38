package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/index"
	"github.com/idemlog/idemlog/mmap"
	"github.com/idemlog/idemlog/txnindex"
)

// Sentinel errors.
var (
	// ErrFull: the batch does not fit in the segment's remaining capacity;
	// the partition rolls before retrying.
	ErrFull = errcode.New(errcode.RecordListTooLarge, "segment full")
	// ErrNoSpace: the disk could not reserve blocks for the append. Nothing
	// was written; the append may succeed once space returns.
	ErrNoSpace = errcode.New(errcode.KafkaStorageError, "no space left on device")
	// ErrSealed: an append to a sealed segment.
	ErrSealed = errcode.New(errcode.UnknownServerError, "segment sealed")
	// ErrIO: any other I/O failure of the segment's files.
	ErrIO = errcode.New(errcode.KafkaStorageError, "segment I/O error")
	// ErrOffsetGap: an append whose base offset is not the one after the
	// segment's last batch. Recovery reads a gap as the end of the data
	// (Recover), so none may be written.
	ErrOffsetGap = errcode.New(errcode.UnknownServerError, "offset gap in segment")
)

// WriteMode chooses how Append moves bytes into the file.
type WriteMode int

const (
	// WriteDefault lets the owner choose; a segment treats it as WriteMmap.
	WriteDefault WriteMode = iota
	// WriteMmap copies into the shared mapping: no syscall per append. It
	// needs the pages prefaulted ahead of the cursor (Prepare) by another
	// core to pay off; on a 2-core machine it loses to WritePwrite.
	WriteMmap
	// WriteMixed stores batches smaller than mixedThreshold through the
	// mapping (a memcpy instead of a syscall, with pages prefaulted ahead by
	// Prepare) and writes larger ones with pwritev, where the syscall is
	// cheap next to the copy and the kernel's page allocation beats faults.
	WriteMixed
	// WritePwrite uses pwritev(2): the kernel copies and allocates page
	// cache in one pass, and no page is mapped writable, so a following
	// fdatasync does not pay for write-protect faults on the next stores.
	WritePwrite
)

// Options configure a segment. Zero fields take Kafka's defaults.
type Options struct {
	// MaxBytes is segment.bytes: the segment's capacity.
	MaxBytes int64
	// IndexMaxBytes is segment.index.bytes, per index file.
	IndexMaxBytes int
	// IndexIntervalBytes is index.interval.bytes.
	IndexIntervalBytes int64
	// ReserveAhead is how far past the write cursor blocks are reserved.
	ReserveAhead int64
	// Mode is the write path.
	Mode WriteMode
	// Reserve is how blocks are reserved ahead of the writer.
	Reserve ReserveMode
	// NameSuffix is appended to every file name of a segment made by
	// Create (".cleaned": the compactor writes a segment under names that
	// an open deletes, and renames it into place once it is complete).
	NameSuffix string
}

// ReserveMode chooses how a segment backs its file with blocks ahead of
// the write cursor.
type ReserveMode int

const (
	// ReserveDefault is ReserveFallocate (the partition picks
	// ReserveZeroFill under SyncAlways).
	ReserveDefault ReserveMode = iota
	// ReserveFallocate reserves with fallocate(2): cheap, but the blocks
	// are "unwritten" extents, and every fdatasync after an append into
	// them also commits the extent conversion to the journal.
	ReserveFallocate
	// ReserveZeroFill lets the background Prepare (and CreateSpare) write
	// zeros ahead of the cursor and wait for them to reach the device
	// (zeroFill), as PostgreSQL zero-fills its WAL segments: appends then
	// overwrite written blocks, and each fdatasync flushes data only.
	// Measured here with 11 KB writes, each followed by an fdatasync: 6-8
	// us per write and 102-142 us per fdatasync into zeroed blocks,
	// against 10-12 us and 157-223 us into fallocated ones. The price is
	// writing every byte of the segment twice, so it pays when syncs are
	// many and small (latency rules) and not when they are few and large
	// (bandwidth rules): the caller says which per call (Prepare's zero).
	// The writer itself never zero-fills: when it outruns Prepare it waits
	// for a fill in flight, then fallocates just what it needs.
	ReserveZeroFill
)

const (
	DefaultMaxBytes           = 1 << 30
	DefaultIndexMaxBytes      = 10 << 20
	DefaultIndexIntervalBytes = 4096
	DefaultReserveAhead       = 8 << 20

	// stageCap is the capacity a segment's stage starts with (SetStaging):
	// about what 16 producers' 11 KB batches stage during one sync. It
	// grows by append when more is staged (the partition writes it out at
	// 128 KiB, so it rarely grows); stageKeep is the most it keeps once staging ends: above the
	// partition's bound plus a batch, so that a steady load reallocates
	// nothing, while a partition that never staged much holds little.
	stageCap  = 128 << 10
	stageKeep = 4 << 20

	// mixedThreshold splits WriteMixed: below it a syscall costs more than
	// the copy.
	mixedThreshold = 8 << 10

	// zeroPiece is how much a zero fill writes and waits for at a time
	// (ReserveZeroFill): small, so that a writer's fdatasync queued behind
	// a piece on the device, or a writer waiting for the next piece,
	// waits little. A producer syncing every 11 KB batch: p99 378-388 us
	// with 64 KiB pieces, 454-503 us with 256 KiB, throughput the same.
	zeroPiece = 64 << 10
)

func (o Options) withDefaults() Options {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.IndexMaxBytes <= 0 {
		o.IndexMaxBytes = DefaultIndexMaxBytes
	}
	if o.IndexIntervalBytes <= 0 {
		o.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if o.ReserveAhead <= 0 {
		o.ReserveAhead = DefaultReserveAhead
	}
	o.ReserveAhead = min(o.ReserveAhead, o.MaxBytes)
	return o
}

// FileName returns the name of a segment file: the base offset as 20 digits
// and the suffix (".log", ".index", ".timeindex", ...).
func FileName(base int64, suffix string) string { return fmt.Sprintf("%020d%s", base, suffix) }

// Segment is one segment. Fields are owned by the partition's writer unless
// marked atomic; readers use only Base, Published, Read and the indexes'
// lookups.
type Segment struct {
	dir  string
	base int64
	opts Options

	log  *os.File
	fd   int // log's descriptor, for syscalls without a closure per call
	m    *mmap.Mapping
	data []byte // the mapping; len = mapped capacity

	offsets *index.OffsetIndex
	times   *index.TimeIndex
	// txns is the aborted-transaction index: appended by the writer under
	// the partition's mutex, read lock-free (it publishes immutable views).
	txns *txnindex.Index

	// Writer-owned.
	size            int64 // bytes written
	bytesSinceIndex int64
	nextOffset      int64 // offset after the last batch
	maxTimestamp    int64 // largest batch maxTimestamp so far
	maxTimestampOff int64 // its batch's last offset
	firstTimestamp  int64 // maxTimestamp of the first append, for time-based rolls
	sealed          bool
	indexSuspect    bool                   // an index was missing or corrupt at open: Recover rebuilds it
	recovering      bool                   // Recover is running: a full index leaves batches unindexed (index)
	recycled        int64                  // bytes of an older segment the file held (recycle.go); set before the first append
	hdr             [batch.HeaderSize]byte // pwrite scratch
	// Staging (SetStaging): appends are copied into stage, whose first
	// byte belongs at file position stagePos, and reach the file with one
	// pwrite when the owner calls FlushStage. Empty whenever staging is off.
	stage    []byte
	stagePos int64
	staging  bool

	// reserved is the file size backed by allocated blocks. The writer
	// reads it without the lock on the fast path; resMu serializes the
	// writer with a background Prepare, never two producers.
	reserved atomic.Int64
	resMu    sync.Mutex
	// filling is set (under resMu) while Prepare zero-fills past reserved
	// without the lock; the writer waits on fillDone (resMu) before it
	// reserves anything itself, so nobody writes into a range being zeroed.
	filling  bool
	fillDone sync.Cond

	// published is how many bytes readers may see. It is stored after the
	// bytes below it are written (by the writer, or after the sync that made
	// them durable), and Go atomics are sequentially consistent, so a reader
	// that loads n and then reads data[:n] sees those bytes complete.
	published atomic.Int64
	// written mirrors size for other goroutines (a syncer): stored after
	// the bytes below it are written into the file (so it lags size by
	// what is staged).
	written atomic.Int64
}

// Create makes a new, empty active segment at base in dir.
func Create(dir string, base int64, opts Options) (*Segment, error) {
	opts = opts.withDefaults()
	path := filepath.Join(dir, FileName(base, ".log")+opts.NameSuffix)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot create segment %s: %w", path, errors.Join(ErrIO, err))
	}
	s := &Segment{dir: dir, base: base, opts: opts, log: f, fd: int(f.Fd()), nextOffset: base,
		maxTimestamp: -1, maxTimestampOff: base, firstTimestamp: -1}
	if err := s.openActive(0); err != nil {
		s.closeFiles()
		os.Remove(path)
		return nil, err
	}
	return s, nil
}

// openActive maps the full capacity, reserves the first chunk and opens the
// indexes for writing. size is the valid data already in the file.
func (s *Segment) openActive(size int64) error {
	st, err := s.log.Stat()
	if err != nil {
		return fmt.Errorf("cannot stat %s: %w", s.log.Name(), errors.Join(ErrIO, err))
	}
	capacity := max(s.opts.MaxBytes, st.Size())
	if s.m, err = mmap.Map(s.log, 0, int(capacity), true); err != nil {
		return fmt.Errorf("cannot map segment: %w", errors.Join(ErrIO, err))
	}
	s.data = s.m.Bytes()
	// The file's current length is already backed by blocks (it was either
	// reserved by us or written); anything past it is not.
	s.reserved.Store(st.Size())
	s.size = size
	s.written.Store(size)
	s.published.Store(size)
	if err := s.reserve(size); err != nil {
		return err
	}
	return s.openIndexes(true)
}

func (s *Segment) path(suffix string) string {
	return filepath.Join(s.dir, FileName(s.base, suffix)+s.opts.NameSuffix)
}

// Base returns the segment's base offset.
func (s *Segment) Base() int64 { return s.base }

// Size returns the bytes written (writer only).
func (s *Segment) Size() int64 { return s.size }

// NextOffset returns the offset after the last batch (writer only).
func (s *Segment) NextOffset() int64 { return s.nextOffset }

// Written returns the bytes written so far, from any goroutine.
func (s *Segment) Written() int64 { return s.written.Load() }

// Published returns the bytes readers may see.
func (s *Segment) Published() int64 { return s.published.Load() }

// Publish lets readers see the first n bytes. The published size only
// grows: the writer and a syncer may publish concurrently, each with the
// size it knows, and the larger wins.
func (s *Segment) Publish(n int64) {
	for {
		cur := s.published.Load()
		if n <= cur || s.published.CompareAndSwap(cur, n) {
			return
		}
	}
}

// MaxTimestamp returns the largest batch timestamp and the last offset of
// its batch (writer only), -1 if the segment is empty.
func (s *Segment) MaxTimestamp() (ts, offset int64) { return s.maxTimestamp, s.maxTimestampOff }

// FirstTimestamp returns the max timestamp of the first append, -1 if none.
func (s *Segment) FirstTimestamp() int64 { return s.firstTimestamp }

// IndexFull reports whether either index has no room for another entry.
func (s *Segment) IndexFull() bool { return s.offsets.Full() || s.times.Full() }

// Fits reports whether a batch of n bytes ending at lastOffset can be
// appended: within capacity, indexes not full, last offset within int32 of
// the base.
func (s *Segment) Fits(n int, lastOffset int64) bool {
	return s.size+int64(n) <= s.opts.MaxBytes && !s.IndexFull() && lastOffset-s.base <= 1<<31-1
}

// Append writes b at the end of the segment with its base offset stamped
// as baseOffset (in the segment's copy: the caller's bytes are not
// modified, and the CRC does not cover the field), and indexes it. It does
// not publish. On error nothing is written and the segment is unchanged.
func (s *Segment) Append(b batch.Batch, baseOffset int64) (pos int64, err error) {
	if s.sealed {
		return 0, ErrSealed
	}
	n := int64(len(b))
	if s.size+n > s.opts.MaxBytes || s.size+n > int64(len(s.data)) {
		return 0, fmt.Errorf("cannot append %d bytes at %d of %d: %w", n, s.size, s.opts.MaxBytes, ErrFull)
	}
	last := baseOffset + int64(b.LastOffsetDelta())
	if s.size > 0 && baseOffset > s.nextOffset {
		return 0, fmt.Errorf("cannot append at offset %d to segment %d, whose next offset is %d: %w", baseOffset, s.base, s.nextOffset, ErrOffsetGap)
	}
	if baseOffset < s.nextOffset || last-s.base > 1<<31-1 || s.IndexFull() {
		return 0, fmt.Errorf("cannot index offset %d in segment %d: %w", last, s.base, ErrFull)
	}
	end := s.size + n
	if err := s.reserve(end); err != nil {
		return 0, err
	}
	pos = s.size
	if s.staging {
		if len(s.stage) == 0 {
			s.stagePos = pos
			if s.stage == nil {
				s.stage = make([]byte, 0, stageCap)
			}
		}
		at := len(s.stage)
		s.stage = append(s.stage, b...)
		batch.Batch(s.stage[at:]).SetBaseOffset(baseOffset)
	} else if !s.ThroughMapping(int64(n)) {
		// The stamped header goes from a scratch copy, the rest straight
		// from the caller: one pwritev, no extra copy of the payload.
		copy(s.hdr[:], b[:batch.HeaderSize])
		batch.Batch(s.hdr[:]).SetBaseOffset(baseOffset)
		if err := pwritev(s.fd, s.hdr[:], b[batch.HeaderSize:], pos); err != nil {
			return 0, fmt.Errorf("cannot write %d bytes at %d: %w", n, pos, ioErr(err))
		}
	} else {
		copy(s.data[pos:end], b)
		batch.Batch(s.data[pos:end]).SetBaseOffset(baseOffset)
	}
	if err := s.index(b, baseOffset, pos); err != nil {
		if s.staging {
			s.stage = s.stage[:len(s.stage)-int(n)] // nothing written
		}
		return 0, err
	}
	s.size = end
	if !s.staging {
		s.written.Store(end)
	}
	return pos, nil
}

// SetStaging turns staging on or off (writer only). While it is on,
// Append copies each batch into a buffer of the segment's instead of the
// file, and the bytes reach the file only at FlushStage, all with one
// pwrite: appenders that arrive while a group sync is in flight, and so
// cannot be acknowledged before the next one, then cost a memcpy each
// instead of a syscall, and the next sync's leader writes them together.
// Staged bytes are not Written, so the owner must not publish them, nor
// count them durable, before FlushStage. The stage must be empty to turn
// staging off.
func (s *Segment) SetStaging(on bool) {
	if !on && len(s.stage) > 0 {
		panic("BUG: staging turned off with staged bytes")
	}
	if !on && cap(s.stage) > stageKeep {
		// Only a batch far larger than usual (or a bound the owner does
		// not keep) stages this much: let the buffer go rather than hold
		// it for every partition that saw one.
		s.stage = nil
	}
	s.staging = on
}

// Staged returns the bytes staged and not yet in the file (writer only).
func (s *Segment) Staged() int { return len(s.stage) }

// FlushStage writes everything staged into the file with one pwrite
// (writer only). On error the staged bytes are lost (the stage is
// emptied, so that the segment stays consistent with what is written):
// the owner must fail the log, since their appends were accepted.
func (s *Segment) FlushStage() error {
	if len(s.stage) == 0 {
		return nil
	}
	end := s.stagePos + int64(len(s.stage))
	err := pwritev(s.fd, s.stage, nil, s.stagePos)
	s.stage = s.stage[:0]
	if err != nil {
		return fmt.Errorf("cannot write %d staged bytes at %d: %w", end-s.stagePos, s.stagePos, ioErr(err))
	}
	s.written.Store(end)
	return nil
}

// index records b, written at pos, in the indexes, with Kafka's sparse rule:
// an entry is written when more than IndexIntervalBytes were appended since
// the previous one, before counting this append.
func (s *Segment) index(b batch.Batch, baseOffset, pos int64) error {
	ts, last := b.MaxTimestamp(), baseOffset+int64(b.LastOffsetDelta())
	skip := s.recovering && s.IndexFull()
	if s.bytesSinceIndex > s.opts.IndexIntervalBytes && !skip {
		// The index files grow as they fill: their blocks first, before
		// anything changes, so that a full disk refuses the append whole.
		if err := errors.Join(s.offsets.ReserveNext(), s.times.ReserveNext()); err != nil {
			return fmt.Errorf("cannot index batch at %d: %w", pos, ioErr(err))
		}
	}
	if s.firstTimestamp < 0 {
		s.firstTimestamp = ts
	}
	if ts > s.maxTimestamp {
		s.maxTimestamp, s.maxTimestampOff = ts, last
	}
	// Recover keeps a batch that a full index cannot take (the segment
	// was written before segment.index.bytes was lowered): the indexes
	// stay sparse past it, which lookups, scanning forward from the last
	// entry, only pay for in time; an active segment then rolls (Fits).
	// Appends never meet a full index: Fits rolls first.
	if s.bytesSinceIndex > s.opts.IndexIntervalBytes && !skip {
		if err := s.offsets.Append(last, pos); err != nil {
			return fmt.Errorf("cannot index batch at %d: %w", pos, err)
		}
		if err := s.times.MaybeAppend(s.maxTimestamp, s.maxTimestampOff); err != nil {
			return fmt.Errorf("cannot time-index batch at %d: %w", pos, err)
		}
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += int64(len(b))
	s.nextOffset = last + 1
	return nil
}

// reserve makes sure blocks back the file up to end, reserving ReserveAhead
// more while at it.
func (s *Segment) reserve(end int64) error {
	if end <= s.reserved.Load() {
		return nil
	}
	s.resMu.Lock()
	defer s.resMu.Unlock()
	for s.filling && end > s.reserved.Load() {
		s.fillWait() // the fill raises reserved piece by piece
	}
	if s.opts.Reserve == ReserveZeroFill {
		// Prepare is behind (or fallocating): reserve one zero-fill
		// piece past this append, so that neither a syscall per page
		// nor a long unwritten run follows (every fallocated byte costs
		// the syncs into it).
		return s.reserveLocked(end, end+zeroPiece)
	}
	// Ahead in proportion to what the segment holds, up to ReserveAhead:
	// the first small append of a segment reserves a piece, not the
	// whole run (its owner's Prepare reserves further in the background).
	return s.reserveLocked(end, end+min(s.opts.ReserveAhead, max(zeroPiece, end)))
}

// fillWait waits, under resMu, for the zero fill in flight.
func (s *Segment) fillWait() {
	if s.fillDone.L == nil {
		s.fillDone.L = &s.resMu
	}
	s.fillDone.Wait()
}

func (s *Segment) reserveLocked(need, want int64) error {
	have := s.reserved.Load()
	if need <= have {
		return nil
	}
	page := int64(mmap.PageSize())
	want = min((want+page-1)/page*page, int64(len(s.data)))
	want = max(want, need)
	if err := mmap.Fallocate(s.log, have, want-have); err != nil {
		// Retry with just what this append needs: the disk may have room
		// for the batch but not for the whole chunk.
		if want == need || mmap.Fallocate(s.log, have, need-have) != nil {
			return fmt.Errorf("cannot reserve %d bytes for segment %d: %w", want-have, s.base, ioErr(err))
		}
		want = need
	}
	s.reserved.Store(want)
	return nil
}

// ThroughMapping reports whether an append of n bytes is stored through
// the mapping (and so gains from prefaulted pages) rather than by pwritev.
func (s *Segment) ThroughMapping(n int64) bool {
	return s.opts.Mode == WriteMmap || (s.opts.Mode == WriteMixed && n < mixedThreshold)
}

// Prepare reserves blocks and, with populate, prefaults pages for the next
// ahead bytes past the write cursor, so the writer does neither. It runs
// off the append path (a background goroutine of the partition); cursor is
// the writer's size as last seen. Prefaulting pays only for pages the
// writer stores to through the mapping: pages that pwritev fills are
// zeroed, mapped and then written again by the kernel, for nothing (65% of
// the Kafka listener's produce CPU with 1 MB batches, bench/peers). With
// zero, under ReserveZeroFill, it reserves by zero-filling
// (prepareZeroFill); otherwise with fallocate.
func (s *Segment) Prepare(cursor, ahead int64, populate, zero bool) error {
	var err error
	if zero && s.opts.Reserve == ReserveZeroFill {
		err = s.prepareZeroFill(cursor, ahead)
	} else {
		s.resMu.Lock()
		for s.filling {
			s.fillWait() // not two reservations at once, whoever calls
		}
		// Not past the mapped capacity: nothing is ever written there,
		// and near the end of a segment the blocks would only be wasted
		// (until the seal trims them) on a disk that may be nearly full.
		lim := min(cursor+ahead, int64(len(s.data)))
		err = s.reserveLocked(lim, lim)
		s.resMu.Unlock()
	}
	if err != nil {
		return err
	}
	end := min(s.reserved.Load(), cursor+ahead)
	if old := min(end, s.recycled); old > cursor && !(populate && s.opts.Mode != WritePwrite) {
		// An append that ends inside a page of the old file makes the
		// kernel read the rest of that page first, on the writer's
		// clock: start reading ahead now (populating, below, reads too).
		_ = s.m.WillNeed(int(cursor), int(old-cursor))
	}
	if populate && s.opts.Mode != WritePwrite && end > cursor {
		if err := s.m.PopulateWrite(int(cursor), int(end-cursor)); err != nil && !errors.Is(err, mmap.ErrPopulateUnsupported) {
			return fmt.Errorf("cannot prefault segment %d: %w", s.base, errors.Join(ErrIO, err))
		}
	}
	return nil
}

// prepareZeroFill is Prepare under ReserveZeroFill: it zero-fills from
// the reserved mark to cursor+ahead (rounded to pages, within the mapped
// capacity) piece by piece with resMu released, so the writer keeps
// appending below the mark meanwhile, and raises the mark after each
// piece.
//
// The range past reserved is the filler's alone: the writer stores only
// below reserved, and a writer that needs more while filling is set waits
// in reserve for the next piece (resMu and fillDone order the piece's
// writes before its own). Readers see only published bytes, below the
// writer's size.
func (s *Segment) prepareZeroFill(cursor, ahead int64) error {
	s.resMu.Lock()
	have := s.reserved.Load()
	page := int64(mmap.PageSize())
	target := min((cursor+ahead+page-1)/page*page, int64(len(s.data)))
	if target <= have || s.filling {
		s.resMu.Unlock()
		return nil
	}
	zf, err := fillFile(s.log)
	if err != nil {
		s.resMu.Unlock()
		return fmt.Errorf("cannot zero-fill segment %d: %w", s.base, ioErr(err))
	}
	defer zf.Close()
	s.filling = true
	s.resMu.Unlock()

	for have < target && err == nil {
		end := min(have+zeroPiece, target)
		err = zeroFill(zf, have, end-have)
		s.resMu.Lock()
		if err == nil {
			if s.reserved.Load() != have {
				panic("BUG: segment: reserved mark moved during a zero fill")
			}
			s.reserved.Store(end)
			have = end
		}
		if end >= target || err != nil {
			s.filling = false
		}
		if s.fillDone.L != nil {
			s.fillDone.Broadcast()
		}
		s.resMu.Unlock()
	}
	if err != nil {
		// The writer reserves with fallocate when it gets there, which
		// reports a full disk as ErrNoSpace on its own append.
		return fmt.Errorf("cannot zero-fill segment %d: %w", s.base, ioErr(err))
	}
	return nil
}

// Read returns the bytes [pos, end) of the segment, clamped to what is
// published. The slice aliases the mapping: it is valid while the caller
// holds a reference that keeps the segment from being closed.
func (s *Segment) Read(pos, end int64) []byte {
	pub := s.published.Load()
	end = min(end, pub)
	if pos >= end {
		return nil
	}
	return s.data[pos:end:end]
}

// Lookup returns the position of the first batch whose last offset is >=
// offset, searching only the published bytes, and false if there is none.
func (s *Segment) Lookup(offset int64) (int64, bool) {
	_, pos := s.offsets.Lookup(offset)
	pub := s.published.Load()
	for pos < pub {
		b := batch.Batch(s.data[pos:pub])
		n, err := batch.Size(b)
		if err != nil {
			return 0, false
		}
		if b.LastOffset() >= offset {
			return pos, true
		}
		pos += int64(n)
	}
	return 0, false
}

// LookupTime returns the position of the first batch with a timestamp >= ts
// (by max timestamp), and false if there is none.
func (s *Segment) LookupTime(ts int64) (int64, bool) {
	start := s.times.Lookup(ts)
	pos, ok := s.Lookup(start)
	if !ok {
		return 0, false
	}
	pub := s.published.Load()
	for pos < pub {
		b := batch.Batch(s.data[pos:pub])
		n, err := batch.Size(b)
		if err != nil {
			return 0, false
		}
		if b.MaxTimestamp() >= ts {
			return pos, true
		}
		pos += int64(n)
	}
	return 0, false
}

// AppendAborted records an aborted transaction whose ABORT marker is in
// this segment (writer only).
func (s *Segment) AppendAborted(e txnindex.Entry) error {
	if err := s.txns.Append(e); err != nil {
		return fmt.Errorf("cannot index aborted transaction in segment %d: %w", s.base, err)
	}
	return nil
}

// LastAborted returns the marker offset of the newest aborted transaction
// indexed in the segment, or -1.
func (s *Segment) LastAborted() int64 {
	if es := s.txns.Entries(); len(es) > 0 {
		return es[len(es)-1].LastOffset
	}
	return -1
}

// AbortedTxns returns the segment's aborted-transaction index, for
// read_committed reads (txnindex.AbortedFor).
func (s *Segment) AbortedTxns() *txnindex.Index { return s.txns }

// Sync makes everything written durable (fdatasync covers pages dirtied
// through the mapping as well as by pwrite) and syncs the indexes.
func (s *Segment) Sync() error {
	f, err := s.logFile() // openSealed let it go
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("cannot sync segment %d: %w", s.base, ioErr(err))
	}
	return s.SyncIndexes()
}

// SyncData syncs the .log only: what the always policy waits for. The
// indexes are rebuilt from the log after a crash, so they need no sync on
// the acknowledgement path.
func (s *Segment) SyncData() error {
	if err := fdatasync(s.fd); err != nil {
		return fmt.Errorf("cannot sync segment %d: %w", s.base, ioErr(err))
	}
	return nil
}

// SyncIndexes syncs both indexes.
func (s *Segment) SyncIndexes() error {
	if err := s.offsets.Sync(); err != nil {
		return fmt.Errorf("cannot sync offset index: %w", err)
	}
	if err := s.times.Sync(); err != nil {
		return fmt.Errorf("cannot sync time index: %w", err)
	}
	if err := s.txns.Sync(); err != nil {
		return fmt.Errorf("cannot sync transaction index: %w", err)
	}
	return nil
}

// Seal ends writing: the final time-index entry, indexes and .log trimmed
// to their real sizes and synced. Readers keep reading.
func (s *Segment) Seal() error {
	if s.sealed {
		return nil
	}
	if err := s.FlushStage(); err != nil {
		return err
	}
	s.staging, s.stage = false, nil
	if s.maxTimestamp >= 0 {
		if err := s.times.AppendFinal(s.maxTimestamp, s.maxTimestampOff); err != nil {
			return fmt.Errorf("cannot finish time index: %w", err)
		}
	}
	if err := s.offsets.Trim(); err != nil {
		return fmt.Errorf("cannot trim offset index: %w", err)
	}
	if err := s.times.Trim(); err != nil {
		return fmt.Errorf("cannot trim time index: %w", err)
	}
	if err := s.log.Truncate(s.size); err != nil {
		return fmt.Errorf("cannot trim segment %d: %w", s.base, ioErr(err))
	}
	s.reserved.Store(s.size)
	if err := s.Sync(); err != nil {
		return err
	}
	s.sealed = true
	return nil
}

// Sealed reports whether the segment takes no more appends.
func (s *Segment) Sealed() bool { return s.sealed }

// Close releases the mapping and files. The caller guarantees no reader
// still uses a slice from Read.
func (s *Segment) Close() error { return s.closeFiles() }

func (s *Segment) closeFiles() error {
	var errs []error
	if s.m != nil {
		errs = append(errs, s.m.Unmap())
		s.m, s.data = nil, nil
	}
	if s.offsets != nil {
		errs = append(errs, s.offsets.Close())
	}
	if s.times != nil {
		errs = append(errs, s.times.Close())
	}
	if s.txns != nil {
		errs = append(errs, s.txns.Close())
	}
	if s.log != nil {
		errs = append(errs, s.log.Close())
	}
	return errors.Join(errs...)
}

// Delete closes the segment and removes its files.
func (s *Segment) Delete() error {
	err := s.closeFiles()
	// A segment's producer snapshot (same base offset) goes with it, as in
	// Kafka: a newer snapshot always exists at the active segment's base.
	for _, suffix := range []string{".log", ".index", ".timeindex", ".txnindex", ".snapshot"} {
		if e := os.Remove(s.path(suffix)); e != nil && !errors.Is(e, fs.ErrNotExist) {
			err = errors.Join(err, e)
		}
	}
	return err
}

// logFile returns the .log's descriptor, opening the file again if
// openSealed let it go. Writer only (the segment's owner, never
// concurrently with a syncer: a sealed segment has none).
func (s *Segment) logFile() (*os.File, error) {
	if s.log != nil {
		return s.log, nil
	}
	f, err := os.OpenFile(s.path(".log"), os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot open segment %d: %w", s.base, ioErr(err))
	}
	s.log, s.fd = f, int(f.Fd())
	return f, nil
}

// IOError wraps err from a file operation as ErrNoSpace (a full disk) or
// ErrIO, for callers outside the package that write beside segments.
func IOError(err error) error { return ioErr(err) }

func ioErr(err error) error {
	if errors.Is(err, errNoSpace) {
		return errors.Join(ErrNoSpace, err)
	}
	return errors.Join(ErrIO, err)
}
