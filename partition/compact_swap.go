package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/internal/fsutil"
	"github.com/idemlog/idemlog/segment"
	"github.com/idemlog/idemlog/txnindex"
)

// segmentSuffixes are the files of a segment that a swap replaces (its
// producer snapshot, if any, stays: cleaning does not change producer
// state).
var segmentSuffixes = [...]string{".index", ".timeindex", ".txnindex", ".log"}

const (
	suffixCleaned = ".cleaned"
	suffixSwap    = ".swap"
	suffixDeleted = ".deleted"
)

// cleanGroup writes the cleaned copy of src (consecutive segments; the
// group ends at groupEnd, the next segment's base) and swaps it in.
func (c *cleaner) cleanGroup(src []*segRef, groupEnd, upper int64) error {
	l := c.log
	base := src[0].Base()
	var aborted []txnindex.Entry
	var size int64
	for i, s := range src {
		next := groupEnd
		if i+1 < len(src) {
			next = src[i+1].Base()
		}
		aborted = l.AbortedTxns(s.Base(), next, aborted)
		size += s.Published()
	}
	meta := newTxnMeta(aborted)
	l.cleanStep("copying")
	removeSuffixed(l.dir, base, suffixCleaned)
	opts := l.opts.Segment
	// Room for what the copy may add: a horizon rebuilds a batch with
	// longer timestamp deltas, and a codec's default level may compress
	// worse than the producer's. The seal trims the file.
	opts.MaxBytes = 2*size + 1<<20
	opts.NameSuffix = suffixCleaned
	opts.Mode = segment.WritePwrite
	opts.Reserve = segment.ReserveFallocate
	dst, err := segment.Create(l.dir, base, opts)
	if err != nil {
		return fmt.Errorf("cannot clean segment %d of %s: %w", base, l.dir, err)
	}
	fail := func(err error) error {
		_ = dst.Delete()
		return err
	}
	next := base
	var fill []byte
	write := func(p batch.Batch) error {
		if p.BaseOffset() > next {
			fill = filler(fill, next, p.BaseOffset()-1)
			if _, err := dst.Append(fill, next); err != nil {
				return err
			}
			c.stats.BytesWritten += int64(len(fill))
		}
		if _, err := dst.Append(p, p.BaseOffset()); err != nil {
			return err
		}
		c.stats.BytesWritten += int64(len(p))
		next = p.NextOffset()
		for _, e := range meta.kept {
			if err := dst.AppendAborted(e); err != nil {
				return err
			}
		}
		meta.kept = meta.kept[:0]
		return nil
	}
	for _, s := range src {
		data := s.Read(0, s.Published())
		c.stats.BytesRead += int64(len(data))
		it := batch.NewIter(data)
		for it.Next() {
			if c.stopped() {
				return fail(fmt.Errorf("cannot clean %s: %w", l.dir, ErrCleanAborted))
			}
			b := it.Batch()
			c.cfg.Throttle.wait(int64(len(b)))
			out, err := c.filterBatch(b, meta, upper)
			if err != nil {
				return fail(fmt.Errorf("cannot clean batch at offset %d of %s: %w", b.BaseOffset(), l.dir, err))
			}
			if out == nil {
				continue
			}
			c.cfg.Throttle.wait(int64(len(out)))
			if err := write(out); err != nil {
				return fail(fmt.Errorf("cannot write cleaned segment %d of %s: %w", base, l.dir, err))
			}
		}
		if err := it.Err(); err != nil {
			return fail(fmt.Errorf("cannot clean segment %d of %s: %w", s.Base(), l.dir, err))
		}
	}
	if next < groupEnd {
		fill = filler(fill, next, groupEnd-1)
		if _, err := dst.Append(fill, next); err != nil {
			return fail(fmt.Errorf("cannot write cleaned segment %d of %s: %w", base, l.dir, err))
		}
		c.stats.BytesWritten += int64(len(fill))
	}
	if err := dst.Seal(); err != nil {
		return fail(fmt.Errorf("cannot write cleaned segment %d of %s: %w", base, l.dir, err))
	}
	if err := dst.Close(); err != nil {
		return fail(fmt.Errorf("cannot write cleaned segment %d of %s: %w", base, l.dir, err))
	}
	// Retention by age reads a segment's file time when no batch has a
	// timestamp: the copy keeps the newest source's (Kafka does the same).
	last := filepath.Join(l.dir, segment.FileName(src[len(src)-1].Base(), ".log"))
	if fi, err := os.Stat(last); err == nil {
		_ = os.Chtimes(filepath.Join(l.dir, segment.FileName(base, ".log"+suffixCleaned)), fi.ModTime(), fi.ModTime())
	}
	return l.swapIn(src, base)
}

// swapIn replaces src, consecutive segments of the list, with the cleaned
// segment at base whose files carry the suffix .cleaned (Kafka's
// LocalLog.replaceSegments). On disk:
//
//  1. .cleaned -> .swap for each file, then a directory sync: the commit
//     point. Before it, an open deletes the .cleaned and .swap files (the
//     old segments stay); after it, an open completes the swap.
//  2. Under the writer's lock: each old segment's files -> .deleted, a
//     directory sync, then .swap -> the final names, and the segment list
//     switched. The sync between the two keeps a power loss from keeping
//     a new name while losing an old segment's rename: the old segment
//     would then lie inside the new one's offsets with no .swap left to
//     say so.
//  3. A directory sync, then the .deleted files are removed.
//
// Readers holding an old segment keep its mapping; its files are closed
// when the last of them lets go.
func (l *Log) swapIn(src []*segRef, base int64) error {
	discard := func() {
		removeSuffixed(l.dir, base, suffixCleaned)
		removeSuffixed(l.dir, base, suffixSwap)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		discard()
		return fmt.Errorf("cannot swap cleaned segment %d of %s: %w", base, l.dir, ErrCleanAborted)
	}
	segs := *l.segs.Load()
	at := -1
	for i, s := range segs {
		if s == src[0] {
			at = i
			break
		}
	}
	if at < 0 || at+len(src) > len(segs)-1 {
		l.mu.Unlock()
		discard()
		return fmt.Errorf("cannot swap cleaned segment %d of %s: retention removed its sources: %w", base, l.dir, ErrCleanAborted)
	}
	for k, s := range src {
		if segs[at+k] != s {
			l.mu.Unlock()
			discard()
			return fmt.Errorf("cannot swap cleaned segment %d of %s: %w", base, l.dir, ErrCleanAborted)
		}
	}
	l.cleaner.swapping, l.cleaner.swapFrom = true, base
	l.ckWriters.Add(1)
	l.mu.Unlock()
	defer l.ckWriters.Done()
	clearSwap := func() {
		l.mu.Lock()
		l.cleaner.swapping = false
		l.mu.Unlock()
	}

	l.cleanStep("cleaned")
	for i, suf := range segmentSuffixes {
		from := filepath.Join(l.dir, segment.FileName(base, suf+suffixCleaned))
		if err := os.Rename(from, filepath.Join(l.dir, segment.FileName(base, suf+suffixSwap))); err != nil {
			clearSwap()
			discard()
			return fmt.Errorf("cannot swap cleaned segment %d of %s: %w", base, l.dir, segment.IOError(err))
		}
		if i == 0 {
			l.cleanStep("swap-partial")
		}
	}
	if err := fsutil.SyncDir(l.dir); err != nil {
		// The renames may or may not be durable: an open decides. In
		// memory nothing changed.
		clearSwap()
		return fmt.Errorf("cannot swap cleaned segment %d of %s: %w", base, l.dir, err)
	}
	l.cleanStep("swapped")

	l.mu.Lock()
	err := l.switchLocked(src, base)
	l.cleaner.swapping = false
	l.mu.Unlock()
	if err != nil {
		// The disk holds the swap (committed above); the old segments
		// still serve reads, but the files under them changed names: the
		// log refuses appends until an open completes the swap.
		l.fail(err)
		return err
	}
	if err := fsutil.SyncDir(l.dir); err != nil {
		return fmt.Errorf("cannot swap cleaned segment %d of %s: %w", base, l.dir, err)
	}
	l.cleanStep("done")
	for _, s := range src {
		removeSuffixed(l.dir, s.Base(), suffixDeleted)
		s.retire(false)
	}
	return nil
}

// switchLocked is step 2 of swapIn, under mu.
func (l *Log) switchLocked(src []*segRef, base int64) error {
	for i, s := range src {
		for _, suf := range segmentSuffixes {
			from := filepath.Join(l.dir, segment.FileName(s.Base(), suf))
			if err := os.Rename(from, from+suffixDeleted); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("cannot swap cleaned segment %d of %s: %w", base, l.dir, segment.IOError(err))
			}
		}
		if i == 0 {
			l.cleanStep("deleted-partial")
		}
	}
	if err := fsutil.SyncDir(l.dir); err != nil {
		return fmt.Errorf("cannot swap cleaned segment %d of %s: %w", base, l.dir, err)
	}
	l.cleanStep("deleted")
	for i, suf := range segmentSuffixes {
		to := filepath.Join(l.dir, segment.FileName(base, suf))
		if err := os.Rename(to+suffixSwap, to); err != nil {
			return fmt.Errorf("cannot swap cleaned segment %d of %s: %w", base, l.dir, segment.IOError(err))
		}
		if i == 0 {
			l.cleanStep("final-partial")
		}
	}
	s, err := segment.Open(l.dir, base, l.opts.Segment, false)
	if err != nil {
		return fmt.Errorf("cannot open cleaned segment %d of %s: %w", base, l.dir, err)
	}
	if err := s.LoadTail(); err != nil {
		_ = s.Close()
		return fmt.Errorf("cannot open cleaned segment %d of %s: %w", base, l.dir, err)
	}
	s.Publish(s.Size())
	// Retention may have taken segments below the group off the list
	// meanwhile (never the group's: detachableLocked).
	segs := *l.segs.Load()
	at := 0
	for at < len(segs) && segs[at] != src[0] {
		at++
	}
	if at+len(src) >= len(segs) {
		panic("BUG: a segment being swapped left the list")
	}
	next := make([]*segRef, 0, len(segs)-len(src)+1)
	next = append(next, segs[:at]...)
	next = append(next, l.ref(s))
	next = append(next, segs[at+len(src):]...)
	l.segs.Store(&next)
	return nil
}

// removeSuffixed removes the files of the segment at base that carry
// suffix after their usual name.
func removeSuffixed(dir string, base int64, suffix string) {
	for _, suf := range segmentSuffixes {
		_ = os.Remove(filepath.Join(dir, segment.FileName(base, suf+suffix)))
	}
}

// recoverSwaps finishes or rolls back a swap a crash interrupted (Kafka's
// LogLoader): it runs first at every open, before the segments are listed.
//
//   - .deleted files are removed: their swap reached step 2.
//   - If any .cleaned file remains, the swap of its group did not reach
//     its commit point: that group's .swap files (at or above the
//     smallest .cleaned base) and every .cleaned file are removed.
//   - Each remaining .log.swap covers [its base, the offset after its last
//     batch): the segment files in that range are the ones it replaces and
//     are removed (after a directory sync, so that no rename below can
//     become durable without them), then every .swap file is renamed to
//     its final name.
func recoverSwaps(dir string, log *slog.Logger) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("cannot list partition dir: %w", err)
	}
	minCleaned := int64(-1)
	var swaps []string
	changed := false
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, suffixDeleted):
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("cannot remove %s: %w", name, err)
			}
			log.Info("removed a segment file a cleaning replaced", "file", name)
			changed = true
		case strings.HasSuffix(name, suffixCleaned):
			if b, ok := parseSuffixed(name, suffixCleaned); ok && (minCleaned < 0 || b < minCleaned) {
				minCleaned = b
			}
		case strings.HasSuffix(name, suffixSwap):
			swaps = append(swaps, name)
		}
	}
	if minCleaned >= 0 {
		kept := swaps[:0]
		for _, name := range swaps {
			if b, ok := parseSuffixed(name, suffixSwap); ok && b >= minCleaned {
				if err := os.Remove(filepath.Join(dir, name)); err != nil {
					return fmt.Errorf("cannot remove %s: %w", name, err)
				}
				log.Info("rolled back a cleaning cut short before its swap", "file", name)
				continue
			}
			kept = append(kept, name)
		}
		swaps = kept
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), suffixCleaned) {
				if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
					return fmt.Errorf("cannot remove %s: %w", e.Name(), err)
				}
			}
		}
		changed = true
	}
	if len(swaps) > 0 {
		for _, name := range swaps {
			if !strings.HasSuffix(name, ".log"+suffixSwap) {
				continue
			}
			from, _ := parseSuffixed(name, suffixSwap)
			to, err := nextOffsetOf(filepath.Join(dir, name), from)
			if err != nil {
				return err
			}
			for _, e := range entries {
				for _, suf := range segmentSuffixes {
					if b, ok := segment.ParseName(e.Name(), suf); ok && b >= from && b < to {
						if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
							return fmt.Errorf("cannot remove %s: %w", e.Name(), err)
						}
						log.Info("removed a segment file a cleaning replaced", "file", e.Name(), "cleaned", name)
					}
				}
			}
		}
		if err := fsutil.SyncDir(dir); err != nil {
			return err
		}
		for _, name := range swaps {
			final := strings.TrimSuffix(name, suffixSwap)
			if err := os.Rename(filepath.Join(dir, name), filepath.Join(dir, final)); err != nil {
				return fmt.Errorf("cannot complete a cleaning's swap: %w", err)
			}
			log.Info("completed a cleaning's swap cut short by a crash", "file", final)
		}
		changed = true
	}
	if changed {
		return fsutil.SyncDir(dir)
	}
	return nil
}

// RecoverSwaps finishes or rolls back, in the partition directory dir,
// the swap of a cleaning that a crash cut short, as Open does before
// anything else (recoverSwaps): for tools that inspect a crash image
// whose segment files are only consistent once that is done. It reports
// what it does on log (nil: nothing).
func RecoverSwaps(dir string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return recoverSwaps(dir, log)
}

// parseSuffixed parses "<base><segment suffix><suffix>".
func parseSuffixed(name, suffix string) (int64, bool) {
	name = strings.TrimSuffix(name, suffix)
	for _, suf := range segmentSuffixes {
		if b, ok := segment.ParseName(name, suf); ok {
			return b, true
		}
	}
	return 0, false
}

// nextOffsetOf walks the batch headers of a segment file and returns the
// offset after its last whole batch.
func nextOffsetOf(path string, base int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("cannot open %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("cannot stat %s: %w", filepath.Base(path), err)
	}
	next := base
	var hdr [27]byte
	for pos := int64(0); pos+batch.HeaderSize <= st.Size(); {
		if _, err := f.ReadAt(hdr[:], pos); err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("cannot read %s: %w", filepath.Base(path), err)
		}
		length := int64(binary.BigEndian.Uint32(hdr[8:])) + batch.LogOverhead
		if length < batch.HeaderSize || pos+length > st.Size() {
			break
		}
		next = int64(binary.BigEndian.Uint64(hdr[0:])) + int64(int32(binary.BigEndian.Uint32(hdr[23:]))) + 1
		pos += length
	}
	return next, nil
}
