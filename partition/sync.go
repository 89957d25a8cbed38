package partition

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
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

// advance records that offsets below end are durable (a roll synced them).
func (g *groupSync) advance(end int64) {
	g.mu.Lock()
	g.durable = max(g.durable, end)
	g.mu.Unlock()
	g.cond.Broadcast()
}

// waitDurable returns once offsets below end are on disk.
func (l *Log) waitDurable(end int64) error {
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
// returns the end offset covered. It takes mu only to snapshot; the syncs
// run with appends flowing.
func (l *Log) syncOnce() (int64, error) {
	var segs [4]*segRef
	l.mu.Lock()
	if l.closed && l.active == nil {
		l.mu.Unlock()
		return 0, ErrClosed
	}
	l.unsealedMu.Lock()
	pending := append(segs[:0], l.unsealed...)
	l.unsealedMu.Unlock()
	pending = append(pending, l.active)
	size, end, dirDirty := l.active.Size(), l.leo, l.dirDirty
	l.dirDirty = false
	for _, s := range pending {
		s.acquire()
	}
	l.mu.Unlock()
	defer func() {
		for _, s := range pending {
			s.release()
		}
	}()
	l.sync.syncs.Add(1)
	for _, s := range pending {
		if err := s.SyncData(); err != nil {
			l.fail(err)
			return 0, fmt.Errorf("cannot sync partition %s: %w: %w", l.dir, ErrFailed, err)
		}
	}
	if dirDirty {
		if err := syncDir(l.dir); err != nil {
			l.fail(err)
			return 0, fmt.Errorf("cannot sync partition %s: %w: %w", l.dir, ErrFailed, err)
		}
	}
	if l.durableOnly() {
		for _, s := range pending[:len(pending)-1] {
			s.Publish(s.Size())
		}
		pending[len(pending)-1].Publish(size)
	}
	// The recovery point moves before the high watermark, so nobody can
	// observe a visible offset that is not yet counted as durable.
	storeMax(&l.recoveryPoint, end)
	if l.durableOnly() {
		storeMax(&l.hw, end)
	}
	return end, nil
}

// runFlusher syncs every interval (SyncInterval) and checkpoints the
// recovery point, until Close.
func (l *Log) runFlusher(interval time.Duration) {
	defer l.flusher.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			_ = l.Flush()
		}
	}
}
