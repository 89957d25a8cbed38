package partition

import (
	"sync/atomic"

	"github.com/idemlog/idemlog/segment"
)

// segRef is a segment shared by the writer and readers.
//
// The live segment list holds one reference; every Read holds one until its
// Chunk is released. Retention and Close first remove the segment from the
// list (publishing a new list), then drop the list's reference; whoever
// drops the count to zero closes the segment, deleting its files if it was
// retired. A reader acquires with a CAS loop that refuses to move the count
// up from zero, so once the count reached zero nobody can resurrect the
// segment: a reader that loses that race reloads the list, which no longer
// contains it (the list was replaced before the list's reference was
// dropped, and both are sequentially consistent atomics). Reads therefore
// never touch an unmapped segment, and retention never waits for readers:
// deleting a file that is still mapped is safe on Linux, its blocks are
// freed when the last reader releases.
type segRef struct {
	*segment.Segment
	refs   atomic.Int32
	delete atomic.Bool // remove files, not just close, when refs reach 0
	// pool, if set, takes the files of a deleted segment for recycling
	// (immutable after creation).
	pool *recyclePool
	// logShut is the log's shut flag (immutable after creation): once the
	// log is closed or killed, a last release closes the files without
	// deleting them. The directory may have been renamed away and a new
	// log made at its old path (DeleteTopic, then CreateTopic), whose
	// files a late reader's release would otherwise delete by name; and
	// after Kill nothing may change the files. What is left lies below the
	// log start, for the next Open to delete.
	logShut *atomic.Bool
}

func newRef(s *segment.Segment) *segRef {
	r := &segRef{Segment: s}
	r.refs.Store(1)
	return r
}

func (r *segRef) acquire() bool {
	for {
		n := r.refs.Load()
		if n <= 0 {
			return false
		}
		if r.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (r *segRef) release() {
	switch n := r.refs.Add(-1); {
	case n == 0:
		switch {
		case r.delete.Load() && r.logShut != nil && r.logShut.Load():
			_ = r.Segment.Close()
		case r.delete.Load() && r.pool != nil:
			_ = r.pool.retire(r.Segment)
		case r.delete.Load():
			_ = r.Segment.Delete()
		default:
			_ = r.Segment.Close()
		}
	case n < 0:
		panic("BUG: segment reference released twice")
	}
}

// retire drops the list's reference; the files go when the last reader
// releases.
func (r *segRef) retire(deleteFiles bool) {
	r.delete.Store(deleteFiles)
	r.release()
}

// storeMax raises a to v unless it is already higher: published sizes and
// watermarks only move forward, whichever of the writer and the syncer gets
// there first. It reports whether a moved.
func storeMax(a *atomic.Int64, v int64) bool {
	for {
		cur := a.Load()
		if v <= cur {
			return false
		}
		if a.CompareAndSwap(cur, v) {
			return true
		}
	}
}
