package partition

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idemlog/idemlog/internal/fsutil"
	"github.com/idemlog/idemlog/segment"
)

// A dormant log (Options.Lazy) is one opened after a clean shutdown whose
// segments have not been opened yet: Open read the clean-shutdown marker,
// the checkpoints and the directory listing, and nothing else. It holds
// no descriptor, no mapping and no goroutine. Its offsets, log start and
// high watermark are in place, so that metadata, an empty fetch at the
// log end, producer-state loading from the snapshot at the log end and a
// retention pass with nothing to delete all answer without the files; the
// first operation that needs a segment (an append, a read below the high
// watermark, a lookup by time, DeleteRecordsBefore, a retention pass that
// deletes) opens them (awaken) exactly as an eager Open would, removing
// the marker before anything is written.
//
// What makes this correct is that a dormant log changes nothing on disk:
// the marker it was opened with still describes every file, so its Close
// has nothing to write, and a crash leaves the directory as clean as the
// last Close did.

// cleanShutdownState is the content of the clean-shutdown marker: what a
// dormant Open needs to know about the log without opening its segments.
// Kafka's own marker (per log directory) is empty or carries a broker
// epoch; idemlog's is per partition and carries this, as JSON, with a
// CRC-32C of the rest so that a damaged marker reads as none (the log then
// opens eagerly, which trusts only the marker's presence, as before).
type cleanShutdownState struct {
	Version int `json:"version"`
	// LogEndOffset is the offset after the last batch.
	LogEndOffset int64 `json:"logEndOffset"`
	// FirstSegmentBytes and FirstSegmentMaxTimestamp describe the first
	// segment, the one retention would delete first (-1: no timestamp);
	// TotalBytes is every segment's size together.
	FirstSegmentBytes        int64  `json:"firstSegmentBytes"`
	FirstSegmentMaxTimestamp int64  `json:"firstSegmentMaxTimestamp"`
	TotalBytes               int64  `json:"totalBytes"`
	CRC                      uint32 `json:"crc"`
}

const cleanShutdownVersion = 1

func (c cleanShutdownState) checksum() uint32 {
	c.CRC = 0
	b, _ := json.Marshal(c)
	return crc32.Checksum(b, castagnoli)
}

// encode returns the marker's bytes.
func (c cleanShutdownState) encode() []byte {
	c.Version = cleanShutdownVersion
	c.CRC = c.checksum()
	b, _ := json.Marshal(c)
	return append(b, '\n')
}

// readCleanShutdown reads the marker; ok is false when there is none or
// it carries no usable state (empty, an older format, damaged).
func readCleanShutdown(dir string) (st cleanShutdownState, ok bool, err error) {
	data, err := fsutil.ReadFileMax(filepath.Join(dir, cleanShutdownFile), 4096)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fsutil.ErrFileTooLarge) {
		return st, false, nil
	}
	if err != nil {
		return st, false, fmt.Errorf("cannot read clean-shutdown marker: %w", err)
	}
	if json.Unmarshal(data, &st) != nil || st.Version != cleanShutdownVersion || st.CRC != st.checksum() ||
		st.LogEndOffset < 0 || st.FirstSegmentBytes < 0 || st.TotalBytes < st.FirstSegmentBytes {
		return st, false, nil
	}
	return st, true, nil
}

// openDormant opens the log without its segments if it was closed cleanly
// and the marker says enough (see cleanShutdownState); ok is false when
// it must be opened eagerly.
//
// A directory with no segment and no snapshot, as the engine creates a
// partition, is dormant too, marker or not: the log is empty at its log
// start (0 without a checkpoint), which is what an eager Open would make
// of it, creating the first segment; a dormant one creates it at the
// first append. No crash leaves a log without a segment once it had one:
// a roll makes the next segment before the old one can go.
func (l *Log) openDormant() (ok bool, err error) {
	// One listing says which files there are: only those are read.
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return false, fmt.Errorf("cannot list partition dir: %w", err)
	}
	var bases []int64
	var marker, rpFile, lsFile, segmentFiles bool
	// have counts each segment's files; logBytes adds up the .log sizes.
	have := map[int64]int{}
	var logBytes int64
	for _, e := range ents {
		name := e.Name()
		for _, suffix := range []string{".log", ".index", ".timeindex", ".txnindex"} {
			if base, ok := segment.ParseName(name, suffix); ok {
				have[base]++
				if suffix == ".log" {
					info, err := e.Info()
					if err != nil {
						return false, nil // the eager open says what is wrong
					}
					logBytes += info.Size()
				}
			}
		}
		switch {
		case name == cleanShutdownFile:
			marker = true
		case name == recoveryPointFile:
			rpFile = true
		case name == logStartFile:
			lsFile = true
		case strings.HasSuffix(name, ".deleted") || strings.HasSuffix(name, ".cleaned") ||
			strings.HasSuffix(name, ".swap") || strings.HasSuffix(name, ".tmp"):
			return false, nil // leftovers: the eager open removes them
		default:
			if base, ok := segment.ParseName(name, ".log"); ok {
				bases = append(bases, base)
			}
			for _, suffix := range []string{".log", ".index", ".timeindex", ".txnindex", ".snapshot"} {
				if strings.HasSuffix(name, suffix) {
					segmentFiles = true
				}
			}
		}
	}
	slices.Sort(bases)
	var st cleanShutdownState
	if marker {
		if st, ok, err = readCleanShutdown(l.dir); err != nil || !ok {
			return false, err
		}
		// The files must be as Close left them, down to the sizes (Close
		// cuts each .log to its data) and every segment's four files:
		// a damaged or lost one (a .log cut short, a .txnindex deleted)
		// is found and repaired by the eager open, whose recovery the
		// owner follows with its replay of producer state and markers
		// (which a first use much later could not be).
		for _, b := range bases {
			if have[b] != 4 {
				return false, nil
			}
		}
		if logBytes != st.TotalBytes {
			return false, nil
		}
	} else if segmentFiles {
		return false, nil
	} else {
		st = cleanShutdownState{FirstSegmentMaxTimestamp: -1, LogEndOffset: -1}
		l.fresh = true
	}
	var recoveryPoint, logStart int64
	if rpFile {
		if recoveryPoint, err = readCheckpoint(filepath.Join(l.dir, recoveryPointFile)); err != nil {
			return false, err
		}
	}
	if lsFile {
		if logStart, err = readCheckpoint(filepath.Join(l.dir, logStartFile)); err != nil {
			return false, err
		}
	}
	leo := st.LogEndOffset
	if leo < 0 {
		leo = logStart // a fresh directory: empty at its log start
	}
	switch {
	case len(bases) > 1 && bases[1] <= logStart:
		// Segments a retention's deletion left behind: the eager open
		// deletes them.
		return false, nil
	case len(bases) == 0 && (leo != logStart || st.TotalBytes != 0):
		return false, nil
	case len(bases) > 0 && (bases[len(bases)-1] > leo || logStart > leo || recoveryPoint > leo):
		return false, nil
	}
	if st.LogEndOffset >= 0 {
		// Clean: the files read as what Close made durable (see openFiles).
		l.ckDurable = [2]int64{recoveryPoint, logStart}
	}
	l.setDormant(st, bases, leo, logStart)
	return true, nil
}

// setDormant leaves the log dormant, ending at leo, with the segments
// bases (none: the first is created at the first append) and its log
// start checkpointed at logStart.
func (l *Log) setDormant(st cleanShutdownState, bases []int64, leo, logStart int64) {
	first := logStart
	if len(bases) > 0 {
		first = bases[0]
	}
	l.leo = leo
	l.written.Store(leo)
	l.hw.Store(leo)
	l.logStart.Store(max(logStart, first))
	l.recoveredFrom = leo
	l.recoveryPoint.Store(leo)
	l.sync.durable = leo
	l.dormantState = st
	l.dormantBases = bases
	l.dormant.Store(true)
}

// awaken opens a dormant log's segments (openFiles), once; nil for a log
// that is not dormant. A failure before the marker was removed leaves
// the log dormant and unchanged on disk, so that a later call tries again
// (descriptors may have run out for now: EMFILE). One after it fails the
// log: what openFiles half did (a recovery that reset an
// aborted-transaction index, say) needs the owner's rebuild of a real
// reopen, which a retry here would skip.
func (l *Log) awaken() error {
	if !l.dormant.Load() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.awakenLocked()
}

func (l *Log) awakenLocked() error {
	if !l.dormant.Load() {
		return nil
	}
	if l.closed {
		return ErrClosed
	}
	want := l.leo
	if err := l.openFiles(); err != nil {
		if l.markerGone {
			l.dormant.Store(false)
			l.fail(err)
			return fmt.Errorf("cannot open partition %s: %w: %w", l.dir, ErrFailed, err)
		}
		return fmt.Errorf("cannot open partition %s: %w", l.dir, err)
	}
	l.dormant.Store(false)
	l.dormantBases = nil
	if l.leo != want {
		// The segments disagree with the marker that described them at
		// Close: the files changed behind the log's back. Nothing more is
		// written; the next Open (the marker is gone) recovers.
		err := fmt.Errorf("cannot open partition %s: its segments end at offset %d, its clean-shutdown marker at %d: %w", l.dir, l.leo, want, ErrFailed)
		l.fail(err)
		return err
	}
	return nil
}

// retentionDueDormant reports whether a retention pass over a dormant log
// could delete anything (the tests of ApplyRetention, on what the marker
// recorded): if not, the pass leaves the log dormant.
func (l *Log) retentionDueDormant() bool {
	st, bases := l.dormantState, l.dormantBases
	if len(bases) == 0 || st.TotalBytes == 0 {
		return false
	}
	if len(bases) > 1 && bases[1] <= l.logStart.Load() {
		return true
	}
	if l.opts.RetentionBytes > 0 && len(bases) > 1 && st.TotalBytes-st.FirstSegmentBytes >= l.opts.RetentionBytes {
		return true
	}
	if l.opts.RetentionAge <= 0 || st.FirstSegmentBytes == 0 {
		return false
	}
	// No timestamp: ApplyRetention falls back on the file's time.
	ts := st.FirstSegmentMaxTimestamp
	return ts < 0 || l.opts.Now().UnixMilli()-ts > l.opts.RetentionAge.Milliseconds()
}

// Fresh reports whether the log opened dormant from a directory that held
// no segment, snapshot or clean-shutdown marker (a partition never
// written): its owner has no producer state to look for.
func (l *Log) Fresh() bool { return l.fresh }

// Dormant reports whether the log's segments are still unopened (see
// Options.Lazy).
func (l *Log) Dormant() bool { return l.dormant.Load() }

// cleanShutdownStateLocked describes the log as Close leaves it (under mu,
// background work stopped).
func (l *Log) cleanShutdownStateLocked() cleanShutdownState {
	st := cleanShutdownState{LogEndOffset: l.leo, FirstSegmentMaxTimestamp: -1}
	segs := *l.segs.Load()
	for i, s := range segs {
		st.TotalBytes += s.Size()
		if i == 0 {
			st.FirstSegmentBytes = s.Size()
			st.FirstSegmentMaxTimestamp, _ = s.MaxTimestamp()
		}
	}
	return st
}
