package partition

import (
	"os"
	"sync"
	"sync/atomic"

	"github.com/idemlog/idemlog/internal/fsutil"
	"github.com/idemlog/idemlog/segment"
)

// recyclePool keeps at most one .log file that retention retired, to
// become the maintainer's next spare (segment.Recycle has why: its blocks
// are written ones). One is enough: a log rolls one segment at a time,
// and retention in steady state retires about as many as it rolls.
type recyclePool struct {
	// pooled mirrors file != nil for the maintainer's lock-free check
	// (stored under mu, read without it: a stale read only delays the
	// swap to the next task).
	pooled atomic.Bool
	mu     sync.Mutex            // serializes retirements (any goroutine that drops a last reference) and take
	file   *segment.RecycledFile // nil when empty
	closed bool                  // the log is closed (or killed): retired files are deleted
	reused atomic.Int64
}

// retire disposes of a retired segment whose last reference is gone:
// recycled into the pool if the pool is empty (and the segment's batches
// are large enough, see segment.Recycle), deleted otherwise.
func (p *recyclePool) retire(s *segment.Segment) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.file != nil {
		return s.Delete()
	}
	rf, err := s.Recycle()
	if err != nil {
		return err
	}
	p.file = rf
	p.pooled.Store(rf != nil)
	return nil
}

// take empties the pool, returning its file (nil if none).
func (p *recyclePool) take() *segment.RecycledFile {
	p.mu.Lock()
	defer p.mu.Unlock()
	rf := p.file
	p.file = nil
	p.pooled.Store(false)
	return rf
}

// close deletes the pooled file; later retirements delete theirs.
func (p *recyclePool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.file != nil {
		_ = os.Remove(p.file.Path)
		p.file = nil
		p.pooled.Store(false)
	}
}

// recycledSpare makes the next spare of the pooled file, nil if there is
// none or it cannot be used (it is then removed). The directory is synced
// first: the file's rename away from its segment name must be on disk
// before the file takes new data, or a crash could bring back the old
// segment name over new batches. (OpenSpare then invalidates the old
// batches and syncs the file, off the append path: this is the
// maintainer.)
func (l *Log) recycledSpare() *segment.Spare {
	if l.recycle == nil {
		return nil
	}
	rf := l.recycle.take()
	if rf == nil {
		return nil
	}
	if err := fsutil.SyncDir(l.dir); err != nil {
		_ = os.Remove(rf.Path)
		return nil
	}
	sp, err := segment.OpenSpare(l.dir, l.opts.Segment, rf)
	if err != nil {
		_ = os.Remove(rf.Path)
		return nil
	}
	return sp
}

// preferRecycled replaces a pending spare that is a new file with the
// pooled one, if any (maintainer): retention may pool a file after the
// spare for the next roll was made, and written blocks beat fallocated
// ones for a whole segment. A roll that took the spare meanwhile leaves
// the recycled one for the roll after (the swaps are atomic).
func (l *Log) preferRecycled() {
	if l.recycle == nil || !l.recycle.pooled.Load() {
		return
	}
	// No spare pending: a roll took it and its taskSpare, queued
	// behind, takes the pooled file itself.
	if cur := l.maint.spare.Load(); cur == nil || cur.Recycled() {
		return
	}
	if sp := l.recycledSpare(); sp != nil {
		if old := l.maint.spare.Swap(sp); old != nil {
			old.Discard()
		}
	}
}

// Recycled reports how many segments took the file of a retired one
// (segment.Recycle).
func (l *Log) Recycled() int64 {
	if l.recycle == nil {
		return 0
	}
	return l.recycle.reused.Load()
}

// ActiveRecycled reports whether the active segment took the file of a
// retired one.
func (l *Log) ActiveRecycled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.active == nil {
		return false // dormant
	}
	return l.active.Recycled() > 0
}

// ref wraps a segment of this log in a segRef that recycles it when
// retired, if the log recycles.
func (l *Log) ref(s *segment.Segment) *segRef {
	r := newRef(s)
	r.pool = l.recycle
	r.logShut = &l.shut
	return r
}
