package partition

import (
	"fmt"
)

// Retention deletes whole segments from the start of the log, as Kafka's
// delete policy does: a segment goes when its newest batch is older than
// RetentionAge, or while the log without it is still larger than
// RetentionBytes. The active segment is never deleted (so the high
// watermark is never below what remains), and the log start offset moves to
// the first remaining segment's base.
//
// Deleted segments leave the segment list at once; their files are removed
// by the maintainer, or by the last reader holding a chunk when it releases
// it (see segRef), never under the writer mutex: unlinking a segment frees
// its blocks, which on a filesystem mounted with discard sends them to the
// device there and then (8 ms for 64 MiB here, so ~130 ms for a 1 GiB
// segment, during which every append would wait).
func (l *Log) ApplyRetention() (deleted int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	segs := *l.segs.Load()
	var total int64
	for _, s := range segs {
		total += s.Published()
	}
	nowMs := l.opts.Now().UnixMilli()
	hw := l.hw.Load()
	n := 0
	for ; n < len(segs)-1; n++ {
		s := segs[n]
		// Never delete what readers cannot see yet.
		if segs[n+1].Base() > hw {
			break
		}
		ts, _ := s.MaxTimestamp()
		byAge := l.opts.RetentionAge > 0 && ts >= 0 && nowMs-ts > l.opts.RetentionAge.Milliseconds()
		bySize := l.opts.RetentionBytes > 0 && total-s.Published() >= l.opts.RetentionBytes
		if !byAge && !bySize {
			break
		}
		total -= s.Published()
	}
	if n == 0 {
		return 0, nil
	}
	l.truncateStartLocked(segs, n, false)
	return n, nil
}

// DeleteRecordsBefore moves the log start offset to offset (<= the high
// watermark) and deletes the segments wholly below it, Kafka's
// DeleteRecords. Reads below the new start fail with ErrOffsetOutOfRange.
func (l *Log) DeleteRecordsBefore(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if offset > l.hw.Load() {
		return fmt.Errorf("cannot delete records below %d, above high watermark %d: %w", offset, l.hw.Load(), ErrOffsetOutOfRange)
	}
	if offset <= l.logStart.Load() {
		return nil
	}
	segs := *l.segs.Load()
	n := 0
	for n < len(segs)-1 && segs[n+1].Base() <= offset {
		n++
	}
	l.logStart.Store(offset)
	if n == 0 {
		return l.writeCheckpoints()
	}
	return l.truncateStartLocked(segs, n, true)
}

// truncateStartLocked retires the first n segments (under mu): they leave
// the list now, and the maintainer drops the list's references (deleting
// or recycling the files) after the checkpoint that moves the log start
// past them. A crash before then leaves files below the log start offset,
// which Open deletes again. With checkpointNow the checkpoint is written
// here, under mu, and its error returned (DeleteRecordsBefore: the caller
// asked for the new start); otherwise the maintainer writes it first, as
// retention needs no more (a crash before it only repeats the retention):
// each checkpoint is two fsyncs, several ms behind a busy device, and the
// writer would wait for them (p99.9 7 -> 17 ms with retention every 20 ms,
// idemlog bench --fsync never --segment-bytes 64 MiB).
func (l *Log) truncateStartLocked(segs []*segRef, n int, checkpointNow bool) error {
	rest := append([]*segRef(nil), segs[n:]...)
	storeMax(&l.logStart, rest[0].Base())
	// The new list is published before the old segments' references drop:
	// see segRef for why readers then never see a closed segment.
	l.segs.Store(&rest)
	var err error
	if checkpointNow {
		err = l.writeCheckpoints()
	}
	l.submit(task{kind: taskRetire, retired: append([]*segRef(nil), segs[:n]...), checkpoint: !checkpointNow})
	return err
}
