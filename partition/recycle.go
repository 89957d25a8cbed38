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
	mu     sync.Mutex // serializes retirements (any goroutine that drops a last reference) and take
	path   string     // the file, "" when empty
	closed bool       // the log is closed: retired files are deleted
	reused atomic.Int64
}

// retire disposes of a retired segment whose last reference is gone:
// recycled into the pool if the pool is empty, deleted otherwise.
func (p *recyclePool) retire(s *segment.Segment) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.path != "" {
		return s.Delete()
	}
	path, err := s.Recycle()
	if err != nil {
		return err
	}
	p.path = path
	return nil
}

// take empties the pool, returning its file ("" if none).
func (p *recyclePool) take() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	path := p.path
	p.path = ""
	return path
}

// close deletes the pooled file; later retirements delete theirs.
func (p *recyclePool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.path != "" {
		_ = os.Remove(p.path)
		p.path = ""
	}
}

// recycledSpare makes the next spare of the pooled file, nil if there is
// none or it cannot be used (it is then removed). The directory is synced
// first: the file's rename away from its segment name must be on disk
// before the file takes new data, or a crash could bring back the old
// segment name over new batches.
func (l *Log) recycledSpare() *segment.Spare {
	if l.recycle == nil {
		return nil
	}
	path := l.recycle.take()
	if path == "" {
		return nil
	}
	if err := fsutil.SyncDir(l.dir); err != nil {
		_ = os.Remove(path)
		return nil
	}
	sp, err := segment.OpenSpare(l.dir, l.opts.Segment, path)
	if err != nil {
		_ = os.Remove(path)
		return nil
	}
	l.recycle.reused.Add(1)
	return sp
}

// Recycled reports how many retired segment files became new segments'
// files (segment.Recycle).
func (l *Log) Recycled() int64 {
	if l.recycle == nil {
		return 0
	}
	return l.recycle.reused.Load()
}

// ref wraps a segment of this log in a segRef that recycles it when
// retired, if the log recycles.
func (l *Log) ref(s *segment.Segment) *segRef {
	r := newRef(s)
	r.pool = l.recycle
	return r
}
