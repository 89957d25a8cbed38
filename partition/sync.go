package partition

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemlog/idemlog/internal/fsutil"
)

// groupSync lets concurrent appenders share fdatasync calls. The first
// appender to need a sync becomes the leader: it snapshots the log end
// (everything written so far, including other appenders' batches), syncs,
// and wakes every waiter whose end the sync covered. Appenders that arrive
// during the sync wait and are covered by the next one, so N concurrent
// appenders cost about two syncs, not N.
type groupSync struct {
	mu      sync.Mutex
	cond    sync.Cond
	syncing bool
	durable int64 // offsets below are durable
	err     error // the first sync failure; sticky
	syncs   atomic.Int64
}

// Syncs is the number of group syncs (fdatasync rounds of the log's
// segments) run so far: for tests and metrics.
func (l *Log) Syncs() int64 { return l.sync.syncs.Load() }

// advance records that offsets below end are durable (a roll synced them).
func (g *groupSync) advance(end int64) {
	g.mu.Lock()
	g.durable = max(g.durable, end)
	g.mu.Unlock()
	g.cond.Broadcast()
}

// waitDurable returns once offsets below end are on disk.
func (l *Log) waitDurable(end int64) error {
	// A sync covers at most what was written when it started: past that,
	// the loop below would sync for ever.
	if w := l.written.Load(); end > w {
		return fmt.Errorf("cannot wait for offset %d to be durable: the log ends at %d: %w", end, w, ErrOffsetOutOfRange)
	}
	g := &l.sync
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.durable < end {
		if g.err != nil {
			return g.err
		}
		if g.syncing {
			g.cond.Wait()
			continue
		}
		g.syncing = true
		g.mu.Unlock()
		synced, err := l.syncOnce()
		g.mu.Lock()
		g.syncing = false
		if err != nil && g.err == nil {
			g.err = err
		}
		g.durable = max(g.durable, synced)
		g.cond.Broadcast()
	}
	return nil
}

// syncOnce syncs the active segment, any rolled segment not yet sealed,
// and the directory if a segment file appeared since its last sync, and
// returns the end offset covered.
//
// The fdatasyncs run without the writer's lock, so appenders keep copying
// while the leader syncs; under SyncAlways it takes that lock briefly at
// its start and end (startStaging, endStaging), so it must never be called
// under it (nor WaitDurable, Flush: not from an AppendBatch callback, a
// Locked function or a Snapshot). The snapshot is read in this order: the
// written end E, then the active segment A, then the unsealed list. The
// writer stores E after the bytes below it are in a segment, and a roll
// puts the old segment on the unsealed list and then stores the new active
// pointer before any byte goes to it. So every byte below E lies in the
// segment active when E was read or an older one. That segment is A, or a
// roll moved it to the list before A was stored, which our load of A
// observed, so the list we copy after it holds it; older ones are on that
// list or sealed (synced; a segment leaves the list only after its seal).
// All atomics are sequentially consistent.
func (l *Log) syncOnce() (int64, error) {
	var segs [4]*segRef
	var end int64
	// Under a plan that makes every append wait, the appends that arrive
	// during the sync are staged (startStaging). The plan may change
	// between syncs (SetFlush), never during one's choice: waitDurable
	// runs one sync at a time, so a sync without staging never meets a
	// stage left by one with (stagers is 0, nothing staged, and every
	// byte below written is in a file).
	if l.plan.Load().always {
		var err error
		if end, err = l.startStaging(); err != nil {
			return 0, err
		}
		// Only after a successful start: endStaging undoes its stagers++.
		defer l.endStaging()
	} else {
		// A failed log syncs nothing more (startStaging's check, for the
		// other policies): a seal whose fsync failed took its segment off
		// the unsealed list, and a sync of the rest would count its bytes
		// durable, and a Flush checkpoint them.
		if l.failed.Load() {
			return 0, fmt.Errorf("cannot sync partition %s: %w: %w", l.dir, ErrFailed, *l.failErr.Load())
		}
		end = l.written.Load()
	}
	// The active segment is read before the unsealed list: a roll adds
	// the old segment to the list and then stores the new active pointer,
	// so a roll between the two reads leaves the segment we read as active
	// on the list we copy. Read the other way round, a roll in between left
	// the old segment in neither, unsynced, though end covered its bytes.
	active := l.activeRef.Load()
	l.unsealedMu.Lock()
	pending := append(segs[:0], l.unsealed...)
	l.unsealedMu.Unlock()
	if !slices.Contains(pending, active) {
		pending = append(pending, active)
	}
	if l.failed.Load() {
		// A seal that failed fails the log before its segment leaves the
		// list: checked after the copy, a list without that segment is
		// never counted durable.
		return 0, fmt.Errorf("cannot sync partition %s: %w: %w", l.dir, ErrFailed, *l.failErr.Load())
	}
	dirDirty := l.dirDirty.Swap(false)
	n := 0
	for _, s := range pending {
		if s.acquire() {
			pending[n] = s
			n++
		}
	}
	pending = pending[:n]
	defer func() {
		for _, s := range pending {
			s.release()
		}
	}()
	if n == 0 || !slices.Contains(pending, active) {
		// The active segment was retired: the log is closing, and Close
		// syncs everything itself.
		return 0, ErrClosed
	}
	// Sizes are read before the syncs, so every byte below them is covered.
	var sizes [4]int64
	for i, s := range pending {
		if i < len(sizes) {
			sizes[i] = s.Written()
		}
	}
	l.sync.syncs.Add(1)
	for _, s := range pending {
		if err := s.SyncData(); err != nil {
			l.fail(err)
			return 0, fmt.Errorf("cannot sync partition %s: %w: %w", l.dir, ErrFailed, err)
		}
	}
	if dirDirty {
		if err := fsutil.SyncDir(l.dir); err != nil {
			l.fail(err)
			return 0, fmt.Errorf("cannot sync partition %s: %w: %w", l.dir, ErrFailed, err)
		}
	}
	if h := l.opts.private.afterSyncDataHook; h != nil {
		h(l)
	}
	// A seal of one of these segments may have failed while they synced:
	// the kernel reports a writeback error to the first fsync of the file
	// only, so ours may have succeeded after the seal's took the error,
	// and the bytes it lost would count durable. The seal fails the log
	// right after its fsync returns; the window left is those few
	// instructions.
	if l.failed.Load() {
		return 0, fmt.Errorf("cannot sync partition %s: %w: %w", l.dir, ErrFailed, *l.failErr.Load())
	}
	if l.durableOnly() {
		for i, s := range pending {
			if i < len(sizes) {
				s.Publish(sizes[i])
			} else {
				s.Publish(s.Written())
			}
		}
	}
	// The recovery point moves before the high watermark, so nobody can
	// observe a visible offset that is not yet counted as durable.
	storeMax(&l.recoveryPoint, end)
	if l.durableOnly() {
		l.raiseHW(end)
	}
	return end, nil
}

// runFlusher syncs every interval of the plan in force and checkpoints
// the recovery point, until Close. It follows SetFlush: a kick makes it
// read the plan again, and a plan without an interval parks it (it does
// not exit, so that starting one never races with one stopping).
//
// Ordering: SetFlush stores the plan, then sends on flushKick (a full
// buffer holds a kick not yet taken, which is the same); the flusher
// takes the kick, then loads the plan. A channel send happens before the
// receive it pairs with, so the load sees the new plan or a later one.
func (l *Log) runFlusher() {
	defer l.flusher.Done()
	var ticker *time.Ticker
	var tick <-chan time.Time
	defer func() {
		if ticker != nil {
			ticker.Stop()
		}
	}()
	var cur time.Duration
	for {
		if d := l.plan.Load().interval; d != cur {
			if ticker != nil {
				ticker.Stop()
				ticker, tick = nil, nil
			}
			if d > 0 {
				ticker = time.NewTicker(d)
				tick = ticker.C
			}
			cur = d
		}
		select {
		case <-l.stop:
			return
		case <-l.flushKick:
		case <-tick:
			_ = l.Flush()
		}
	}
}

// startFlusherLocked starts the flusher if the plan has an interval and
// none runs, or tells the running one the plan changed (under mu, or
// during Open). A dormant log starts it when it wakes (openFiles), a
// closed one never.
func (l *Log) startFlusherLocked() {
	if l.flusherOn {
		select {
		case l.flushKick <- struct{}{}:
		default:
		}
		return
	}
	if l.plan.Load().interval <= 0 || !l.started || l.closed {
		return
	}
	l.flusherOn = true
	l.flushKick = make(chan struct{}, 1)
	// Under mu with closed false: Close sets closed under mu before it
	// waits for the flusher group, so this Add comes before that Wait.
	l.flusher.Add(1)
	go l.runFlusher()
}

// runVisibilitySyncer, under DurableVisibility, syncs what was committed
// when kicked (commitLocked), so that a batch whose appender does not wait
// still becomes visible within one sync, until Close. A failed sync is its
// appenders' to report.
func (l *Log) runVisibilitySyncer() {
	defer l.flusher.Done()
	for {
		select {
		case <-l.stop:
			return
		case <-l.visKick:
			_ = l.waitDurable(l.written.Load())
		}
	}
}

// stageFlushBytes is how much a stage may hold before an append writes it
// into the file itself, while the sync runs. What is left staged when the
// sync ends is written between it and the next sync, on every writer's
// clock: with 1 MiB, 16 producers of 100 KB batches left 620-730 KB, 130
// us of pwrite plus the wait for the writer mutex (130-210 us in all)
// between syncs of 400-500 us. 128 KiB left 125 KB and 50 us; the records
// per second rose 15-20% (bench/peers idemlog-recycled, group, 1 KiB),
// and the pwrites that writers now do under mu cost nothing measurable
// at 100 B.
const stageFlushBytes = 128 << 10

// startStaging opens a group sync's staging window under SyncAlways and
// returns the end offset the sync may cover.
//
// Appenders that arrive while a sync is in flight cannot be acknowledged
// before the next one. Instead of a pwrite each, under the writer mutex,
// they copy their batches into the active segment's stage; endStaging
// writes the stage into the file with one pwrite when the sync is done,
// and publishes it, and the next sync makes it durable. With 16 producers
// on a partition the pwrites were the writers' largest cost (11 us of CPU
// per 11 KB batch against 4 us alone, most of the partition mutex's hold
// time).
//
// The invariant a sync's end rests on: every byte below end is in a file
// when its fdatasync starts. end is read under mu, after any stage left by
// a sync still in flight (syncs overlap only when tests call syncOnce
// directly) is written, so no staged byte lies below it; bytes staged
// afterwards lie above it.
func (l *Log) startStaging() (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed.Load() {
		return 0, fmt.Errorf("cannot sync partition %s: %w: %w", l.dir, ErrFailed, *l.failErr.Load())
	}
	if l.closed {
		// Bytes may be staged (a sync in flight when Close or Kill came
		// left them): written counts them, so no end may be derived from
		// it. Close syncs everything itself; after a kill nothing is
		// acknowledged.
		return 0, ErrClosed
	}
	if err := l.active.FlushStage(); err != nil {
		l.fail(err)
		return 0, fmt.Errorf("cannot sync partition %s: %w: %w", l.dir, ErrFailed, err)
	}
	l.stagers++
	l.active.SetStaging(true)
	return l.written.Load(), nil
}

// endStaging closes the window startStaging opened: it writes what was
// staged meanwhile into the file and publishes it (the high watermark
// rises past it, unless readers must wait for durability). After Close or
// Kill it leaves the stage alone: Close's seal writes it, a kill drops
// it, as a crash would (none of it was acknowledged: an acknowledgement
// needs the sync after this write).
func (l *Log) endStaging() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.stagers--
	raised := false
	if err := l.active.FlushStage(); err != nil {
		// The batches staged are lost: nothing may be acknowledged past
		// them, so the log fails and the next sync reports it.
		l.fail(err)
	} else if !l.durableOnly() {
		raised = l.publish(l.active)
	}
	l.active.SetStaging(l.stagers > 0)
	l.mu.Unlock()
	if raised {
		l.wake()
	}
}
