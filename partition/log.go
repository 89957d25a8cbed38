package partition

import (
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/internal/fsutil"
	"github.com/idemlog/idemlog/segment"
	"github.com/idemlog/idemlog/txnindex"
)

// Sentinel errors.
var (
	// ErrOffsetOutOfRange: a read below the log start offset or above the
	// high watermark.
	ErrOffsetOutOfRange = errcode.New(errcode.OffsetOutOfRange, "offset out of range")
	// ErrTooLarge: a batch that could never fit in a segment.
	ErrTooLarge = errcode.New(errcode.RecordListTooLarge, "batch larger than a segment")
	// ErrClosed: the log was closed.
	ErrClosed = errcode.New(errcode.UnknownServerError, "log closed")
	// ErrFailed: an earlier sync failed. After a failed fsync the kernel may
	// have dropped the dirty pages, so nothing written since can be trusted
	// to reach the disk by retrying; the log refuses appends until it is
	// reopened and recovered.
	ErrFailed = errcode.New(errcode.KafkaStorageError, "log failed")
	// ErrInvalidSyncPolicy: an interval policy without a positive interval
	// or a bytes policy without a positive byte count.
	ErrInvalidSyncPolicy = errcode.New(errcode.InvalidRequest, "invalid fsync policy")
)

// Options configure a partition log. Zero fields take Kafka's defaults.
type Options struct {
	Segment segment.Options
	// MaxBatchSize is max.message.bytes.
	MaxBatchSize int
	// Sync is the log's own fsync policy: the least it syncs, whatever
	// Flush and SetFlush add.
	Sync SyncPolicy
	// Flush adds sync points to Sync (a topic's flush.messages and
	// flush.ms); SetFlush changes it while the log is open.
	Flush FlushPolicy
	// DurableVisibility, with Sync SyncAlways, lets readers see only
	// durable bytes: the high watermark moves after the sync, not after
	// the write. (Not with a Flush that syncs every append: a flush
	// policy may be changed while the log is open, and readers must not
	// find the high watermark switching between the two rules.)
	DurableVisibility bool
	// noVisibilitySyncer, for tests that drive syncs by hand, starts no
	// visibility syncer (runVisibilitySyncer) under DurableVisibility.
	noVisibilitySyncer bool
	// RollAge is segment.ms: a segment whose first append is older than this
	// (by batch timestamps) is rolled before the next append. 0: 7 days.
	RollAge time.Duration
	// RetentionAge is retention.ms (0: 7 days, < 0: off); RetentionBytes is
	// retention.bytes (<= 0: off).
	RetentionAge   time.Duration
	RetentionBytes int64
	// NoRecycle turns off segment recycling: where segments are
	// zero-filled (SyncAlways on Linux), retention otherwise hands each
	// deleted segment's file to the next roll (segment.Recycle).
	NoRecycle bool
	// Now is the clock, for tests; nil means time.Now.
	Now func() time.Time
	// Logger receives what Open's recovery does: each file it deletes,
	// truncates or rebuilds, why, and what was lost (WARN when data is
	// lost or a damaged file is set aside, INFO for a rebuild that loses
	// nothing). nil means slog.Default(), so that a program that set up no
	// logging still hears of data a damaged file cost;
	// slog.New(slog.DiscardHandler) silences it.
	Logger *slog.Logger
	// Lazy leaves a log that was closed cleanly dormant at Open: its
	// segments are opened on first use, so that an untouched partition
	// holds no descriptor, mapping or goroutine (see dormant.go).
	Lazy bool
	// Snapshot, if set, returns the producer-state snapshot image as of
	// offset; it is called under the writer lock at every roll (offset = the
	// new segment's base) and at Close (offset = the log end). The log
	// writes the file: at a roll itself, under the writer lock, before the
	// new segment is created, unsynced (the old segment's seal syncs it;
	// synced at once when the roll is at the log start); at Close
	// synchronously, before the clean-shutdown marker. WriteSnapshot writes
	// the ones a rebuild of producer state makes.
	Snapshot func(offset int64) []byte

	// private holds the knobs only this package's tests set (knobs.go).
	private logKnobs
}

func (o Options) withDefaults() Options {
	if o.MaxBatchSize <= 0 {
		o.MaxBatchSize = batch.DefaultMaxBatchSize
	}
	if o.RollAge == 0 {
		o.RollAge = 7 * 24 * time.Hour
	}
	if o.RetentionAge == 0 {
		o.RetentionAge = 7 * 24 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Segment.Mode == segment.WriteDefault {
		// Measured on the 2-core target machine (docs/PERFORMANCE.md). With
		// a sync per append, mapped pages are write-protected again by every
		// writeback and fault on the next store: pwritev is about 2.2x
		// faster. Without syncs, a small batch costs a memcpy through the
		// mapping against a syscall (225 ns against 2 us for 100 bytes), and
		// a large one is cheaper with pwritev, whose page-cache allocation
		// beats faulting (2.1-2.9 against 0.5-1.4 GB/s for 64 KiB).
		o.Segment.Mode = segment.WriteMixed
		if o.Sync.Kind == SyncAlways || o.Flush.Messages == 1 {
			o.Segment.Mode = segment.WritePwrite
		}
	}
	if o.Segment.Reserve == segment.ReserveDefault {
		// With a sync per append, each fdatasync after an append into
		// fallocated (unwritten) blocks also commits their conversion to
		// the journal; into zero-filled blocks it flushes data only
		// (segment.ReserveZeroFill). Without, the zeros would only double
		// the bytes written.
		o.Segment.Reserve = segment.ReserveFallocate
		if (o.Sync.Kind == SyncAlways || o.Flush.Messages == 1) && segment.ZeroFillSupported {
			o.Segment.Reserve = segment.ReserveZeroFill
		}
	}
	return o
}

// Log is one partition: an ordered list of segments with one writer at a
// time and any number of lock-free readers.
type Log struct {
	dir  string
	opts Options

	// mu serializes everything that changes the log: appends, rolls,
	// retention, close. Readers never take it.
	mu       sync.Mutex
	active   *segRef
	leo      int64 // next offset to assign
	unsynced int64 // bytes appended since the last bytes-triggered wait (SyncBytes)
	// plan is the sync triggers in force (Options.Sync and the flush
	// policy): loaded by the append path under mu and by the lock-free
	// syncer and MustWait; stored under mu (SetFlush).
	plan atomic.Pointer[syncPlan]
	// flusherOn: the flusher goroutine runs (under mu); flushKick tells
	// it the plan's interval changed.
	flusherOn bool
	flushKick chan struct{}
	// rollBytes, if above 0, is a segment.bytes set while the log is open
	// (SetLimits): a segment rolls once an append would take it past it,
	// whatever size the segment was made with.
	rollBytes int64
	closed    bool
	// stagers counts group syncs in flight under SyncAlways (sync.go):
	// while it is above zero, appends are staged in the active segment
	// (segment.SetStaging) and published only when a sync's end writes
	// them into the file.
	stagers int
	// unsealed are rolled segments the maintainer has not yet sealed; a
	// group sync syncs them too. dirDirty: a segment file was created or
	// renamed since the directory was last synced.
	unsealed   []*segRef
	unsealedMu sync.Mutex // guards unsealed; taken after mu, or alone
	dirDirty   atomic.Bool
	// prefaulted is how far the active segment was handed to the
	// maintainer for prefaulting, prefaultRun the length of that last run.
	prefaulted, prefaultRun int64
	// appended counts bytes appended; atPrefault and syncsAtPrefault are
	// it and the sync count at the last prefault request (zeroFillPays).
	appended, atPrefault, syncsAtPrefault int64

	// segs is the immutable list of live segments, replaced (never edited)
	// under mu; readers load it without a lock.
	segs atomic.Pointer[[]*segRef]
	hw   atomic.Int64 // high watermark: readers see offsets below it
	// written is the end offset of everything copied into segments, and
	// activeRef the active segment, for the syncer (see syncOnce).
	written   atomic.Int64
	activeRef atomic.Pointer[segRef]
	logStart  atomic.Int64
	failed    atomic.Bool
	failErr   atomic.Pointer[error]
	maint     maintainer
	// shut mirrors closed for the lock-free readers (Read, Advanced);
	// Close and Kill set both under mu.
	shut atomic.Bool
	// ckWriters counts checkpoint writes outside mu (retentions between
	// detaching segments and handing them on, Flush), added to under mu
	// while not closed; Close and Kill wait for them, so that nothing
	// writes a checkpoint once they return.
	ckWriters sync.WaitGroup
	// advanced is the channel Advanced hands out, closed and cleared at
	// the next rise of hw (see Advanced); nil while nobody waits.
	advanced atomic.Pointer[chan struct{}]

	sync groupSync

	// recycle takes retired segment files for reuse; nil when the log
	// does not recycle (see Options.NoRecycle).
	recycle *recyclePool

	// recoveryPoint: offsets below it are durable. Written after each sync,
	// checkpointed to disk by flushes and Close.
	recoveryPoint atomic.Int64

	ckMu sync.Mutex // serializes checkpoint file writes
	// ckDurable holds the recovery point and log start that the
	// checkpoint files last received, each followed by a sync of the
	// directory (-1: none yet); under ckMu. A file whose value has not
	// moved is not written again: a roll moves the recovery point, rarely
	// the log start, and each file costs a write, an fsync and a rename.
	ckDurable [2]int64

	recoveredFrom int64 // set by Open; see RecoveredFrom

	stop    chan struct{}
	flusher sync.WaitGroup // the interval flusher, the visibility syncer
	// visKick wakes the visibility syncer (durableOnly logs only): an
	// append was committed that only a sync makes visible.
	visKick chan struct{}

	// activeCreated is when the active segment became active (ms, by
	// Options.Now; under mu): its age for segment.ms when its first batch
	// carried no timestamp.
	activeCreated int64
	bg            sync.WaitGroup // the maintainer

	// dormant is set while the segments are unopened (Options.Lazy); it
	// goes false once, under mu (awaken). dormantState and dormantBases
	// are what Open read instead (the marker, the segment list).
	dormant      atomic.Bool
	dormantState cleanShutdownState
	dormantBases []int64
	// cleaner is the compaction state (compact.go).
	cleaner cleanerState

	// fresh: opened dormant from a directory without segment, snapshot
	// or marker (Fresh); set at open, then fixed.
	fresh bool
	// started: openFiles ran to its end (background work runs);
	// markerGone: it removed the clean-shutdown marker. Under mu after
	// Open.
	started, markerGone bool
}

// AppendResult is where an appended batch landed.
type AppendResult struct {
	BaseOffset int64
	LastOffset int64
}

// Dir returns the partition directory.
func (l *Log) Dir() string { return l.dir }

// HighWatermark returns the offset below which readers see the log.
func (l *Log) HighWatermark() int64 { return l.hw.Load() }

// LogStartOffset returns the first offset still in the log.
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }

// LogEndOffset returns the next offset to assign.
func (l *Log) LogEndOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leo
}

// RecoveryPoint returns the offset below which the log is known durable.
func (l *Log) RecoveryPoint() int64 { return l.recoveryPoint.Load() }

// Append validates b (framing, CRC, size; the producer rules are the
// caller's), assigns it the next offsets, copies it into the active segment
// and returns once the sync policy's promise holds. b is not modified. On
// error nothing was written.
func (l *Log) Append(b []byte) (AppendResult, error) {
	v, err := batch.Validate(b, l.opts.MaxBatchSize)
	if err != nil {
		return AppendResult{}, fmt.Errorf("cannot append: %w", err)
	}
	res, wait, err := l.AppendBatch(v, nil)
	if err != nil || !wait {
		return res, err
	}
	if err := l.waitDurable(res.LastOffset + 1); err != nil {
		return AppendResult{}, err
	}
	return res, nil
}

// AppendBatch writes v, which the caller validated, and returns without
// waiting for a sync: when wait is true the append is acknowledged only
// after WaitDurable(res.LastOffset+1). applied, if not nil, runs under the
// writer lock right after the write, with the assigned base offset: the
// producer-state update goes there, so that state and log always agree
// when a snapshot is taken (snapshots are taken under the same lock).
//
// The batch becomes visible (the high watermark moves past it, here or,
// under DurableVisibility, in the syncer) only after applied returns:
// whatever applied publishes (the engine's first unstable offset, which
// with the high watermark makes the last stable offset) is in place
// before any reader can see the batch, so a reader that loads the high
// watermark and then that state never sees one without the other, and a
// wakeup from Advanced covers both.
func (l *Log) AppendBatch(v batch.Batch, applied func(base int64)) (res AppendResult, wait bool, err error) {
	l.mu.Lock()
	if l.dormant.Load() {
		if err := l.awakenLocked(); err != nil {
			l.mu.Unlock()
			return res, false, fmt.Errorf("cannot append: %w", err)
		}
	}
	res, err = l.writeLocked(v)
	if err != nil {
		l.mu.Unlock()
		return res, false, err
	}
	if applied != nil {
		applied(res.BaseOffset)
	}
	wait, raised := l.commitLocked(int64(len(v)))
	l.mu.Unlock()
	if raised {
		// Outside the lock: closing a channel readies every goroutine
		// parked on it.
		l.wake()
	}
	return res, wait, nil
}

// WaitDurable returns once offsets below end are durable, joining (or
// leading) a group sync.
func (l *Log) WaitDurable(end int64) error { return l.waitDurable(end) }

// MustWait reports whether an acknowledgement of data ending at end has to
// wait for WaitDurable under the log's policy: always for SyncAlways, or a
// flush policy that syncs every append (a duplicate's original may not be
// synced yet either).
func (l *Log) MustWait() bool { return l.plan.Load().always }

// writeLocked writes v into the active segment under mu; nothing of it is
// visible to readers or to the syncer until commitLocked.
func (l *Log) writeLocked(v batch.Batch) (res AppendResult, err error) {
	if l.closed {
		return res, ErrClosed
	}
	if l.failed.Load() {
		return res, fmt.Errorf("cannot append: %w: %w", ErrFailed, *l.failErr.Load())
	}
	if int64(len(v)) > l.segmentMaxBytes() {
		return res, fmt.Errorf("cannot append %d bytes: %w", len(v), ErrTooLarge)
	}
	base := l.leo
	last := base + int64(v.LastOffsetDelta())
	if err := l.maybeRoll(v, base, last); err != nil {
		return res, err
	}
	seg := l.active
	if seg.Staged() >= stageFlushBytes {
		// Write the stage while the sync runs, so that little is left
		// for its end (stageFlushBytes); and a slow sync cannot let it
		// grow without end.
		if err := seg.FlushStage(); err != nil {
			l.fail(err)
			return res, fmt.Errorf("cannot append at offset %d: %w: %w", base, ErrFailed, err)
		}
	}
	if _, err := seg.Append(v, base); err != nil {
		return res, fmt.Errorf("cannot append at offset %d: %w", base, err)
	}
	l.leo = last + 1
	l.appended += int64(len(v))
	if size := seg.Size(); size >= l.prefaulted-l.prefaultRun/2 {
		// Half the prefaulted run is used: ask for the next one.
		zero := l.zeroFillPays()
		// A log gets at most as many bytes ahead as it has appended
		// since it opened: zeros double the bytes written, and blocks
		// reserved for a partition that then idles are disk it holds
		// for nothing (an 8 MiB reservation made by one small append
		// cost each of thousands of partitions 8 MiB, and its seal an
		// ftruncate freeing them: 2.9 ms of CPU per partition at Close).
		run, zeroRun := min(l.prefaultAhead(), max(minZeroRun, l.appended)), int64(0)
		if zero {
			zeroRun = run
		}
		l.prefaultRun, l.prefaulted = run, size+run
		l.maint.zeroRun.Store(zeroRun)
		if seg.acquire() {
			l.submit(task{kind: taskPrefault, seg: seg, cursor: size, ahead: run, populate: seg.ThroughMapping(int64(len(v))), zero: zero})
		}
	}
	return AppendResult{BaseOffset: base, LastOffset: last}, nil
}

// commitLocked hands what writeLocked wrote (n bytes) to the syncer and,
// unless readers must wait for durability, to readers (under mu). wait:
// the caller must wait for a sync before acknowledging; raised: the high
// watermark moved, so the caller must wake Advanced's waiters once it has
// let go of mu.
func (l *Log) commitLocked(n int64) (wait, raised bool) {
	// The syncer publishes up to written under DurableVisibility: stored
	// here, after the append callback, not in writeLocked.
	l.written.Store(l.leo)
	seg := l.active
	// A staged batch is not in the file yet: the sync that ends its
	// staging publishes it (endStaging).
	if !l.durableOnly() && l.stagers == 0 {
		raised = l.publish(seg)
	}
	plan := l.plan.Load()
	if plan.always {
		if l.visKick != nil {
			// Only a sync makes the batch visible, and its appender need
			// not wait for one (a Kafka acks=0 produce): the visibility
			// syncer sees that one runs. Kicks coalesce; most find the
			// batch's own appender already waiting. (Without this: such a
			// batch stayed invisible until something else synced.)
			select {
			case l.visKick <- struct{}{}:
			default:
			}
		}
		return true, raised
	}
	if l.stagers > 0 {
		// Staged by a group sync that started while every append waited
		// for one (a flush policy changed since): the batch is in this
		// process's memory only, not yet in the page cache that an
		// unsynced acknowledgement promises, until that sync ends. The
		// next sync covers it.
		return true, raised
	}
	if plan.bytes > 0 {
		l.unsynced += n
		if l.unsynced >= plan.bytes {
			l.unsynced = 0
			wait = true
		}
	}
	if plan.messages > 0 && l.leo-l.recoveryPoint.Load() >= plan.messages {
		// Kafka's rule (UnifiedLog.append): unflushed messages, the log
		// end minus the recovery point, reached flush.messages. Every
		// append while a sync is due waits, so no more than messages-1
		// acknowledged offsets are ever unsynced.
		wait = true
	}
	return wait, raised
}

// publish makes everything written visible to readers (under mu) and
// reports whether the high watermark moved.
func (l *Log) publish(seg *segRef) bool {
	seg.Publish(seg.Size())
	return storeMax(&l.hw, l.leo)
}

// Advanced returns a channel that is closed the next time the high
// watermark rises, or when the log is closed (or killed): a Kafka Fetch
// long-poll parks on it. The use is
//
//	for {
//		ch := l.Advanced()
//		if l.HighWatermark() >= want { break } // or whatever depends on it
//		select { case <-ch: case <-timeout: ... }
//	}
//
// taking the channel before reading the state it guards; then no rise is
// missed. Every waiter shares one channel until the next rise, so a waiter
// costs nothing on the append path, which pays one atomic load while
// nobody waits. A channel may be closed by a rise whose high-watermark
// store came just before it was taken (the store and the wakeup are two
// steps), never by one that was over when it was taken; after a close it
// is closed at once.
//
// Why no rise is missed (all Go atomics are sequentially consistent): an
// advancer stores the high watermark, then loads advanced; a waiter puts
// (or finds) its channel c in advanced, then loads the high watermark.
// If the waiter's load of the high watermark comes before the advancer's
// store, then the waiter's install or find of c came before the
// advancer's load of advanced, which therefore sees c, or sees that c was
// swapped out in between; either way whoever swapped c out closes it.
// Otherwise the waiter's load comes after the store and sees the new
// value. The same argument covers shut against Close and Kill.
//
// The engine's last stable offset needs no signal of its own: it moves
// only when a transaction marker (or a transaction's first batch) is
// appended, and AppendBatch publishes the new first unstable offset, in
// its callback, before it raises the high watermark past that batch (see
// AppendBatch), so the rise that wakes the waiter is later than the
// change it must see.
func (l *Log) Advanced() <-chan struct{} {
	for {
		p := l.advanced.Load()
		if p == nil {
			ch := make(chan struct{})
			if !l.advanced.CompareAndSwap(nil, &ch) {
				continue
			}
			p = &ch
		}
		if l.shut.Load() {
			l.wake()
		}
		return *p
	}
}

// wake closes the channel Advanced handed out, if any: every caller that
// raised the high watermark (or closed the log) calls it after the store.
// The load first keeps the common case, no waiter, to a plain read.
func (l *Log) wake() {
	if l.advanced.Load() == nil {
		return
	}
	if p := l.advanced.Swap(nil); p != nil {
		close(*p)
	}
}

// raiseHW raises the high watermark to v and wakes the waiters if it moved
// (for the syncer and Close; the append path wakes after letting go of mu).
func (l *Log) raiseHW(v int64) {
	if storeMax(&l.hw, v) {
		l.wake()
	}
}

func (l *Log) segmentMaxBytes() int64 {
	if l.opts.Segment.MaxBytes > 0 {
		return l.opts.Segment.MaxBytes
	}
	return segment.DefaultMaxBytes
}

// maybeRoll starts a new segment at base when the batch does not fit the
// active one, the active one is too old, or an index is full (Kafka's roll
// conditions, checked before each append).
func (l *Log) maybeRoll(v batch.Batch, base, last int64) error {
	seg := l.active
	if seg.Size() == 0 {
		return nil
	}
	// Kafka's timeWaitedForRoll: from the first batch's timestamp to this
	// one's, or, when the first batch had none, from the segment's
	// creation to now. (Without this: such a segment never rolled by age.)
	waited := v.MaxTimestamp() - seg.FirstTimestamp()
	if seg.FirstTimestamp() < 0 {
		waited = l.opts.Now().UnixMilli() - l.activeCreated
	}
	old := waited > l.opts.RollAge.Milliseconds()
	full := l.rollBytes > 0 && seg.Size()+int64(len(v)) > l.rollBytes
	if !old && !full && seg.Fits(len(v), last) {
		return nil
	}
	return l.roll(base)
}

// roll makes a new active segment at base (under mu): the spare the
// maintainer prepared if there is one, a new file otherwise. The old
// segment is handed to the maintainer to be sealed off the append path. The
// new segment is in place before anything changes, so a failure (a full
// disk) leaves the log as it was.
func (l *Log) roll(base int64) error {
	// What is staged belongs to the old segment, which is about to leave
	// the writer for the maintainer's seal.
	if err := l.active.FlushStage(); err != nil {
		l.fail(err)
		return fmt.Errorf("cannot roll to offset %d: %w: %w", base, ErrFailed, err)
	}
	// The producer snapshot at the new base is written first, under mu,
	// unsynced (the seal syncs it), as Kafka's roll does: from the moment
	// the roll returns, a process crash must find it. A snapshot left to
	// the maintainer was lost by a crash before the seal, and a log start
	// moved meanwhile (a purge, retention) then left no snapshot at or
	// above the first segment: every producer seen only below it was
	// forgotten, and its retries written twice. A failure
	// here leaves the log as it was.
	if l.opts.Snapshot != nil {
		// A roll at or below the log start (after a purge) makes every
		// older segment deletable at the next open: its snapshot is then
		// the only record of their producers, so it is synced now.
		first := base <= l.logStart.Load()
		err := writeSnapshot(l.dir, base, l.opts.Snapshot(base), first)
		if err == nil && first {
			err = fsutil.SyncDir(l.dir)
		}
		if err != nil {
			return fmt.Errorf("cannot roll to offset %d: %w", base, segment.IOError(err))
		}
	}
	var next *segment.Segment
	var err error
	if sp := l.maint.spare.Swap(nil); sp != nil {
		next, err = sp.Activate(base)
		if err == nil && next.Recycled() > 0 {
			l.recycle.reused.Add(1)
		}
	} else {
		next, err = segment.Create(l.dir, base, l.opts.Segment)
	}
	if err != nil {
		return fmt.Errorf("cannot roll to offset %d: %w", base, err)
	}
	l.activeCreated = l.opts.Now().UnixMilli()
	old := l.active
	old.SetStaging(false)
	next.SetStaging(l.stagers > 0)
	// Everything in the old segment is written; readers may see all of it
	// unless they must wait for durability, which the seal (or a group
	// sync, which also syncs unsealed segments) provides.
	if !l.durableOnly() {
		old.Publish(old.Size())
	}
	old.acquire() // the maintainer's reference, released after sealing
	l.unsealedMu.Lock()
	l.unsealed = append(l.unsealed, old)
	l.unsealedMu.Unlock()
	l.dirDirty.Store(true)
	l.prefaulted = 0
	l.active = l.ref(next)
	l.activeRef.Store(l.active)
	segs := append(append([]*segRef(nil), *l.segs.Load()...), l.active)
	l.segs.Store(&segs)
	l.submit(task{kind: taskSeal, seg: old, end: base})
	if l.maint.spareWanted.CompareAndSwap(false, true) {
		l.submit(task{kind: taskSpare})
	}
	return nil
}

// zeroFillMaxBytesPerSync is the most bytes per sync, on average since
// the previous prefault request, at which the next run of the segment is
// zero-filled rather than fallocated (segment.ReserveZeroFill). Measured
// under fsync always, old and new binaries interleaved: one producer
// syncing every 11 KB batch (idemlog bench --producers 1 --record-size
// 100 --batch 100) ran at 700-838k records/s on zero-filled blocks
// against 360-464k (p50 95-124 against 205-254 us per batch). But 64
// producers on 4 partitions, 16 KiB batches, whose syncs carry 90-120 KB
// each, ran at 488-573k against 583-612k with zero fills, p99 4.8-5.6
// against 3.6-3.8 ms: the zeros double the bytes the device writes,
// which pays only while each sync is small and the journal commit that
// written blocks save dominates it.
const zeroFillMaxBytesPerSync = 64 << 10

// minZeroRun is the shortest run zero-filled ahead of a log's writer.
const minZeroRun = 512 << 10

// zeroFillPays decides, at a prefault request (writer, under mu), whether
// the next run is zero-filled: under SyncAlways, when the syncs since the
// last request averaged at most zeroFillMaxBytesPerSync, or, with no sync
// finished since, when no more than that was appended (a fresh log: a
// sync per small append is the case to serve from the start).
func (l *Log) zeroFillPays() bool {
	if l.opts.Segment.Reserve != segment.ReserveZeroFill {
		return false
	}
	now := l.sync.syncs.Load()
	bytes, syncs := l.appended-l.atPrefault, now-l.syncsAtPrefault
	l.atPrefault, l.syncsAtPrefault = l.appended, now
	if syncs == 0 {
		// No sync finished since: the appends since either are all
		// waiting for one sync (no more than the threshold in all, a
		// fresh log's first appends) or are not small.
		return bytes <= zeroFillMaxBytesPerSync
	}
	return bytes/syncs <= zeroFillMaxBytesPerSync
}

// durableOnly reports whether readers may see only durable bytes.
func (l *Log) durableOnly() bool {
	return l.opts.DurableVisibility && l.opts.Sync.Kind == SyncAlways
}

// fail marks the log failed after an I/O error that may have lost
// acknowledged-but-unsynced data (see ErrFailed).
func (l *Log) fail(err error) {
	if l.failed.CompareAndSwap(false, true) {
		l.failErr.Store(&err)
	}
}

// Chunk is the result of a read: whole batches that alias a segment's
// mapping. Release it when done; its bytes must not be used afterwards.
type Chunk struct {
	Data []byte
	// NextOffset is the offset after the last batch in Data.
	NextOffset int64
	// HighWatermark at the time of the read.
	HighWatermark int64
	ref           *segRef
}

// Release lets the segment go; idempotent.
func (c *Chunk) Release() {
	if c.ref != nil {
		c.ref.release()
		c.ref = nil
	}
	c.Data = nil
}

// Read returns whole batches starting with the one that holds offset, from
// below the high watermark, adding batches while the total stays within
// maxBytes but always at least one. An offset equal to the high watermark
// gives an empty chunk. Batches never span segments, so a chunk holds one
// segment's bytes; read again from NextOffset for more.
func (l *Log) Read(offset int64, maxBytes int) (Chunk, error) {
	return l.ReadBelow(offset, maxBytes, math.MaxInt64)
}

// ReadBelow is Read with an upper bound besides the high watermark: only
// batches starting below limit are returned (read_committed reads below
// the last stable offset). An offset between limit and the high watermark
// gives an empty chunk, not an error. Once the log is closed (or killed),
// reads fail with ErrClosed; chunks read before stay valid until released.
func (l *Log) ReadBelow(offset int64, maxBytes int, limit int64) (Chunk, error) {
	return l.read(offset, maxBytes, limit, false)
}

// ReadRetained is Read from any offset still in a segment, also below the
// log start: after a crash, producer state replays the batches between its
// newest snapshot and a log start that moved past it (DeleteRecordsBefore
// to an offset inside a segment), and those are still on disk. Not for
// consumers.
func (l *Log) ReadRetained(offset int64, maxBytes int) (Chunk, error) {
	return l.read(offset, maxBytes, math.MaxInt64, true)
}

// FirstRetainedOffset is the base offset of the first segment: the lowest
// offset ReadRetained can read (the log start, or below it within the
// segment that holds it).
func (l *Log) FirstRetainedOffset() int64 {
	if l.dormant.Load() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.dormant.Load() {
			if len(l.dormantBases) > 0 {
				return l.dormantBases[0]
			}
			return l.logStart.Load()
		}
	}
	segs := *l.segs.Load()
	if len(segs) == 0 {
		return l.logStart.Load()
	}
	return segs[0].Base()
}

// read serves Read, ReadBelow and ReadRetained (retained: from the first
// segment's base rather than the log start). The lowest readable offset is
// loaded again on every round: retention or DeleteRecordsBefore may move it
// and detach segments between the check and the segment search, and an
// offset then below every segment is out of range, not a reason to serve
// the next segment's batches. (Without this: a read racing
// DeleteRecordsBefore skipped to later offsets without an error.)
func (l *Log) read(offset int64, maxBytes int, limit int64, retained bool) (Chunk, error) {
	for {
		if l.shut.Load() {
			// Close emptied the segment list; say so rather than report
			// the offset missing.
			return Chunk{}, ErrClosed
		}
		start := l.logStart.Load()
		if retained {
			start = l.FirstRetainedOffset()
		}
		hw := l.hw.Load()
		if offset < start || offset > hw {
			return Chunk{}, fmt.Errorf("cannot read offset %d (log %d..%d): %w", offset, l.logStart.Load(), hw, ErrOffsetOutOfRange)
		}
		realHW := hw
		hw = min(hw, limit)
		if offset >= hw {
			return Chunk{NextOffset: offset, HighWatermark: realHW}, nil
		}
		if l.dormant.Load() {
			if err := l.awaken(); err != nil {
				return Chunk{}, fmt.Errorf("cannot read offset %d: %w", offset, err)
			}
		}
		if h := l.opts.private.readRaceHook; h != nil {
			h()
		}
		segs := *l.segs.Load()
		i := sort.Search(len(segs), func(i int) bool { return segs[i].Base() > offset }) - 1
		if i < 0 {
			// Below every segment: the start moved past the offset since
			// it was loaded; the next round says so.
			continue
		}
		for ; i < len(segs); i++ {
			ref := segs[i]
			if !ref.acquire() {
				break // retired under us: reload the list
			}
			if c, ok := collect(ref, offset, hw, maxBytes); ok {
				c.HighWatermark = realHW
				return c, nil
			}
			ref.release()
		}
		if i == len(segs) {
			// Below the high watermark but in no segment: retention moved
			// the start past it between our checks.
			if offset < l.logStart.Load() {
				continue
			}
			if last := segs[len(segs)-1]; offset < last.Base() {
				// Offsets a damaged segment lost (Open keeps them unused)
				// up to an active segment with nothing readable yet.
				return Chunk{NextOffset: last.Base(), HighWatermark: realHW}, nil
			}
			return Chunk{}, fmt.Errorf("BUG: offset %d below high watermark %d not found", offset, hw)
		}
	}
}

// collect gathers batches from ref starting at offset.
func collect(ref *segRef, offset, hw int64, maxBytes int) (Chunk, bool) {
	pos, ok := ref.Lookup(offset)
	if !ok {
		return Chunk{}, false
	}
	data := ref.Read(pos, ref.Published())
	end, next := 0, offset
	for end < len(data) {
		b := batch.Batch(data[end:])
		n, err := batch.Size(b)
		if err != nil || b.BaseOffset() >= hw || (end > 0 && end+n > maxBytes) {
			break
		}
		end += n
		next = b.NextOffset()
	}
	if end == 0 {
		return Chunk{}, false
	}
	return Chunk{Data: data[:end:end], NextOffset: next, HighWatermark: hw, ref: ref}, true
}

// ReadAppend is Read that copies the batches to dst instead of holding the
// segment: for callers that keep the bytes.
func (l *Log) ReadAppend(dst []byte, offset int64, maxBytes int) ([]byte, int64, error) {
	c, err := l.Read(offset, maxBytes)
	if err != nil {
		return dst, offset, err
	}
	dst = append(dst, c.Data...)
	next := c.NextOffset
	c.Release()
	return dst, next, nil
}

// OffsetForTime returns the offset of the first batch whose max timestamp is
// >= ts, or the high watermark if there is none (Kafka's ListOffsets by
// timestamp).
//
// Batches wholly below the log start do not count, so the scan goes on
// from the index's answer to the first batch that qualifies and reaches
// the log start; the answer is then at least the log start (a batch that
// holds the log start may owe its max timestamp to a record below it: the
// caller decodes records for an exact answer, as kafka's ListOffsets does).
// The answer never passes the high watermark. (Without this: a qualifying
// batch below the log start made it answer the log start, whose timestamp
// may be below ts.)
func (l *Log) OffsetForTime(ts int64) (int64, error) {
	start, hw := l.logStart.Load(), l.hw.Load()
	if start >= hw {
		return hw, nil
	}
	if err := l.awaken(); err != nil {
		return 0, fmt.Errorf("cannot look up timestamp %d: %w", ts, err)
	}
	for _, ref := range *l.segs.Load() {
		if !ref.acquire() {
			continue
		}
		if pos, ok := ref.LookupTime(ts); ok {
			for data := ref.Read(pos, ref.Published()); len(data) > 0; {
				n, err := batch.Size(data)
				if err != nil {
					break
				}
				b := batch.Batch(data[:n])
				data = data[n:]
				if b.BaseOffset() >= hw {
					ref.release()
					return hw, nil
				}
				if b.MaxTimestamp() >= ts && b.LastOffset() >= start {
					// The offset is read from the mapping before the
					// reference goes: once released, retention may recycle
					// the segment and unmap what b points into.
					off := max(b.BaseOffset(), start)
					ref.release()
					return off, nil
				}
			}
		}
		ref.release()
	}
	return hw, nil
}

// Flush syncs everything appended so far and advances the recovery point.
func (l *Log) Flush() error {
	if l.dormant.Load() {
		// Nothing was written since the clean shutdown made all durable.
		return nil
	}
	l.mu.Lock()
	end := l.leo
	l.mu.Unlock()
	if err := l.waitDurable(end); err != nil {
		return err
	}
	// The checkpoint's fsyncs run outside mu, so appends do not wait for
	// them (every interval under SyncInterval).
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil // Close checkpoints everything itself
	}
	l.ckWriters.Add(1)
	l.mu.Unlock()
	defer l.ckWriters.Done()
	return l.writeCheckpoints()
}

// IndexAborted records an aborted transaction in the index of the segment
// holding its ABORT marker (e.LastOffset), unless that segment already has
// it: recovery replays markers that segments below the recovery point
// indexed before the crash. The caller holds the writer lock (an
// AppendBatch callback) or has the log to itself (opening).
func (l *Log) IndexAborted(e txnindex.Entry) error {
	if l.dormant.Load() {
		// Opening: a replay of producer state through a dormant log
		// (ReadRetained woke it already); a caller under the writer lock
		// has an awake log.
		if err := l.awaken(); err != nil {
			return err
		}
	}
	segs := *l.segs.Load()
	i := sort.Search(len(segs), func(i int) bool { return segs[i].Base() > e.LastOffset }) - 1
	if i < 0 {
		return fmt.Errorf("BUG: abort marker at %d below every segment", e.LastOffset)
	}
	if segs[i].LastAborted() >= e.LastOffset {
		return nil
	}
	return segs[i].AppendAborted(e)
}

// AbortedTxns returns the aborted transactions a read_committed fetch of
// [fetchOffset, upper) must know about (Kafka's collection across segments:
// from the segment holding fetchOffset, stopping after the first segment
// whose entries reach past upper by their last stable offset).
func (l *Log) AbortedTxns(fetchOffset, upper int64, dst []txnindex.Entry) []txnindex.Entry {
	if l.dormant.Load() && l.awaken() != nil {
		// Read also wakes the log; a failure there was reported.
		return dst
	}
	segs := *l.segs.Load()
	i := sort.Search(len(segs), func(i int) bool { return segs[i].Base() > fetchOffset }) - 1
	for i = max(i, 0); i < len(segs); i++ {
		ref := segs[i]
		if !ref.acquire() {
			continue
		}
		var stop bool
		dst, stop = ref.AbortedTxns().Collect(dst, fetchOffset, upper)
		ref.release()
		if stop {
			break
		}
	}
	return dst
}

// Locked runs fn under the writer lock: for callers that read state they
// change only from AppendBatch callbacks (the engine's open transactions).
func (l *Log) Locked(fn func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn()
}

// SegmentBases returns the base offsets of the log's segments, in order.
func (l *Log) SegmentBases() []int64 {
	if l.dormant.Load() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.dormant.Load() {
			return append([]int64(nil), l.dormantBases...)
		}
	}
	segs := *l.segs.Load()
	out := make([]int64, len(segs))
	for i, s := range segs {
		out[i] = s.Base()
	}
	return out
}

// WriteSnapshot writes a producer-state snapshot image at offset, synced,
// as a rebuild of producer state does at the segment bases it replays
// past and at its end (spec 2.6 (3)).
func (l *Log) WriteSnapshot(offset int64, image []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := writeSnapshot(l.dir, offset, image, true); err != nil {
		return err
	}
	return fsutil.SyncDir(l.dir)
}

// WrittenEnd returns the end offset of everything appended, visible to
// readers or not (under DurableVisibility, what no sync covered yet is
// not); in a Locked function, the log end offset.
func (l *Log) WrittenEnd() int64 { return l.written.Load() }
