package engine

import (
	"sync"
	"sync/atomic"

	"github.com/idemlog/idemlog/pidtable"
)

// producerTable is a partition's producer-state table, made at its first
// producer: an empty pidtable.Table holds its 64 shards' first arrays
// (about 90 KiB), which a data dir of thousands of partitions that never
// see a producer should not pay for. Until then every read of it finds
// nothing. The methods are pidtable.Table's.
type producerTable struct {
	t   atomic.Pointer[pidtable.Table]
	mu  sync.Mutex // serializes the table's creation and SetMaxEntries
	max int        // under mu
}

// table returns the table, made if there is none yet.
func (pt *producerTable) table() *pidtable.Table {
	if t := pt.t.Load(); t != nil {
		return t
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if t := pt.t.Load(); t != nil {
		return t
	}
	t := pidtable.New(pidtable.Options{MaxEntries: pt.max})
	pt.t.Store(t)
	return t
}

func (pt *producerTable) SetMaxEntries(n int) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.max = n
	if t := pt.t.Load(); t != nil {
		t.SetMaxEntries(n)
	}
}

func (pt *producerTable) Acquire(pid int64) (*pidtable.Entry, bool, error) {
	return pt.table().Acquire(pid)
}

func (pt *producerTable) TryAcquire(pid int64) (*pidtable.Entry, bool) {
	t := pt.t.Load()
	if t == nil {
		return nil, false
	}
	return t.TryAcquire(pid)
}

// Release and Remove take an entry Acquire or TryAcquire handed out: the
// table exists.
func (pt *producerTable) Release(e *pidtable.Entry) { pt.t.Load().Release(e) }
func (pt *producerTable) Remove(e *pidtable.Entry)  { pt.t.Load().Remove(e) }

func (pt *producerTable) Range(fn func(pid int64, s *pidtable.State) bool) {
	if t := pt.t.Load(); t != nil {
		t.Range(fn)
	}
}

func (pt *producerTable) Sweep(fn func(pid int64, s *pidtable.State) (keep bool)) int {
	if t := pt.t.Load(); t != nil {
		return t.Sweep(fn)
	}
	return 0
}

func (pt *producerTable) Len() int {
	if t := pt.t.Load(); t != nil {
		return t.Len()
	}
	return 0
}
