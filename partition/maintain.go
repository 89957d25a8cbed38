package partition

import (
	"path/filepath"
	"sync/atomic"

	"github.com/idemlog/idemlog/internal/fsutil"
	"github.com/idemlog/idemlog/segment"
)

// The maintainer is one background goroutine per partition that keeps slow
// work off the append path:
//
//   - sealing a rolled segment (final time-index entry, trims, fsync of a
//     segment that may hold a gigabyte of dirty pages under SyncNever),
//     after which the recovery point moves past it;
//   - creating the next segment's file ahead of the roll (a Spare), from a
//     file retention retired if there is one (recycle.go);
//   - reserving and prefaulting the active segment ahead of the cursor;
//   - deleting (or recycling) the files of segments retention retired.
//
// Tasks run in order, so segments are sealed in offset order and the
// recovery point only moves forward.
type maintainer struct {
	tasks chan task
	spare atomic.Pointer[segment.Spare]
	// spareWanted is set while a spare is being made, so rolls in quick
	// succession ask for one spare at a time.
	spareWanted atomic.Bool
	// zeroRun is the run the writer last asked to zero-fill, 0 when its
	// latest zeroFillPays verdict was fallocate: spares follow it.
	zeroRun atomic.Int64
	// drop makes the maintainer skip its work: tests use it to leave files
	// exactly as a crash would.
	drop atomic.Bool
}

// waitIdle returns once every task queued before the call has run.
func (l *Log) waitIdle() {
	l.mu.Lock()
	if l.closed || !l.started {
		l.mu.Unlock()
		return
	}
	done := make(chan struct{})
	l.submit(task{kind: taskBarrier, done: done})
	l.mu.Unlock()
	<-done
}

type taskKind int

const (
	taskSeal taskKind = iota
	taskSpare
	taskPrefault
	taskBarrier
	taskRetire
)

type task struct {
	kind   taskKind
	seg    *segRef
	end    int64 // seal: the offset after the segment
	cursor int64 // prefault: the writer's position
	ahead  int64 // prefault: how far past cursor
	// populate: prefault pages, not only reserve blocks, because the
	// append that asked went through the mapping (the next ones likely will)
	populate bool
	// zero: reserve by zero-filling (zeroFillPays)
	zero bool
	done chan struct{}
	// retire: segments retention (or DeleteRecordsBefore) took off the
	// list, whose list references the maintainer drops (after the new log
	// start was checkpointed).
	retired []*segRef
}

// submit queues t without blocking the writer; prefaults are dropped when
// the queue is full (the writer reserves for itself if it must), seals and
// spares are not.
func (l *Log) submit(t task) {
	if t.kind == taskPrefault {
		select {
		case l.maint.tasks <- t:
		default:
			// The task holds a reference on its segment (writeLocked),
			// which the maintainer would have released: dropped, it must
			// be released here, or the segment is never closed, unmapped
			// or deleted.
			t.seg.release()
		}
		return
	}
	l.maint.tasks <- t
}

func (l *Log) runMaintainer() {
	defer l.bg.Done()
	for t := range l.maint.tasks {
		if l.maint.drop.Load() {
			if t.seg != nil {
				t.seg.release()
			}
			for _, s := range t.retired {
				s.retire(false) // as a crash would: the files stay
			}
			if t.done != nil {
				close(t.done)
			}
			continue
		}
		switch t.kind {
		case taskBarrier:
			close(t.done)
		case taskRetire:
			for _, s := range t.retired {
				s.retire(true)
			}
		case taskSeal:
			l.sealRolled(t.seg, t.end)
		case taskSpare:
			if cur := l.maint.spare.Load(); cur != nil && cur.Recycled() {
				// Already a recycled file: keep it.
				l.maint.spareWanted.Store(false)
				continue
			}
			sp := l.recycledSpare()
			if sp == nil {
				sp, _ = segment.CreateSpare(l.dir, l.opts.Segment, l.maint.zeroRun.Load())
			}
			if sp != nil {
				if old := l.maint.spare.Swap(sp); old != nil {
					old.Discard()
				}
			}
			l.maint.spareWanted.Store(false)
		case taskPrefault:
			// A segment rolled since the request takes no more
			// appends: preparing it would only write zeros (or
			// prefault pages) that its seal truncates away.
			if l.activeRef.Load() == t.seg {
				_ = t.seg.Prepare(t.cursor, t.ahead, t.populate, t.zero)
			}
			t.seg.release()
			l.preferRecycled()
		}
	}
	if sp := l.maint.spare.Swap(nil); sp != nil {
		sp.Discard()
	}
}

func (l *Log) prefaultAhead() int64 {
	if l.opts.Segment.ReserveAhead > 0 {
		return l.opts.Segment.ReserveAhead
	}
	return segment.DefaultReserveAhead
}

// sealRolled seals a segment the writer has left, then records that
// everything below end is durable.
func (l *Log) sealRolled(seg *segRef, end int64) {
	err := seg.Seal()
	if err == nil {
		// Sealed is synced: under DurableVisibility the segment's tail may
		// be published now, and must be, since it leaves the unsealed list
		// that a group sync publishes (otherwise a reader below the high
		// watermark would skip the tail for the next segment).
		seg.Publish(seg.Size())
	}
	if err == nil {
		// The roll's snapshot at end, written unsynced by the roll: on
		// disk before the recovery point moves past it.
		err = fsutil.SyncFile(filepath.Join(l.dir, segment.FileName(end, ".snapshot")))
	}
	if err == nil {
		err = fsutil.SyncDir(l.dir)
	}
	if err != nil {
		// Failed before the segment leaves the unsealed list: a group sync
		// that copies the list without it sees the failure (syncOnce
		// checks after the copy) rather than counting its bytes durable.
		// (Without this: a sync acknowledged a batch whose seal failed.)
		l.fail(err)
	}
	// Only unsealedMu, never mu: the writer may be blocked on a full task
	// queue while holding mu, waiting for this goroutine.
	l.unsealedMu.Lock()
	for i, s := range l.unsealed {
		if s == seg {
			l.unsealed = append(l.unsealed[:i:i], l.unsealed[i+1:]...)
			break
		}
	}
	l.unsealedMu.Unlock()
	seg.release()
	// A failed log trusts nothing past its failure: an earlier seal or
	// group sync whose fsync failed may have lost bytes below end, which
	// this seal's own success does not bring back. (Without this: the
	// durable mark and the checkpoint moved past them.)
	if err != nil || l.failed.Load() {
		return
	}
	// The recovery point first: a Flush that this seal satisfies (advance
	// wakes it) then checkpoints the whole end.
	storeMax(&l.recoveryPoint, end)
	l.sync.advance(end)
	if l.durableOnly() {
		// What the seal made durable becomes visible, and readers parked
		// on Advanced wake: otherwise it waited for a later group sync,
		// which never comes if nothing more is appended.
		l.raiseHW(end)
	}
	_ = l.writeCheckpoints()
}
