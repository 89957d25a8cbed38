package segment

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/idemlog/idemlog/internal/fsutil"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/mmap"
	"github.com/idemlog/idemlog/txnindex"
)

// ErrVerify: a segment file breaks a rule that Validate, recovery or the
// indexes rely on. The message names the file and byte position.
var ErrVerify = errcode.New(errcode.CorruptMessage, "segment verification failed")

// ErrIndexMismatch: an .index or .timeindex entry that does not match the
// log. Returned with ErrVerify. In a segment that recovery scans (the last
// of a log not closed cleanly) it is a crash image, not damage: the scan
// rebuilds both indexes from the batches.
var ErrIndexMismatch = errors.New("index does not match the log")

// ErrTxnPastEnd: .txnindex entries whose abort markers lie past the
// segment's last sound batch (Report.TxnPastEnd). Returned with ErrVerify;
// a crash that took the log's tail after the index entry was written leaves
// this, and recovery rebuilds the index, so a caller that knows the log
// was not closed cleanly may take it for a crash image.
var ErrTxnPastEnd = errors.New("aborted-transaction index entries past the segment's batches")

// Report is what VerifyFile checked.
type Report struct {
	Path        string
	Base        int64 // from the file name, or the first batch for other names
	Batches     int64
	Records     int64
	Bytes       int64
	FirstOffset int64 // -1 if empty
	NextOffset  int64
	// Gaps counts offsets skipped between batches (compacted segments
	// have them).
	Gaps int64
	// ZeroTail is the length of an all-zero tail: the reservation of an
	// active segment that was not closed cleanly, which Open recovers.
	ZeroTail int64
	// StaleTail is the length of a tail that holds an older segment's
	// batches: a recycled file (Recycle) of a segment that was not sealed,
	// which Open cuts. It is recognised by an old batch as OpenSpare left
	// it (offsets below the segment's base, its CRC matching or
	// complemented) within two maximum batch sizes of where the segment's
	// own batches end (the bytes before it being the torn rest of another).
	StaleTail      int64
	IndexEntries   int // -1: no .index file
	TimeEntries    int // -1: no .timeindex file
	IndexChecked   bool
	TimeIdxChecked bool
	// AbortedTxns is the number of .txnindex entries checked, -1 without a
	// .txnindex file.
	AbortedTxns int
	// TornAt is the position of the batch that failed when VerifyFile
	// returns a batch's error (-1 otherwise): the batches before it are
	// sound, and the caller tells a torn tail a crash left (recovery cuts
	// it there) from corruption.
	TornAt int64
	// TxnPastEnd counts the .txnindex entries, the last ones, whose
	// marker lies at or past the end of the file's batches: written to the
	// index before a crash took the marker's bytes, which recovery
	// rebuilds. Whether that is a crash image is the caller's call.
	TxnPastEnd int
}

// VerifyFile checks every batch of a .log file (framing, size, CRC, codec,
// counts, offsets increasing and within int32 of the base), then the
// .index and .timeindex beside it, if any, against the batches. It maps the
// files read-only (never into the heap, whatever their size) and needs
// nothing but them, so it works on any Kafka segment, with or without
// idemlog's metadata. A file truncated while it is being read (a
// live partition sealing or retiring its segment) fails with ErrIO, not a
// SIGBUS of the process.
func VerifyFile(path string, maxBatchSize int) (rep Report, err error) {
	return verifyFile(path, maxBatchSize, "", nil)
}

// VerifySwapFile is VerifyFile for a segment that a log cleaning wrote
// and renamed to <base>.log.swap (Kafka's swap protocol,
// LocalLog.replaceSegments): the next open completes the swap, renaming it
// and its indexes (<base>.index.swap, .timeindex.swap, .txnindex.swap) into
// place, so it is checked as the segment it becomes. path names the
// .log.swap file.
func VerifySwapFile(path string, maxBatchSize int) (rep Report, err error) {
	return verifyFile(path, maxBatchSize, SwapSuffix, nil)
}

// SwapSuffix ends the names of a cleaned segment's files between the
// cleaning's last write and their rename into place (Kafka's names).
const SwapSuffix = ".swap"

// verifyFile checks the .log file at path, whose name, and its indexes',
// end in sfx after Kafka's suffixes ("" or SwapSuffix); mapped, if set (by
// tests), runs once the .log is mapped, so that a test changes the file
// under a running verify.
func verifyFile(path string, maxBatchSize int, sfx string, mapped func(path string)) (rep Report, err error) {
	// The files are mapped: a page past a concurrent truncation faults.
	// The fault becomes a panic of this goroutine, recovered here. (Without
	// this: verify on a live directory could die of SIGBUS.)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if v := recover(); v != nil {
			// A memory fault's panic value carries the faulting address.
			if re, ok := v.(interface {
				runtime.Error
				Addr() uintptr
			}); ok {
				err = fmt.Errorf("cannot verify %s: a file changed while it was read (%v): %w", path, re, ErrIO)
				return
			}
			panic(v)
		}
	}()
	r := Report{Path: path, FirstOffset: -1, IndexEntries: -1, TimeEntries: -1, AbortedTxns: -1, TornAt: -1}
	data, release, err := mapFile(path)
	if err != nil {
		return r, err
	}
	defer release()
	if mapped != nil {
		mapped(path)
	}
	r.Bytes = int64(len(data))
	base, named := ParseName(strings.TrimSuffix(filepath.Base(path), sfx), ".log")
	r.Base = base
	if maxBatchSize <= 0 {
		maxBatchSize = 64 << 20
	}
	// boundaries maps each batch start position to its offsets, for the
	// index checks.
	boundaries := map[int64]batchSpan{}
	// timed holds every batch in offset order with the running maximum
	// of the batches' max timestamps up to it, for the time index check.
	type timedBatch struct{ base, last, maxTs, runningMax int64 }
	var timed []timedBatch
	runningMax := int64(-1 << 63)
	prevLast := int64(-1)
	var pos int64
	for pos < int64(len(data)) {
		rest := data[pos:]
		n, err := batch.Size(rest)
		if err == nil {
			_, err = batch.Validate(rest[:n], maxBatchSize)
		}
		next := r.NextOffset
		if r.FirstOffset < 0 {
			next = base
		}
		if err != nil {
			if allZero(rest) {
				r.ZeroTail = int64(len(rest))
				break
			}
			if named && staleAhead(rest, base, next, maxBatchSize) {
				r.StaleTail = int64(len(rest))
				break
			}
			if errors.Is(err, batch.ErrTruncated) && grew(path, int64(len(data))) {
				// A batch cut at the end of what was mapped, in a file
				// that has grown since: a live segment's writer, not a
				// corruption.
				return r, fmt.Errorf("cannot verify %s: it grew while it was read (a live segment): %w", path, ErrIO)
			}
			// The batches before it are checked against the .txnindex,
			// whose entries a torn tail may have outlived (TxnPastEnd);
			// the other indexes may point into the torn bytes.
			r.TornAt = pos
			if r.FirstOffset < 0 {
				r.NextOffset = r.Base
			}
			dir, stem := filepath.Dir(path), strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), sfx), ".log")
			if terr := verifyTxnIndex(&r, data, boundaries, dir, stem, sfx); terr != nil && !errors.Is(terr, ErrTxnPastEnd) {
				return r, terr
			}
			return r, fmt.Errorf("%s: batch at position %d: %w", path, pos, err)
		}
		b := batch.Batch(rest[:n])
		if named && r.FirstOffset >= 0 && b.BaseOffset() < base && staleAhead(rest, base, next, maxBatchSize) {
			// An old batch whose CRC OpenSpare left alone, right where
			// the segment's own end. Not at the start: a file whose
			// first batch lies below its name's base is misnamed or
			// corrupt, not a tail.
			r.StaleTail = int64(len(rest))
			break
		}
		if r.FirstOffset < 0 {
			r.FirstOffset = b.BaseOffset()
			if !named {
				r.Base = b.BaseOffset()
			}
			if b.BaseOffset() < r.Base {
				return r, fmt.Errorf("%s: batch at position %d: offset %d below segment base %d: %w", path, pos, b.BaseOffset(), r.Base, ErrVerify)
			}
		} else if b.BaseOffset() <= prevLast {
			return r, fmt.Errorf("%s: batch at position %d: offset %d not above previous %d: %w", path, pos, b.BaseOffset(), prevLast, ErrVerify)
		} else {
			r.Gaps += b.BaseOffset() - prevLast - 1
		}
		if b.BaseOffset() < 0 || b.LastOffset() < b.BaseOffset() {
			// The CRC does not cover the base offset: one near MaxInt64
			// makes the last offset wrap.
			return r, fmt.Errorf("%s: batch at position %d: offsets %d..%d out of range: %w", path, pos, b.BaseOffset(), b.LastOffset(), ErrVerify)
		}
		if b.LastOffset()-r.Base > 1<<31-1 {
			return r, fmt.Errorf("%s: batch at position %d: offset %d too far from base %d: %w", path, pos, b.LastOffset(), r.Base, ErrVerify)
		}
		boundaries[pos] = batchSpan{b.BaseOffset(), b.LastOffset()}
		runningMax = max(runningMax, b.MaxTimestamp())
		timed = append(timed, timedBatch{b.BaseOffset(), b.LastOffset(), b.MaxTimestamp(), runningMax})
		prevLast = b.LastOffset()
		r.Batches++
		r.Records += int64(b.RecordsCount())
		r.NextOffset = b.NextOffset()
		pos += int64(n)
	}
	if r.FirstOffset < 0 {
		r.NextOffset = r.Base
	}
	dir, stem := filepath.Dir(path), strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), sfx), ".log")
	// Offset index: strictly increasing, every entry at a batch boundary,
	// its offset within the batch run that starts there.
	// The indexes are mapped, as the .log is, not read: their size is
	// whatever the file says. (Without this: a sparse 1 GiB .index cost
	// 1 GiB of heap.)
	if idx, release, err := mapIndex(filepath.Join(dir, stem+".index"+sfx)); err == nil {
		defer release()
		r.IndexChecked = true
		if len(idx)%8 != 0 {
			return r, fmt.Errorf("%s.index%s: size %d not a multiple of 8: %w: %w", stem, sfx, len(idx), ErrIndexMismatch, ErrVerify)
		}
		prevOff, prevPos := int64(-1), int64(-1)
		for i := 0; i < len(idx); i += 8 {
			rel := int64(int32(binary.BigEndian.Uint32(idx[i:])))
			p := int64(int32(binary.BigEndian.Uint32(idx[i+4:])))
			if rel == 0 && p == 0 && allZero(idx[i:]) {
				// The preallocated tail of an index not trimmed; from
				// entry 0, an active segment's empty index. (Without this:
				// a fresh partition's failed.)
				break
			}
			off := r.Base + rel
			if off <= prevOff || p <= prevPos {
				return r, fmt.Errorf("%s.index%s: entry %d {%d, %d} not increasing: %w: %w", stem, sfx, i/8, off, p, ErrIndexMismatch, ErrVerify)
			}
			s, ok := boundaries[p]
			if !ok {
				return r, fmt.Errorf("%s.index%s: entry %d points at position %d, not a batch start: %w: %w", stem, sfx, i/8, p, ErrIndexMismatch, ErrVerify)
			}
			if off < s.base || off >= r.NextOffset {
				return r, fmt.Errorf("%s.index%s: entry %d offset %d, batch at %d holds %d..%d: %w: %w", stem, sfx, i/8, off, p, s.base, s.last, ErrIndexMismatch, ErrVerify)
			}
			prevOff, prevPos = off, p
			r.IndexEntries = i/8 + 1
		}
		r.IndexEntries = max(r.IndexEntries, 0)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return r, fmt.Errorf("cannot read %s.index%s: %w", stem, sfx, err)
	}
	if tix, release, err := mapIndex(filepath.Join(dir, stem+".timeindex"+sfx)); err == nil {
		defer release()
		r.TimeIdxChecked = true
		if len(tix)%12 != 0 {
			return r, fmt.Errorf("%s.timeindex%s: size %d not a multiple of 12: %w: %w", stem, sfx, len(tix), ErrIndexMismatch, ErrVerify)
		}
		prevTs, prevOff := int64(-1<<63), int64(-1)
		for i := 0; i < len(tix); i += 12 {
			ts := int64(binary.BigEndian.Uint64(tix[i:]))
			off := r.Base + int64(int32(binary.BigEndian.Uint32(tix[i+8:])))
			if ts == 0 && off == r.Base && allZero(tix[i:]) {
				break
			}
			if ts <= prevTs || off < prevOff || off >= max(r.NextOffset, r.Base+1) {
				return r, fmt.Errorf("%s.timeindex%s: entry %d {%d, %d} out of order or range: %w: %w", stem, sfx, i/12, ts, off, ErrIndexMismatch, ErrVerify)
			}
			// The entry is the largest timestamp so far and the batch
			// that holds it (Kafka's maxTimestampSoFar and its offset):
			// a lower one sends a lookup by time past records it should
			// return.
			j, _ := slices.BinarySearchFunc(timed, off, func(tb timedBatch, off int64) int { return cmp.Compare(tb.last, off) })
			if j == len(timed) || timed[j].base > off || timed[j].maxTs != ts || timed[j].runningMax != ts {
				return r, fmt.Errorf("%s.timeindex%s: entry %d {%d, %d}: not the largest timestamp so far at a batch holding it: %w: %w", stem, sfx, i/12, ts, off, ErrIndexMismatch, ErrVerify)
			}
			prevTs, prevOff = ts, off
			r.TimeEntries = i/12 + 1
		}
		r.TimeEntries = max(r.TimeEntries, 0)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return r, fmt.Errorf("cannot read %s.timeindex%s: %w", stem, sfx, err)
	}
	if err := verifyTxnIndex(&r, data, boundaries, dir, stem, sfx); err != nil {
		return r, err
	}
	return r, nil
}

// batchSpan is a batch's first and last offsets.
type batchSpan struct{ base, last int64 }

// verifyTxnIndex checks the .txnindex beside a segment against its
// batches (boundaries: position -> offsets of each sound batch), setting
// r.AbortedTxns and r.TxnPastEnd.
func verifyTxnIndex(r *Report, data []byte, boundaries map[int64]batchSpan, dir, stem, sfx string) error {
	// Aborted-transaction index: its own rules (txnindex.Open), and every
	// entry's marker must be a control batch of its producer in this file.
	tpath := filepath.Join(dir, stem+".txnindex"+sfx)
	if !fsutil.Exists(tpath) {
		return nil
	}
	entries, err := txnindex.ReadFile(tpath, r.Base)
	if err != nil {
		// An index that does not match its segment: in a segment the next
		// open scans, rebuilt from the markers (a torn entry is what a
		// power cut leaves when the index was written but not synced).
		return fmt.Errorf("%s.txnindex%s: %w: %w: %w", stem, sfx, err, ErrIndexMismatch, ErrVerify)
	}
	// The offset of every ABORT marker -> its producer. Any other control
	// batch, a COMMIT marker say, will not do: read_committed readers
	// would drop its committed transaction.
	aborts := map[int64]int64{}
	for pos, sp := range boundaries {
		n, err := batch.Size(data[pos:])
		if err != nil {
			continue // never: the scan framed every boundary
		}
		b := batch.Batch(data[pos : pos+int64(n)])
		if !b.IsControl() {
			continue
		}
		if ctl, err := b.Control(); err == nil && ctl.Type == batch.ControlAbort {
			aborts[sp.base] = b.ProducerID()
		}
	}
	for i, e := range entries {
		if e.LastOffset >= r.NextOffset {
			// Entries are in offset order: the rest lie past too.
			r.TxnPastEnd = len(entries) - i
			r.AbortedTxns = i
			return fmt.Errorf("%s.txnindex%s: %d entries from entry %d {producer %d, %d..%d} on: their abort markers are past the segment's last batch: %w: %w",
				stem, sfx, r.TxnPastEnd, i, e.ProducerID, e.FirstOffset, e.LastOffset, ErrTxnPastEnd, ErrVerify)
		}
		if pid, ok := aborts[e.LastOffset]; !ok || pid != e.ProducerID || e.FirstOffset > e.LastOffset {
			return fmt.Errorf("%s.txnindex%s: entry %d {producer %d, %d..%d}: no abort marker of that producer at %d: %w",
				stem, sfx, i, e.ProducerID, e.FirstOffset, e.LastOffset, e.LastOffset, ErrVerify)
		}
	}
	r.AbortedTxns = len(entries)
	return nil
}

// ParseName returns the base offset of a segment file name such as
// 00000000000000000042.log.
func ParseName(name, suffix string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil && n >= 0
}

// mapIndex maps an index file read-only (mapFile), with the error
// wrapping fs.ErrNotExist when there is none.
func mapIndex(path string) ([]byte, func(), error) {
	if _, err := os.Stat(path); err != nil {
		return nil, nil, err
	}
	return mapFile(path)
}

// mapFile maps a whole file read-only: verify walks segments of any size
// without reading them into the heap.
func mapFile(path string) ([]byte, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot open %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("cannot stat %s: %w", path, err)
	}
	if st.Size() == 0 {
		return nil, func() {}, nil
	}
	m, err := mmap.Map(f, 0, int(st.Size()), false)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot map %s: %w", path, err)
	}
	return m.Bytes(), func() { _ = m.Unmap() }, nil
}

// staleAhead reports whether rest, where the segment's own batches stop
// being valid (the next one would start at offset next), is a recycled
// file's stale tail: an old batch as OpenSpare leaves it (framed, magic
// 2, offsets below base, its CRC field holding its CRC or, where its
// header straddles a sector boundary, the complement) starts within two
// maximum batch sizes (a torn new batch, then
// the rest of an old one), and no valid batch of the segment's own (offsets
// at or above next) starts before it: a corrupt batch followed by good
// ones is corruption, not a tail, whatever lies further on. The CRCs it
// computes are bounded in bytes, so crafted bytes cannot make it slow.
func staleAhead(rest []byte, base, next int64, maxBatchSize int) bool {
	budget := 4 * int64(maxBatchSize)
	window := min(len(rest), 2*maxBatchSize)
	for j := 0; j < window && budget > 0; j++ {
		v, err := batch.Parse(rest[j:])
		if err != nil || len(v) > maxBatchSize {
			continue
		}
		n := len(v)
		own := v.BaseOffset() >= next
		if !own && v.BaseOffset() >= base {
			continue
		}
		budget -= int64(n)
		crc := v.ComputeCRC()
		switch {
		case own && v.CRC() == crc:
			return false
		case !own && (v.CRC() == crc || v.CRC() == ^crc):
			return true
		}
	}
	return false
}

// grew reports whether the file at path is now larger than size.
func grew(path string, size int64) bool {
	st, err := os.Stat(path)
	return err == nil && st.Size() > size
}
