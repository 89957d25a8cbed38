package partition

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/idemlog/idemlog/internal/fsutil"
	"github.com/idemlog/idemlog/segment"
)

// Files a partition directory holds besides its segments. Kafka keeps the
// checkpoints and the clean-shutdown marker per log directory; idemlog keeps
// them per partition so that each partition opens, recovers and closes on
// its own. The checkpoint files use Kafka's text format.
const (
	cleanShutdownFile = ".kafka_cleanshutdown"
	recoveryPointFile = "recovery-point-offset-checkpoint"
	logStartFile      = "log-start-offset-checkpoint"
)

// Open opens (or creates) the partition log in dir. After a clean shutdown
// nothing is scanned: sizes, indexes and the end offset come from the files
// as Close left them. Otherwise every segment from the one holding the
// checkpointed recovery point onwards is validated batch by batch (length,
// CRC, offsets); the log is truncated at the first torn or corrupt batch,
// later segments are dropped, and indexes are rebuilt.
func Open(dir string, opts Options) (*Log, error) {
	l, err := newLog(dir, opts)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create partition dir: %w", err)
	}
	if l.opts.Lazy {
		ok, err := l.openDormant()
		if err != nil {
			return nil, err
		}
		if ok {
			return l, nil
		}
	}
	if err := l.openFiles(); err != nil {
		return nil, err
	}
	return l, nil
}

// newLog checks opts and makes the log's structure, touching no file.
func newLog(dir string, opts Options) (*Log, error) {
	opts = opts.withDefaults()
	// ParseSyncPolicy refuses these; a policy built as a struct must be
	// refused too: interval 0 would panic in the flusher's ticker.
	switch {
	case opts.Sync.Kind == SyncInterval && opts.Sync.Interval <= 0:
		return nil, fmt.Errorf("cannot open partition: fsync policy interval=%v: %w", opts.Sync.Interval, ErrInvalidSyncPolicy)
	case opts.Sync.Kind == SyncBytes && opts.Sync.Bytes <= 0:
		return nil, fmt.Errorf("cannot open partition: fsync policy bytes=%d: %w", opts.Sync.Bytes, ErrInvalidSyncPolicy)
	}
	if err := opts.Flush.check(); err != nil {
		return nil, fmt.Errorf("cannot open partition: %w", err)
	}
	l := &Log{dir: dir, opts: opts, stop: make(chan struct{}), recoveredFrom: -1, ckDurable: [2]int64{-1, -1}}
	l.plan.Store(planOf(opts.Sync, opts.Flush))
	if !opts.NoRecycle && opts.Segment.Reserve == segment.ReserveZeroFill {
		l.recycle = &recyclePool{}
	}
	l.sync.cond.L = &l.sync.mu
	empty := []*segRef{}
	l.segs.Store(&empty)
	return l, nil
}

// OpenEmpty opens the log of a directory its caller has just created and
// knows to hold no log file (no segment, snapshot, checkpoint or marker):
// dormant and empty at offset 0, as Open with Options.Lazy makes of such
// a directory, without reading it. The first append creates the first
// segment. So that a creation of thousands of partitions does not list
// and read back thousands of directories it has just written.
func OpenEmpty(dir string, opts Options) (*Log, error) {
	l, err := newLog(dir, opts)
	if err != nil {
		return nil, err
	}
	l.setDormant(cleanShutdownState{FirstSegmentMaxTimestamp: -1, LogEndOffset: -1}, nil, 0, 0)
	l.fresh = true
	return l, nil
}

// openFiles opens the log's segments, recovering them unless the
// clean-shutdown marker is there, and starts its background work: the
// whole of Open for a log that is not left dormant (Options.Lazy), and
// the first use of one that is (awaken, under mu).
func (l *Log) openFiles() error {
	dir, opts := l.dir, l.opts
	log := opts.Logger.With("dir", dir)
	clean := fsutil.Exists(filepath.Join(dir, cleanShutdownFile))
	rpCk, err := loadCheckpoint(filepath.Join(dir, recoveryPointFile))
	if err != nil {
		return err
	}
	lsCk, err := loadCheckpoint(filepath.Join(dir, logStartFile))
	if err != nil {
		return err
	}
	recoveryPoint, logStart := rpCk.offset, lsCk.offset
	if clean && rpCk.current() && lsCk.current() {
		// After a clean shutdown the files read as what Close made durable:
		// they need no rewrite while their values stay, only the directory
		// sync that writeCheckpoints always makes.
		l.ckDurable = [2]int64{recoveryPoint, logStart}
	} else {
		l.ckDurable = [2]int64{-1, -1} // written at the first checkpoint
	}
	if rpCk.state == checkpointBad {
		log.Warn("damaged checkpoint: recovering every segment", "file", recoveryPointFile, "problem", rpCk.problem)
	}
	if lsCk.state == checkpointBad {
		log.Warn("damaged checkpoint: the log starts at the first segment", "file", logStartFile, "problem", lsCk.problem)
	}
	if why := implausibleLogStart(clean, rpCk, lsCk); why != "" {
		// Its value would delete segments (those wholly below it) and
		// restart the log above its end: a log start nothing vouches for
		// costs nothing when ignored (records below the true one stay
		// readable until retention or DeleteRecords moves it again),
		// while trusting a wrong one loses them all.
		log.Warn("implausible checkpoint ignored: the log starts at the first segment", "file", logStartFile,
			"offset", logStart, "recovery_point", recoveryPoint, "reason", why)
		logStart = 0
	}
	// A cleaning's swap a crash cut short is completed or rolled back
	// before anything reads the segments (compact_swap.go).
	if err := recoverSwaps(dir, log); err != nil {
		return err
	}
	bases, err := listSegmentsLogged(dir, log)
	if err != nil {
		return err
	}
	// The files as this code writes them: every segment has a .txnindex,
	// empty when no transaction aborted in it, so a missing one was lost.
	// A partition last checkpointed in Kafka's format may predate that:
	// its segments without one get an empty one, as they were trusted.
	txnIndexAlways := rpCk.state == checkpointV1
	// Segments wholly below the log start are files retention retired
	// whose deletion a crash cut short (retention checkpoints the log
	// start before the files go). They
	// go before the scan: a torn tail in one of them, whose seal a crash
	// also cut short, must not make recovery drop the segments after it.
	for len(bases) > 1 && bases[1] <= logStart {
		if err := deleteSegmentFiles(dir, bases[0]); err != nil {
			return err
		}
		log.Info("deleted segment below the log start (retention's deletion cut short)",
			"file", segment.FileName(bases[0], ".log"), "offsets", fmt.Sprintf("%d..%d", bases[0], bases[1]), "log_start", logStart)
		bases = bases[1:]
	}
	var segs []*segRef
	fail := func(err error) error {
		for _, s := range segs {
			_ = s.Close()
		}
		return err
	}
	if len(bases) == 0 {
		s, err := segment.Create(dir, logStart, opts.Segment)
		if err != nil {
			return fail(err)
		}
		segs = append(segs, l.ref(s))
	}
	for i, base := range bases {
		last := i == len(bases)-1
		logName := segment.FileName(base, ".log")
		txnName := segment.FileName(base, ".txnindex")
		txnMissing := !fsutil.Exists(filepath.Join(dir, txnName))
		s, err := segment.Open(dir, base, opts.Segment, last)
		if err != nil {
			return fail(err)
		}
		segs = append(segs, l.ref(s))
		// A segment holds the recovery point if the next one starts above it.
		needsScan := !clean && (last || bases[i+1] > recoveryPoint)
		if !needsScan {
			// An index we cannot trust is rebuilt from the log, and so is
			// a segment whose batches do not reach the next one's base
			// (one rolled but never sealed: its file runs on past its
			// data, with zeros or a recycled file's stale batches).
			if err := s.LoadTail(); err != nil {
				needsScan = true
				log.Info("segment does not match its indexes: scanning it", "file", logName, "error", err)
			} else if !last && s.NextOffset() != bases[i+1] {
				if !clean {
					needsScan = true
				} else {
					// Not scanned: a clean close vouches for the batches,
					// and a Kafka log's compaction leaves gaps that a scan
					// takes for the end of the data. Its end is still
					// reported, as it may be a file cut short.
					log.Warn("segment ends below the next segment's base: offsets missing", "file", logName,
						"missing_offsets", fmt.Sprintf("%d..%d", s.NextOffset(), bases[i+1]))
				}
			}
		}
		if txnMissing && !needsScan {
			if txnIndexAlways {
				// Without it read_committed readers would take aborted
				// records for committed ones. The scan empties it and the
				// owner's replay of the segment's markers (from a producer
				// snapshot at or below RecoveredFrom) fills it again.
				needsScan = true
				log.Warn("aborted-transaction index missing: rebuilding it from the segment's markers", "file", txnName)
			} else if err := createEmptyFile(filepath.Join(dir, txnName)); err != nil {
				return fail(err)
			}
		}
		if !needsScan {
			continue
		}
		if l.recoveredFrom < 0 {
			l.recoveredFrom = base
		}
		// No limit below the file's own size: a batch over today's
		// MaxBatchSize was valid when written (max.message.bytes may have
		// been lowered since), and cutting it would drop every batch and
		// segment after it. The lengths stay bounded by the file.
		fileSize := fileSizeOf(filepath.Join(dir, logName))
		cut, err := s.Recover(math.MaxInt32, nil)
		if err != nil {
			return fail(err)
		}
		if cut {
			log.Warn("truncated a segment at its first torn or corrupt batch", "file", logName,
				"position", s.Size(), "bytes", fileSize-s.Size(), "next_offset", s.NextOffset())
		} else if fileSize > s.Size() {
			log.Debug("dropped the zero tail of a segment", "file", logName, "position", s.Size(), "bytes", fileSize-s.Size())
		}
		if !last && s.NextOffset() != bases[i+1] && (clean || bases[i+1] <= recoveryPoint) {
			// The segment lost data that was durable: closed cleanly, or
			// below the recovery point, it ran up to the next base. The
			// later segments are intact and stay, so no offset is given
			// twice and no committed offset points into other data; the
			// lost offsets are a gap that reads skip, as they skip
			// Kafka's compaction gaps.
			log.Warn("segment damaged: its lost offsets are skipped, the later segments are kept", "file", logName,
				"lost_offsets", fmt.Sprintf("%d..%d", s.NextOffset(), bases[i+1]))
			continue
		}
		// A rolled segment whose batches run exactly up to the next base
		// is complete, whatever follows them: a recycled file's stale
		// batches (segment.Recycle) are cut, not a sign of a torn write.
		// One that stops short lost its tail, whether to garbage or to
		// zeros (unwritten blocks where unsynced pages never reached the
		// disk: Recover does not count those as cut), and the segments
		// after it would leave a gap. (Without this: with a zero tail they
		// were kept.)
		if !last && s.NextOffset() != bases[i+1] {
			// Everything after a torn batch is unreachable: Kafka drops it.
			// Here (a log not closed cleanly, the segment above the
			// recovery point) the lost tail was never known durable.
			for _, b := range bases[i+1:] {
				if err := deleteSegmentFiles(dir, b); err != nil {
					return fail(err)
				}
			}
			log.Warn("segment torn by a crash above the recovery point: deleted the segments after it",
				"file", logName, "next_offset", s.NextOffset(), "deleted_segments", len(bases)-i-1,
				"deleted_offsets", fmt.Sprintf("%d..", bases[i+1]))
			if err := s.Activate(); err != nil {
				return fail(err)
			}
			break
		}
	}
	// Remove the marker before anything is appended: from here on a crash
	// must be detected as unclean.
	if clean {
		// The directory is opened before the marker goes, so that a lack
		// of descriptors (EMFILE) fails the open before anything changed
		// on disk: a dormant log then stays dormant and tries again at
		// its next use (awaken).
		d, err := os.Open(dir)
		if err != nil {
			return fail(fmt.Errorf("cannot open partition dir: %w", err))
		}
		if err := os.Remove(filepath.Join(dir, cleanShutdownFile)); err != nil {
			d.Close()
			return fail(fmt.Errorf("cannot remove clean-shutdown marker: %w", err))
		}
		l.markerGone = true
		err = d.Sync()
		d.Close()
		if err != nil {
			return fail(fmt.Errorf("cannot sync partition dir: %w", err))
		}
	}
	if last := segs[len(segs)-1]; last.NextOffset() < logStart {
		// The log lost offsets the log start had already passed (a crash
		// after DeleteRecordsBefore moved it past what was synced): as
		// Kafka does, start afresh at the log start.
		log.Warn("log ends below its log start: starting afresh at the log start", "file", logStartFile,
			"log_end", last.NextOffset(), "log_start", logStart, "deleted_segments", len(segs))
		for _, s := range segs {
			s.retire(true)
		}
		s, err := segment.Create(dir, logStart, opts.Segment)
		if err != nil {
			return err
		}
		segs = []*segRef{l.ref(s)}
		l.recoveredFrom = logStart
	}
	if last := segs[len(segs)-1]; last.NextOffset() < recoveryPoint && (rpCk.state == checkpointV1 || clean && rpCk.state == checkpointV0) {
		// The log ends below the point that was durable (the end at a
		// clean close): its tail was damaged after it was written. The
		// log goes on at the recovery point, so that the lost offsets are
		// never given to other records: a consumer that read them, or a
		// group that committed past them, would skip the new ones.
		log.Warn("log ends below its recovery point: the lost offsets are skipped", "file", segment.FileName(last.Base(), ".log"),
			"lost_offsets", fmt.Sprintf("%d..%d", last.NextOffset(), recoveryPoint))
		if err := last.Seal(); err != nil {
			return fail(err)
		}
		s, err := segment.Create(dir, recoveryPoint, opts.Segment)
		if err != nil {
			return fail(err)
		}
		segs = append(segs, l.ref(s))
		if l.recoveredFrom < 0 || l.recoveredFrom > last.Base() {
			l.recoveredFrom = last.Base()
		}
	}
	if !clean {
		// After a crash the bytes above the recovery point may exist only
		// in the page cache (a process crash leaves them there), and they
		// are about to count as durable: the high watermark, the durable
		// mark that acknowledges a producer's retry of a batch found here,
		// and the checkpoint that spares the next Open their scan. So they
		// are synced first, with the directory for the segments' names.
		// (Without this: they never were; a later power loss lost
		// acknowledged batches, and a rolled segment was never synced
		// again, not even by Close.)
		for _, s := range segs {
			if s.NextOffset() > recoveryPoint {
				if err := s.Sync(); err != nil {
					return fail(fmt.Errorf("cannot sync recovered segment %d: %w", s.Base(), err))
				}
			}
		}
		if err := fsutil.SyncDir(dir); err != nil {
			return fail(err)
		}
	}
	l.segs.Store(&segs)
	l.active = segs[len(segs)-1]
	l.activeRef.Store(l.active)
	l.activeCreated = opts.Now().UnixMilli()
	l.leo = l.active.NextOffset()
	l.written.Store(l.leo)
	l.logStart.Store(max(logStart, segs[0].Base()))
	for _, s := range segs {
		s.Publish(s.Size())
	}
	l.hw.Store(l.leo)
	if l.recoveredFrom < 0 || l.recoveredFrom > l.leo {
		l.recoveredFrom = l.leo
	}
	// The recovery point stays at what recovery rebuilt until the owner
	// has rebuilt what lives on top of the log (FinishRecovery): Recover
	// emptied those segments' aborted-transaction indexes, which the
	// engine fills again by replaying their markers. Checkpointed past
	// them before that, a crash in between left them empty for good, and
	// read_committed delivered aborted records.
	l.recoveryPoint.Store(l.recoveredFrom)
	l.sync.durable = l.leo
	// After a clean shutdown whose checkpoints still hold, there is
	// nothing to write, and the directory was synced with the marker's
	// removal.
	if !clean || l.ckDurable != [2]int64{l.recoveryPoint.Load(), l.logStart.Load()} {
		if err := l.writeCheckpoints(); err != nil {
			return fail(err)
		}
	}
	l.maint.tasks = make(chan task, 64)
	l.bg.Add(1)
	go l.runMaintainer()
	if l.durableOnly() && !opts.noVisibilitySyncer {
		l.visKick = make(chan struct{}, 1)
		l.flusher.Add(1)
		go l.runVisibilitySyncer()
	}
	l.started = true
	l.startFlusherLocked()
	return nil
}

// Close syncs everything, seals the active segment, checkpoints and writes
// the clean-shutdown marker, so the next Open scans nothing. Readers holding
// chunks keep them; the files are closed when the last one is released.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed = true
	l.shut.Store(true)
	if !l.started {
		// Dormant: nothing was opened or written, and the marker the log
		// was opened with still describes its files. Or its opening
		// failed after removing the marker: the next Open recovers.
		l.mu.Unlock()
		l.wake()
		close(l.stop)
		if l.failed.Load() {
			return fmt.Errorf("cannot close cleanly: %w: %w", ErrFailed, *l.failErr.Load())
		}
		return nil
	}
	l.mu.Unlock()
	l.ckWriters.Wait()
	// Parked readers wake to find the log closed.
	l.wake()
	close(l.stop)
	l.flusher.Wait()
	// Nothing submits once closed is set (submitters hold mu), so the
	// queue can be closed; the maintainer seals what is queued and exits.
	close(l.maint.tasks)
	l.bg.Wait()

	l.mu.Lock()
	defer l.mu.Unlock()
	var err error
	if !l.failed.Load() {
		err = l.active.Seal()
		if err == nil && l.opts.Snapshot != nil {
			err = writeSnapshot(l.dir, l.leo, l.opts.Snapshot(l.leo), true)
		}
		if err == nil {
			l.active.Publish(l.active.Size())
			l.raiseHW(l.leo)
			l.sync.advance(l.leo)
			storeMax(&l.recoveryPoint, l.leo)
			if err = l.writeCheckpoints(); err == nil {
				err = fsutil.WriteFileAtomic(filepath.Join(l.dir, cleanShutdownFile), l.cleanShutdownStateLocked().encode())
				if err == nil {
					err = fsutil.SyncDir(l.dir)
				}
			}
		}
	} else {
		err = fmt.Errorf("cannot close cleanly: %w: %w", ErrFailed, *l.failErr.Load())
	}
	l.releaseSegmentsLocked()
	if l.recycle != nil {
		l.recycle.close()
	}
	return err
}

// writeCheckpoints persists the recovery point and log start offset. The
// recovery point may lag what is durable; that costs only a longer
// scan after a crash.
//
// A file whose value equals the one it last received (ckDurable) is not
// written again; the directory is synced whatever was written, as callers
// rely on it for their own entries (a Flush for a new segment's name).
func (l *Log) writeCheckpoints() error {
	l.ckMu.Lock()
	defer l.ckMu.Unlock()
	values := [2]int64{l.recoveryPoint.Load(), l.logStart.Load()}
	if values[1] != l.ckDurable[1] {
		// The snapshot of the segment holding the new log start goes to
		// disk (data and name) before the checkpoint that lets the next
		// open delete the segments below, with their snapshots: after a
		// machine crash it may be the only record of every producer seen
		// only below it. Here, under ckMu, whoever writes the checkpoint
		// (a log-start move, Flush, a seal, FinishRecovery): the start
		// moves in memory first, and any of them may persist it. (Without
		// this: one did, before the move's own sync.)
		if err := l.syncStartSnapshot(values[1]); err != nil {
			return err
		}
	}
	// The log start first: a crash between the two renames of a first
	// write in version 1 must not leave a Kafka-format log start beside a
	// version 1 recovery point, which Open takes for a foreign file.
	for _, i := range [2]int{1, 0} {
		name := [2]string{recoveryPointFile, logStartFile}[i]
		if values[i] == l.ckDurable[i] {
			continue
		}
		// Until the directory sync below succeeds, the file's value is not
		// known to be durable: a failure leaves it to be written again.
		l.ckDurable[i] = -1
		if err := writeCheckpoint(filepath.Join(l.dir, name), l.dir, values[i]); err != nil {
			return err
		}
	}
	// The renames reach the disk with the directory: without this a crash
	// could bring back an older log start after DeleteRecordsBefore
	// returned, or after retention deleted the files (on a filesystem
	// without a journal nothing orders the two).
	if err := fsutil.SyncDir(l.dir); err != nil {
		return err
	}
	l.ckDurable = values
	return nil
}

func listSegments(dir string) ([]int64, error) {
	return listSegmentsLogged(dir, slog.New(slog.DiscardHandler))
}

// listSegmentsLogged is listSegments, logging each file it removes.
func listSegmentsLogged(dir string, log *slog.Logger) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list partition dir: %w", err)
	}
	logs := map[int64]bool{}
	for _, e := range entries {
		name := e.Name()
		// Leftovers of interrupted deletions and stray temporary files go
		// first, as Kafka does at load.
		if strings.HasSuffix(name, ".deleted") || strings.HasSuffix(name, ".cleaned") ||
			strings.HasSuffix(name, ".swap") || strings.HasSuffix(name, ".tmp") {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return nil, fmt.Errorf("cannot remove stray file: %w", err)
			}
			log.Info("removed a leftover of an interrupted operation", "file", name)
			continue
		}
		if base, ok := segment.ParseName(name, ".log"); ok {
			logs[base] = true
		}
	}
	// Index files without a .log belong to nothing.
	for _, e := range entries {
		for _, suffix := range []string{".index", ".timeindex", ".txnindex"} {
			if base, ok := segment.ParseName(e.Name(), suffix); ok && !logs[base] {
				_ = os.Remove(filepath.Join(dir, e.Name()))
				log.Info("removed an index without its segment", "file", e.Name())
			}
		}
	}
	bases := make([]int64, 0, len(logs))
	for b := range logs {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

func deleteSegmentFiles(dir string, base int64) error {
	for _, suffix := range []string{".log", ".index", ".timeindex", ".txnindex", ".snapshot"} {
		if err := os.Remove(filepath.Join(dir, segment.FileName(base, suffix))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("cannot delete segment %d: %w", base, err)
		}
	}
	return nil
}

// writeSnapshot writes a producer-state snapshot image as
// <offset>.snapshot, atomically, and removes the stray ones: those at
// neither a segment's base nor the newest offset (Kafka's
// removeStraySnapshots). A segment's snapshot goes with the segment
// (deleteSegmentFiles), so one at or below any segment a recovery must
// replay stays as long as the segment does; keeping only the newest few
// lost every producer whose only trace was in older ones when a recovery
// started below them. With sync the file is durable when
// it returns; without, a roll's, the seal syncs it later. Under mu, or
// while the log is being opened.
func writeSnapshot(dir string, offset int64, image []byte, sync bool) error {
	path := filepath.Join(dir, segment.FileName(offset, ".snapshot"))
	write := fsutil.WriteFileNoSync
	if sync {
		write = fsutil.WriteFileAtomic
	}
	if err := write(path, image); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("cannot list snapshots: %w", err)
	}
	bases := map[int64]bool{}
	var snaps []int64
	for _, e := range entries {
		if off, ok := segment.ParseName(e.Name(), ".snapshot"); ok {
			snaps = append(snaps, off)
		} else if base, ok := segment.ParseName(e.Name(), ".log"); ok {
			bases[base] = true
		}
	}
	newest := slices.Max(snaps) // the one just written, at least
	for _, off := range snaps {
		if off == newest || bases[off] {
			continue
		}
		if err := os.Remove(filepath.Join(dir, segment.FileName(off, ".snapshot"))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("cannot remove stray snapshot: %w", err)
		}
	}
	return nil
}

// FinishRecovery, called by the log's owner once it has rebuilt what it
// keeps on top of a recovered log (the engine: producer state, and the
// aborted-transaction index entries of the segments Open scanned, from
// RecoveredFrom on), syncs those segments' indexes and moves the recovery
// point to the log end, so the next Open scans nothing it does not have
// to. Without it the recovery point moves with the first sync, as after
// any Open.
func (l *Log) FinishRecovery() error {
	l.mu.Lock()
	end := l.leo
	l.mu.Unlock()
	if l.recoveredFrom >= end {
		return nil
	}
	for _, s := range *l.segs.Load() {
		if s.NextOffset() > l.recoveredFrom {
			if err := s.SyncIndexes(); err != nil {
				return fmt.Errorf("cannot finish recovery of %s: %w", l.dir, err)
			}
		}
	}
	storeMax(&l.recoveryPoint, end)
	return l.writeCheckpoints()
}

// Abandon closes the log without declaring it clean: no seal, snapshot,
// checkpoint or clean-shutdown marker, so the next Open recovers it as
// after a crash. For an owner whose own recovery on top of the log failed
// (the engine's producer-state load): a clean Close would have the next
// Open trust, and never rebuild, what that recovery did not rebuild.
// (Without this: the aborted-transaction index and producer state were
// lost that way.)
func (l *Log) Abandon() {
	l.Kill()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseSegmentsLocked()
}

// releaseSegmentsLocked takes every segment off the log (under mu, once
// its background work has stopped): each file is closed when its last
// reader lets go.
func (l *Log) releaseSegmentsLocked() {
	segs := *l.segs.Load()
	empty := []*segRef{}
	l.segs.Store(&empty)
	for _, s := range segs {
		s.retire(false)
	}
}

// Kill stops the log's background work without doing any of it, syncing
// nothing and writing no marker, so the files stay exactly as a crash at
// this moment would leave them (the page cache aside). It exists for crash
// tests that reopen a directory in the same process; the log must not be
// used afterwards.
func (l *Log) Kill() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	l.shut.Store(true)
	started := l.started
	l.mu.Unlock()
	if !started {
		l.wake()
		close(l.stop)
		return
	}
	l.ckWriters.Wait()
	l.wake()
	if l.recycle != nil {
		// A reader that drops a retired segment's last reference later
		// must not rename files in a directory that may be reopened.
		l.recycle.close()
	}
	l.maint.drop.Store(true)
	close(l.stop)
	l.flusher.Wait()
	close(l.maint.tasks)
	l.bg.Wait()
}

// RecoveredFrom returns the base offset of the first segment Open had to
// scan and rebuild (its indexes, including the aborted-transaction index,
// were reset), or the log end after a clean shutdown. Producer state must
// be replayed from a snapshot at or below it.
func (l *Log) RecoveredFrom() int64 { return l.recoveredFrom }

// implausibleLogStart says why the log-start checkpoint cannot be right,
// or "" if it may be.
func implausibleLogStart(clean bool, rp, ls checkpoint) string {
	if ls.state != checkpointV0 && ls.state != checkpointV1 {
		return ""
	}
	if clean && (rp.state == checkpointV0 || rp.state == checkpointV1) && ls.offset > rp.offset {
		// Close checkpoints the log end as the recovery point, and the
		// log start never passes the log end.
		return "above the log end of a log closed cleanly"
	}
	if ls.state == checkpointV0 && rp.state == checkpointV1 {
		// writeCheckpoints writes both in version 1, the log start first.
		return "Kafka's unchecked format beside a checksummed recovery point: not written by this log"
	}
	return ""
}

// fileSizeOf returns the size of the file at path, 0 if it cannot be read.
func fileSizeOf(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// createEmptyFile creates path empty unless it exists; the caller syncs
// the directory.
func createEmptyFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("cannot create %s: %w", filepath.Base(path), err)
	}
	return f.Close()
}
