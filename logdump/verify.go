//go:build linux

package logdump

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/idemlog/idemlog/internal/fsutil"
	"github.com/idemlog/idemlog/partition"
	"github.com/idemlog/idemlog/segment"
)

// VerifyOptions control Verify.
type VerifyOptions struct {
	// MaxBatchSize is the largest batch accepted, in bytes. 0 means
	// DefaultMaxBatchSize.
	MaxBatchSize int
}

// VerifySummary totals what Verify checked.
type VerifySummary struct {
	Partitions int   // partition directories walked
	Segments   int   // .log files that passed
	Batches    int64 // in the files that passed
	Records    int64
	Bytes      int64 // of batches; zero tails are not counted
	// Skipped counts the offsets missing between batches, within and
	// across segments: gaps that Kafka's compaction leaves.
	Skipped int64
	// Notes counts what was accepted but reported: zero tails of active
	// segments of logs not closed cleanly, and .log files in a partition
	// directory that are no part of its log.
	Notes int
	// Repairable counts crash images that the next open repairs: a torn
	// tail of the last segment of a log not closed cleanly (recovery cuts
	// it: those bytes were never synced) and .txnindex entries whose
	// markers that tail took (recovery rebuilds the index). They are not
	// corruption; Verify returns no error for them.
	Repairable int
}

// Add adds o's counts to s, to total several Verify calls.
func (s *VerifySummary) Add(o VerifySummary) {
	s.Partitions += o.Partitions
	s.Segments += o.Segments
	s.Batches += o.Batches
	s.Records += o.Records
	s.Bytes += o.Bytes
	s.Skipped += o.Skipped
	s.Notes += o.Notes
	s.Repairable += o.Repairable
}

// Verify checks the segments at path without modifying anything, writing
// one line per file to w, and returns what it checked. path is a data
// directory (a directory whose subdirectories are partition directories),
// a partition directory (a directory holding .log files), or a single
// segment file of any name; an .index or .timeindex path stands for the
// segment it indexes.
//
// Each segment is checked with segment.VerifyFile: every batch, and the
// indexes beside it. Across a partition's segments, in base-offset order,
// each base must be at or above the offset where the previous segment
// ended; gaps are counted in VerifySummary.Skipped. A tail past the
// batches, all zeros or an older segment's batches (a recycled file,
// segment.Recycle), is accepted, as a note, only in a log that was not
// closed cleanly, on its last segment (the unfinished active one) or on a
// segment whose batches reach the next one's base exactly (rolled, not yet
// sealed); opening the partition recovers both. Anywhere else it is
// corruption.
//
// The first bad file ends the walk: the error names it and the byte
// position or index entry, and is also written to w on an "error:" line.
func Verify(w io.Writer, path string, opts VerifyOptions) (VerifySummary, error) {
	v := &verifier{w: w, maxBatch: opts.MaxBatchSize}
	if v.maxBatch <= 0 {
		v.maxBatch = DefaultMaxBatchSize
	}
	err := v.path(path)
	if err != nil {
		v.printf("error: %v\n", err)
	}
	if v.writeErr != nil {
		return v.sum, fmt.Errorf("cannot write verify report: %w", v.writeErr)
	}
	return v.sum, err
}

type verifier struct {
	w        io.Writer
	maxBatch int
	sum      VerifySummary
	writeErr error
	// repairable counts the crash images file found in the segment it
	// checked last, for the caller's summary.
	repairable int
}

func (v *verifier) path(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("cannot verify: %w", err)
	}
	if !st.IsDir() {
		return v.single(path)
	}
	segs, others, err := listLogs(path)
	if err != nil {
		return err
	}
	if len(segs)+len(others) > 0 || hasSwapLog(path) {
		return v.logDir(path, segs, others)
	}
	if v.emptyPartition(path) {
		return nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return fmt.Errorf("cannot list %s: %w", path, err)
	}
	found := false
	for _, e := range entries {
		dir := filepath.Join(path, e.Name())
		// Stat, not e.IsDir: a partition directory may be a symlink.
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue
		}
		segs, others, err := listLogs(dir)
		if err != nil {
			return err
		}
		// A directory without .log files is something else kept in the
		// data directory, not a partition, unless it is a partition
		// nothing was appended to yet.
		if len(segs)+len(others) == 0 && !hasSwapLog(dir) {
			if v.emptyPartition(dir) {
				found = true
			}
			continue
		}
		found = true
		if err := v.logDir(dir, segs, others); err != nil {
			return err
		}
	}
	if !found {
		return fmt.Errorf("cannot verify %s: no .log files in it or in its subdirectories", path)
	}
	return nil
}

// emptyPartition reports (and counts) a partition directory without
// segments: the engine creates a partition with its partition.metadata
// and nothing else, and its first segment at its first append.
func (v *verifier) emptyPartition(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "partition.metadata")); err != nil {
		return false
	}
	v.sum.Partitions++
	v.printf("%s: partition of 0 segments, nothing appended yet\n", dir)
	return true
}

// logDir verifies a directory holding .log files: a partition directory
// if any is named as a segment, else a directory of unrelated segments
// (such as testdata/), each checked on its own.
func (v *verifier) logDir(dir string, segs []segmentFile, others []string) error {
	if len(segs) > 0 || hasSwapLog(dir) {
		return v.partition(dir, segs, others)
	}
	for _, path := range others {
		if err := v.single(path); err != nil {
			return err
		}
	}
	return nil
}

// single verifies one file on its own.
func (v *verifier) single(path string) error {
	for _, suffix := range []string{".index", ".timeindex"} {
		if stem, ok := strings.CutSuffix(path, suffix); ok {
			path = stem + ".log"
		}
	}
	dir := filepath.Dir(path)
	// Its zero tail is acceptable only if it is the partition's last
	// segment; a file not named as a segment is not part of a partition.
	last := true
	if base, ok := parseBase(filepath.Base(path), ".log"); ok {
		segs, _, err := listLogs(dir)
		if err != nil {
			return err
		}
		last = len(segs) == 0 || segs[len(segs)-1].base <= base
	}
	r, err := v.file(path, last && !closedCleanly(dir), -1)
	if err != nil {
		return err
	}
	one := summaryOf(r)
	one.Repairable = v.repairable
	v.repairable = 0
	v.sum.Add(one)
	return nil
}

// partition verifies a partition directory's segments and the continuity
// of offsets across them.
func (v *verifier) partition(dir string, segs []segmentFile, others []string) error {
	clean := closedCleanly(dir)
	segs, err := v.segmentsAfterOpen(dir, segs)
	if err != nil {
		return err
	}
	// A compacted topic's log has gaps wherever the cleaner removed
	// records: between batches, before a segment's first batch, after its
	// last. The active segment is never cleaned (LogCleanerManager's
	// cleanable range ends below it).
	compacted, err := topicCompacted(dir)
	if err != nil {
		return err
	}
	// An idemlog partition not closed cleanly has its segments from the
	// recovery point on recovered by the next open, which takes a batch
	// that does not follow its predecessor (a gap, or a first batch above
	// the segment's base) for the end of the data and cuts there: such a
	// gap is a loss to come, not a compaction gap. (Without this: verify
	// passed a log whose open then dropped batches.) idemlog keeps its
	// recovery-point checkpoint in the partition directory, Kafka in the
	// log directory above, whose compacted partitions may have gaps.
	recoverFrom := int64(-1)
	if rp, ok := idemlogRecoveryPoint(dir); ok && !clean {
		recoverFrom = rp
	}
	rp, ls, idemlog, err := checkpoints(dir)
	if err != nil {
		return err
	}
	var sum VerifySummary
	first, next := int64(-1), int64(-1)
	var prev string
	for i, s := range segs {
		if next >= 0 && s.base < next {
			return fmt.Errorf("%s: base offset %d overlaps %s, which ends below offset %d: %w",
				s.path, s.base, filepath.Base(prev), next, segment.ErrVerify)
		}
		nextBase := int64(-1)
		if i+1 < len(segs) {
			nextBase = segs[i+1].base
		}
		// The next open scans this segment (partition.Open: not closed
		// cleanly, and the next segment starts above the recovery point),
		// so a torn or zero tail is what it cuts, as in the last segment.
		recovered := recoverFrom >= 0 && (nextBase < 0 || nextBase > recoverFrom)
		scanned := !clean && (i == len(segs)-1 || recovered && !compacted)
		r, err := v.file(s.path, scanned, nextBase)
		if err != nil {
			return err
		}
		txnMissing := rp.Version == 1 && !s.swap() && !fsutil.Exists(strings.TrimSuffix(s.path, ".log")+".txnindex")
		if txnMissing && scanned {
			// A segment the next open scans gets its index rebuilt from
			// its markers; a power cut can keep a rolled segment's .log
			// and lose its .txnindex, created beside it but not synced.
			v.printf("repairable: %s.txnindex: missing in a segment the next open scans, which rebuilds it from the segment's markers\n",
				strings.TrimSuffix(s.path, ".log"))
			v.repairable++
		} else if txnMissing {
			// Every segment of a log checkpointed in version 1 has one;
			// without it read_committed readers take aborted records for
			// committed ones (the next open rebuilds it from the markers).
			return fmt.Errorf("%s.txnindex: missing: the segment's aborted transactions are not indexed, and read_committed readers would see their records: %w",
				strings.TrimSuffix(s.path, ".log"), segment.ErrVerify)
		}
		start := r.FirstOffset
		if start < 0 {
			start = r.Base
		}
		if idemlog && !compacted && next >= 0 && start > next {
			// idemlog leaves gaps between segments only where it
			// compacts: in a topic that is not compacted, one is data a
			// damaged segment lost.
			return fmt.Errorf("%s: offsets %d..%d missing before it: %s ends there, and an idemlog log whose topic is not compacted has no gaps, so those records were lost: %w",
				s.path, next, start, filepath.Base(prev), segment.ErrVerify)
		}
		if recovered && (r.Gaps > 0 || start > r.Base) && (!compacted || i == len(segs)-1) {
			return fmt.Errorf("%s: %s in a segment that opening the partition recovers (from offset %d), which cuts the log at the first: %w",
				s.path, skipped(r.Gaps+start-r.Base), recoverFrom, segment.ErrVerify)
		}
		one := summaryOf(r)
		if first < 0 {
			first = start
		} else {
			one.Skipped += start - next
		}
		// The totals take each segment as it passes, so that they say how
		// far the check got when a later one fails.
		one.Repairable = v.repairable
		v.repairable = 0
		sum.Add(one)
		v.sum.Add(one)
		next, prev = r.NextOffset, s.path
		if recovered && !compacted && nextBase >= 0 && r.NextOffset != nextBase {
			// A segment rolled but not yet synced when the power went (a
			// sync policy other than always): its batches stop short of
			// the next segment's base, and everything after them sits
			// above the recovery point, never known durable. The next open
			// cuts the log there and deletes the later segments, as
			// Kafka's recovery drops what follows a torn batch.
			v.printf("repairable: %s: its batches end at offset %d, below the next segment's base %d: the crash took the rest, and the next open deletes the %s after it (offsets from %d on, above the recovery point %d, were not yet durable)\n",
				s.path, r.NextOffset, nextBase, count(int64(len(segs)-i-1), "segment", "segments"), r.NextOffset, recoverFrom)
			v.sum.Repairable++
			segs = segs[:i+1]
			break
		}
	}
	if idemlog && next >= 0 {
		// The recovery point is at most what was durable (the log end at a
		// clean close); the log start never passes a cleanly closed end.
		if rp.Version >= 0 && rp.Offset > next && (clean || rp.Version == 1) {
			return fmt.Errorf("%s: offsets %d..%d are missing at the end of the log: its recovery point, %d, says they were durable, so those records were lost: %w",
				filepath.Join(dir, "recovery-point-offset-checkpoint"), next, rp.Offset, rp.Offset, segment.ErrVerify)
		}
		if clean && ls.Version >= 0 && ls.Offset > next {
			return fmt.Errorf("%s: log start %d past the log end %d of a log closed cleanly: not a value the log wrote: %w",
				filepath.Join(dir, "log-start-offset-checkpoint"), ls.Offset, next, segment.ErrVerify)
		}
	}
	v.sum.Partitions++
	v.printf("%s: partition of %s, %s, %s, %d bytes", dir, count(int64(len(segs)), "segment", "segments"),
		count(sum.Batches, "batch", "batches"), count(sum.Records, "record", "records"), sum.Bytes)
	v.printf(", offsets %d..%d", first, next)
	state := "closed cleanly"
	if !clean {
		state = "not closed cleanly"
	}
	if compacted {
		state += ", compacted topic"
	}
	v.printf(", %s, %s\n", skipped(sum.Skipped), state)
	for _, path := range others {
		v.printf("note: %s is not named <20-digit base offset>.log, so it is no part of the log; checking it on its own\n", path)
		v.sum.Notes++
		if err := v.single(path); err != nil {
			return err
		}
	}
	return nil
}

// file verifies one segment and prints its line. tailOK says whether the
// segment may run on past its batches (zeros, or a recycled file's stale
// batches): the active segment of a log that was not closed cleanly. So
// may a rolled one of such a log that the crash left unsealed, which
// shows in its batches reaching nextBase (-1: none) exactly.
func (v *verifier) file(path string, tailOK bool, nextBase int64) (segment.Report, error) {
	verify := segment.VerifyFile
	if strings.HasSuffix(path, ".log"+swapSuffix) {
		verify = segment.VerifySwapFile
	}
	r, err := verify(path, v.maxBatch)
	if err != nil && r.TornAt >= 0 && tailOK {
		// The last segment of a log not closed cleanly: a batch torn by
		// the crash, never synced, which recovery cuts. The batches
		// before it are sound; the indexes are rebuilt by that recovery.
		v.printf("repairable: %s: unclean tail that recovery will cut (%d bytes, from position %d): %v\n",
			path, r.Bytes-r.TornAt, r.TornAt, err)
		v.repairable++
		r.Bytes, r.ZeroTail, r.StaleTail = r.TornAt, 0, 0
		r.IndexEntries, r.TimeEntries = -1, -1
		err = nil
	}
	if errors.Is(err, segment.ErrTxnPastEnd) && tailOK {
		err = nil
	}
	if err != nil && errors.Is(err, segment.ErrIndexMismatch) && tailOK {
		// The indexes of the last segment of a log not closed cleanly
		// may hold entries for batches the crash took (they are written
		// with the data, not synced before it): recovery scans the
		// segment and rebuilds them.
		v.printf("repairable: %s: index that recovery rebuilds: %v\n", path, err)
		v.repairable++
		r.IndexEntries, r.TimeEntries = -1, -1
		err = nil
	}
	if err != nil {
		return r, withDir(path, err)
	}
	if r.TxnPastEnd > 0 {
		// Only here, in the last segment of a log not closed cleanly: the
		// entries were written before the crash took their markers.
		v.printf("repairable: %s.txnindex: %d entries whose abort markers did not survive the crash; recovery rebuilds the index\n",
			strings.TrimSuffix(path, ".log"), r.TxnPastEnd)
		v.repairable++
	}
	tail := r.ZeroTail + r.StaleTail
	if tail > 0 && !tailOK && !(nextBase >= 0 && r.NextOffset == nextBase && !closedCleanly(filepath.Dir(path))) {
		what := "zero bytes"
		if r.StaleTail > 0 {
			what = "bytes of an older segment (a recycled file)"
		}
		return r, fmt.Errorf("%s: %d %s from position %d to the end: only the last segment of a log not closed cleanly, or one it rolled just before, may run on past its batches: %w",
			path, tail, what, r.Bytes-tail, segment.ErrVerify)
	}
	v.printf("%s: %s, %s, %d bytes", path, count(r.Batches, "batch", "batches"),
		count(r.Records, "record", "records"), r.Bytes-tail)
	if r.FirstOffset >= 0 {
		v.printf(", offsets %d..%d", r.FirstOffset, r.NextOffset)
	} else {
		v.printf(", no offsets, next %d", r.NextOffset)
	}
	if r.Gaps > 0 {
		v.printf(", %s", skipped(r.Gaps))
	}
	if r.IndexEntries >= 0 {
		v.printf(", index %s", count(int64(r.IndexEntries), "entry", "entries"))
	} else {
		v.printf(", no index")
	}
	if r.TimeEntries >= 0 {
		v.printf(", timeindex %s\n", count(int64(r.TimeEntries), "entry", "entries"))
	} else {
		v.printf(", no timeindex\n")
	}
	if r.ZeroTail > 0 {
		v.printf("note: %s ends in %d zero bytes from position %d: the unfinished active segment of a log not closed cleanly (or one rolled just before and not yet sealed), which opening the partition recovers\n",
			path, r.ZeroTail, r.Bytes-tail)
		v.sum.Notes++
	}
	if r.StaleTail > 0 {
		v.printf("note: %s ends in %d bytes of an older segment from position %d: a recycled file not yet sealed in a log not closed cleanly, which opening the partition cuts\n",
			path, r.StaleTail, r.Bytes-tail)
		v.sum.Notes++
	}
	return r, nil
}

func summaryOf(r segment.Report) VerifySummary {
	return VerifySummary{Segments: 1, Batches: r.Batches, Records: r.Records, Bytes: r.Bytes - r.ZeroTail - r.StaleTail, Skipped: r.Gaps}
}

// String gives the counts in the words of Verify's lines.
func (s VerifySummary) String() string {
	out := fmt.Sprintf("%s, %s, %s, %s, %d bytes, %s, %s",
		count(int64(s.Partitions), "partition", "partitions"), count(int64(s.Segments), "segment", "segments"),
		count(s.Batches, "batch", "batches"), count(s.Records, "record", "records"), s.Bytes,
		skipped(s.Skipped), count(int64(s.Notes), "note", "notes"))
	if s.Repairable > 0 {
		out += ", " + count(int64(s.Repairable), "crash image the next open repairs", "crash images the next open repairs")
	}
	return out
}

func (v *verifier) printf(format string, args ...any) {
	if v.writeErr == nil {
		_, v.writeErr = fmt.Fprintf(v.w, format, args...)
	}
}

func skipped(n int64) string {
	if n == 0 {
		return "no gaps"
	}
	return count(n, "offset skipped", "offsets skipped")
}

// checkpoints reads an idemlog partition's checkpoint files (idemlog: the
// recovery-point one exists; Kafka keeps them in the log directory above).
// A damaged one is an error: the log writes them atomically, so no crash
// leaves one torn, and the open sets it aside.
func checkpoints(dir string) (rp, ls partition.CheckpointFile, idemlog bool, err error) {
	rpPath := filepath.Join(dir, "recovery-point-offset-checkpoint")
	lsPath := filepath.Join(dir, "log-start-offset-checkpoint")
	idemlog = fsutil.Exists(rpPath)
	if !idemlog {
		return partition.CheckpointFile{Version: -1}, partition.CheckpointFile{Version: -1}, false, nil
	}
	if rp, err = partition.ReadCheckpointFile(rpPath); err != nil {
		return rp, ls, idemlog, fmt.Errorf("cannot verify: %w", err)
	}
	if ls, err = partition.ReadCheckpointFile(lsPath); err != nil {
		return rp, ls, idemlog, fmt.Errorf("cannot verify: %w", err)
	}
	for _, f := range []struct {
		path string
		ck   partition.CheckpointFile
	}{{rpPath, rp}, {lsPath, ls}} {
		if f.ck.Damage != "" {
			return rp, ls, idemlog, fmt.Errorf("%s: damaged (%s): %w", f.path, f.ck.Damage, segment.ErrVerify)
		}
	}
	if ls.Version == 0 && rp.Version == 1 {
		return rp, ls, idemlog, fmt.Errorf("%s: Kafka's unchecked format beside a checksummed recovery point: not written by the log: %w", lsPath, segment.ErrVerify)
	}
	return rp, ls, idemlog, nil
}

// idemlogRecoveryPoint reads the recovery point an idemlog partition
// keeps in its own directory; false if there is none (not idemlog's, or
// never checkpointed: then the whole log is recovered, from offset 0).
func idemlogRecoveryPoint(dir string) (int64, bool) {
	path := filepath.Join(dir, "recovery-point-offset-checkpoint")
	if !fsutil.Exists(path) {
		return 0, false
	}
	ck, err := partition.ReadCheckpointFile(path)
	if err != nil {
		return 0, false
	}
	return ck.Offset, true // damaged: recovery starts at 0
}

// segmentsAfterOpen returns the segments the next open of the partition in
// dir will have, given its .log files segs, and reports the files a log
// cleaning left (dir.go): a crash in the middle of Kafka's swap is
// repaired by that open, without losing anything, so the leftovers are
// crash images, not corruption. .cleaned files and the .swap files at or
// above the lowest of them are deleted: the old segments stay. The other
// .swap segments replace every segment whose base lies in the offsets
// they cover, from the lowest .swap base to the highest end of their
// batches (LogLoader's rule), and are verified as the segments they
// become. .deleted files, which a running cleaner leaves for
// file.delete.delay.ms, are noted.
func (v *verifier) segmentsAfterOpen(dir string, segs []segmentFile) ([]segmentFile, error) {
	c, err := listCleaningFiles(dir)
	if err != nil {
		return nil, err
	}
	for _, p := range c.deleted {
		v.printf("note: %s: replaced by a log cleaning, awaiting deletion (file.delete.delay.ms); the next open deletes it\n", p)
		v.sum.Notes++
	}
	repairable := false
	for _, p := range c.cleaned {
		v.printf("repairable: %s: written by a log cleaning that did not finish; the next open deletes it and keeps the segments it was to replace\n", p)
		repairable = true
	}
	abandoned := func(base int64) bool { return c.minCleaned >= 0 && base >= c.minCleaned }
	var swaps []segmentFile
	for _, s := range c.swapLogs {
		if abandoned(s.base) {
			v.printf("repairable: %s: a cleaned segment whose swap did not begin (a .cleaned file at or below it remains); the next open deletes it\n", s.path)
			repairable = true
			continue
		}
		swaps = append(swaps, s)
	}
	for _, o := range c.swapOthers {
		if abandoned(o.base) {
			v.printf("repairable: %s: part of a swap that did not begin; the next open deletes it\n", o.path)
			repairable = true
		}
	}
	if repairable || len(swaps) > 0 {
		v.sum.Repairable++
	}
	if len(swaps) == 0 {
		return segs, nil
	}
	minSwap, maxSwap := swaps[0].base, swaps[0].base
	for _, s := range swaps {
		r, err := segment.VerifySwapFile(s.path, v.maxBatch)
		if err != nil {
			// The next open puts it in place of the segments it covers.
			return nil, withDir(s.path, err)
		}
		maxSwap = max(maxSwap, r.NextOffset)
	}
	var kept []segmentFile
	var replaced []string
	for _, s := range segs {
		if s.base >= minSwap && s.base < maxSwap {
			replaced = append(replaced, filepath.Base(s.path))
			continue
		}
		kept = append(kept, s)
	}
	for _, s := range swaps {
		v.printf("repairable: %s: a cleaned segment whose swap the next open completes, in place of the segments in offsets %d..%d", s.path, minSwap, maxSwap)
		if len(replaced) > 0 {
			v.printf(" (%s)", strings.Join(replaced, ", "))
		}
		v.printf("; checked as the segment it becomes\n")
	}
	kept = append(kept, swaps...)
	slices.SortFunc(kept, func(a, b segmentFile) int { return cmp.Compare(a.base, b.base) })
	return kept, nil
}

// swap reports whether s is a cleaned segment still named .swap.
func (s segmentFile) swap() bool { return strings.HasSuffix(s.path, swapSuffix) }

// topicConfigHeader starts an idemlog partition's topic.config, whose
// cleanup.policy says whether its topic is compacted; the header carries
// the CRC-32C of the lines after it.
const topicConfigHeader = "# idemlog topic.config version 1 crc32c="

// topicCompacted reports whether the partition in dir belongs to a
// compacted topic: its topic.config (the engine's overrides, name=value
// lines) sets a cleanup.policy that lists compact. Without the file
// (Kafka's partitions keep their configs elsewhere), false: their gaps
// are allowed anyway. A file that fails its checksum is corruption: the
// engine refuses to open the partition.
func topicCompacted(dir string) (bool, error) {
	path := filepath.Join(dir, "topic.config")
	data, err := fsutil.ReadFileMax(path, 1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cannot verify: %w", err)
	}
	if rest, ok := bytes.CutPrefix(data, []byte(topicConfigHeader)); ok {
		hex, body, _ := bytes.Cut(rest, []byte("\n"))
		want, perr := strconv.ParseUint(string(hex), 16, 32)
		if got := crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)); perr != nil || len(hex) != 8 || uint32(want) != got {
			return false, fmt.Errorf("%s: fails its checksum (%08x, header says %q): the topic's configs cannot be trusted: %w", path, got, hex, segment.ErrVerify)
		}
		data = body
	}
	compacted := false
	for line := range strings.Lines(string(data)) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok && name == "cleanup.policy" {
			compacted = slices.Contains(strings.Split(strings.ReplaceAll(value, " ", ""), ","), "compact")
		}
	}
	return compacted, nil
}

// withDir puts the directory back into VerifyFile's index errors, which
// name the index by its file name alone: in a data directory of many
// partitions that does not say which one.
func withDir(path string, err error) error {
	msg := err.Error()
	dir := filepath.Dir(path)
	stem := strings.TrimSuffix(filepath.Base(path), ".log") + "."
	if dir == "." || strings.Contains(msg, path) || !strings.Contains(msg, stem) {
		return err
	}
	return &renamedError{strings.Replace(msg, stem, filepath.Join(dir, stem), 1), err}
}

// renamedError is err with another message; errors.Is still sees err.
type renamedError struct {
	msg string
	err error
}

func (e *renamedError) Error() string { return e.msg }
func (e *renamedError) Unwrap() error { return e.err }
