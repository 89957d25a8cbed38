package partition

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/idemlog/idemlog/internal/fsutil"
	"github.com/idemlog/idemlog/segment"
)

// Retention deletes whole segments from the start of the log, as Kafka's
// delete policy does: a segment goes when its newest batch is older than
// RetentionAge, or while the log without it is still larger than
// RetentionBytes, or when it lies wholly below the log start. An active
// segment whose every batch is past RetentionAge is rolled first and then
// deleted, as Kafka does; otherwise the active segment stays. The log start
// offset moves to the first remaining segment's base.
//
// Only the list changes under the writer's mutex. The new log start's
// checkpoint is written after it is released (two fsyncs: several ms behind
// a device busy with writeback, p99.9 of appends 7 -> 17 ms when written
// under it), before ApplyRetention returns; then the maintainer, or the last
// reader holding a chunk (see segRef), removes the files: unlinking a
// segment frees its blocks, which on a filesystem mounted with discard
// sends them to the device there and then (8 ms for 64 MiB here, so ~130 ms
// for a 1 GiB segment). A crash before the files go leaves segments wholly
// below the checkpointed log start, which Open deletes.
//
// ApplyRetention returns how many segments left the log. They have left it
// even when err is not nil: the log start moved in memory and reads below
// it fail, but err says the new start may not be durable (its checkpoint
// failed, or the log was closed meanwhile), so the files were kept and a
// crash may bring the segments back.
func (l *Log) ApplyRetention() (deleted int, err error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0, ErrClosed
	}
	if l.dormant.Load() {
		// A dormant log stays so unless the pass has something to
		// delete: a pass over thousands of idle partitions opens none.
		if !l.retentionDueDormant() {
			l.mu.Unlock()
			return 0, nil
		}
		if err := l.awakenLocked(); err != nil {
			l.mu.Unlock()
			return 0, fmt.Errorf("cannot apply retention: %w", err)
		}
	}
	segs := *l.segs.Load()
	var total int64
	for _, s := range segs {
		total += s.Published()
	}
	nowMs := l.opts.Now().UnixMilli()
	hw := l.hw.Load()
	start := l.logStart.Load()
	expired := func(s *segRef) bool {
		if l.opts.RetentionAge <= 0 {
			return false
		}
		ts, _ := s.MaxTimestamp()
		if ts < 0 && s.Published() > 0 {
			// No batch carried a timestamp: Kafka's largestTimestamp then
			// is the file's modification time. (Without this: such
			// segments never expired.)
			if fi, err := os.Stat(filepath.Join(l.dir, segment.FileName(s.Base(), ".log"))); err == nil {
				ts = fi.ModTime().UnixMilli()
			}
		}
		return ts >= 0 && nowMs-ts > l.opts.RetentionAge.Milliseconds()
	}
	n := 0
	for ; n < len(segs)-1; n++ {
		s := segs[n]
		// Never delete what readers cannot see yet, nor a segment a
		// cleaning is swapping out.
		if segs[n+1].Base() > hw || !l.detachableLocked(s.Base()) {
			break
		}
		// Wholly below the log start (DeleteRecordsBefore moved it past
		// the segment when it was still the active one): Kafka's
		// deleteLogStartOffsetBreachedSegments, whatever the retention
		// settings. (Without this: kept until the next Open.)
		byStart := segs[n+1].Base() <= start
		bySize := l.opts.RetentionBytes > 0 && total-s.Published() >= l.opts.RetentionBytes
		if !byStart && !bySize && !expired(s) {
			break
		}
		total -= s.Published()
	}
	if act := segs[len(segs)-1]; n == len(segs)-1 && act.Published() > 0 && hw >= l.leo && expired(act) {
		// Every batch of the active segment is past retention: as Kafka
		// does, roll it and delete it, or an idle topic keeps expired
		// data for good (only an append rolls by age). The log start
		// moves to the log end. A roll that fails (a full disk) leaves
		// the segment for the next pass.
		if err := l.roll(l.leo); err == nil {
			segs = *l.segs.Load()
			n++
		}
	}
	if n == 0 {
		l.mu.Unlock()
		return 0, nil
	}
	retired := l.detachStartLocked(segs, n)
	l.ckWriters.Add(1)
	l.mu.Unlock()
	return n, l.retireStart(retired)
}

// DeleteRecordsBefore moves the log start offset to offset (<= the high
// watermark) and deletes the segments wholly below it, Kafka's
// DeleteRecords. Reads below the new start fail with ErrOffsetOutOfRange.
// The new start is checkpointed when it returns.
func (l *Log) DeleteRecordsBefore(offset int64) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	if err := l.awakenLocked(); err != nil {
		l.mu.Unlock()
		return fmt.Errorf("cannot delete records below %d: %w", offset, err)
	}
	if offset > l.hw.Load() {
		l.mu.Unlock()
		return fmt.Errorf("cannot delete records below %d, above high watermark %d: %w", offset, l.hw.Load(), ErrOffsetOutOfRange)
	}
	var retired []*segRef
	if offset > l.logStart.Load() {
		segs := *l.segs.Load()
		n := 0
		for n < len(segs)-1 && segs[n+1].Base() <= offset && l.detachableLocked(segs[n].Base()) {
			n++
		}
		storeMax(&l.logStart, offset)
		if n > 0 {
			retired = l.detachStartLocked(segs, n)
		}
	}
	// Even when the start is already past offset: the call that moved it
	// may still be writing its checkpoint, and this one must not return
	// before the start is durable.
	l.ckWriters.Add(1)
	l.mu.Unlock()
	return l.retireStart(retired)
}

// detachStartLocked takes the first n segments off the list and moves the
// log start to the first remaining one (under mu). The new list is
// published before the old segments' references drop: see segRef for why
// readers then never see a closed segment.
func (l *Log) detachStartLocked(segs []*segRef, n int) []*segRef {
	rest := append([]*segRef(nil), segs[n:]...)
	storeMax(&l.logStart, rest[0].Base())
	l.segs.Store(&rest)
	return append([]*segRef(nil), segs[:n]...)
}

// syncStartSnapshot makes durable, data and name, the snapshot at the
// base of the segment that holds offset start, if there is one (under
// ckMu). The segment list may be read before or after a concurrent move
// of the start took segments off it: the largest base at or below start
// is that segment either way.
func (l *Log) syncStartSnapshot(start int64) error {
	base := int64(-1)
	for _, s := range *l.segs.Load() {
		if b := s.Base(); b <= start {
			base = max(base, b)
		}
	}
	if base < 0 {
		return nil
	}
	if err := fsutil.SyncFile(filepath.Join(l.dir, segment.FileName(base, ".snapshot"))); err != nil {
		return err
	}
	return fsutil.SyncDir(l.dir)
}

// retireStart checkpoints the log start (not under mu) and then hands the
// segments detachStartLocked took off the list to the maintainer, which
// drops the list's references and so deletes (or recycles) their files.
// The caller added to l.ckWriters under mu.
//
// Once the log is closed it writes nothing and only closes the segments:
// Close writes the checkpoint itself and its maintainer has finished, and
// after Kill nothing may change the files (a crash). Nor are files deleted
// when the checkpoint failed: on disk the log still starts below them.
// Files left stay below the log start, for the next Open to delete, or
// part of the log again if the start did not reach the disk.
func (l *Log) retireStart(retired []*segRef) error {
	defer l.ckWriters.Done()
	// Once shut, nothing is written (Close writes the checkpoint itself,
	// unless it fails; after Kill, nothing): say the start may not be
	// durable.
	var err error = ErrClosed
	if !l.shut.Load() {
		// writeCheckpoints syncs the new first segment's snapshot, which
		// its roll wrote unsynced, before the checkpoint.
		err = l.writeCheckpoints()
	}
	if len(retired) == 0 {
		return err
	}
	l.mu.Lock()
	if !l.closed && err == nil {
		l.submit(task{kind: taskRetire, retired: retired})
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	for _, s := range retired {
		s.retire(false)
	}
	return err
}
