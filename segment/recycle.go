package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/idemlog/idemlog/mmap"
)

// Recycling: a segment that retention deletes leaves its .log behind as
// the next spare instead of freeing its blocks, as pebble recycles WAL
// files and PostgreSQL its WAL segments. Its blocks are written ones, so an
// fdatasync after an append over them flushes data only: the journal
// commit that fallocated (unwritten) blocks cost on every sync is gone,
// and, unlike ReserveZeroFill, no byte is written twice.
//
// The price is a file whose bytes past the writer's end are not zeros but
// the old segment's batches (the stale tail). Nothing reads them while the
// segment is open (readers see only published bytes), Seal trims them, and
// recovery tells them from data by offsets: every stale batch has offsets
// below the new segment's base (retention only ever deletes from the start
// of the log, and a log's offsets never go back below its start), so the
// scan, which requires each batch to start at or above the offset after
// the previous one, stops at the first of them, and one torn in the
// middle fails its length or CRC check. What the scan does not prove, the
// open proves with the next segment's base: a rolled segment whose batches
// run exactly up to the next base is complete, whatever lies after them
// (partition.Open). LoadTail, which trusts sizes and not CRCs, refuses a
// batch below the offset before it for the same reason.
//
// Caveat: the scan after a crash trusts CRCs, so a batch forged inside an
// old record's value, with the right offset and CRC, that happens to start
// exactly where a crash cut the new data would be taken as data. pebble's
// recyclable record format rules this out by stamping each chunk with the
// file's number; Kafka's batch format has no room for that. Set
// partition.Options.NoRecycle where producers are not trusted that far.

// Recycle closes the segment and removes its indexes and producer snapshot
// like Delete, but renames its .log to a spare name in the same directory
// and returns that path, for OpenSpare. The rename reaches the disk only
// with a sync of the directory, which OpenSpare's caller must do before
// the file is written again: until then a crash may bring the old name
// back, and the old segment with it (it lies below the log start offset,
// where retention deletes it again), but never new data under the old name.
func (s *Segment) Recycle() (string, error) {
	err := s.closeFiles()
	to := filepath.Join(s.dir, spareName())
	if err == nil {
		err = os.Rename(s.path(".log"), to)
	}
	for _, suffix := range []string{".index", ".timeindex", ".txnindex", ".snapshot"} {
		if e := os.Remove(s.path(suffix)); e != nil && !errors.Is(e, fs.ErrNotExist) {
			err = errors.Join(err, e)
		}
	}
	if err != nil {
		_ = os.Remove(s.path(".log"))
		_ = os.Remove(to)
		return "", fmt.Errorf("cannot recycle segment %d: %w", s.base, ioErr(err))
	}
	return to, nil
}

// OpenSpare makes a spare of a file that Recycle left at path: its blocks
// back the file's whole length already, so nothing is reserved and nothing
// prefaulted (Prepare reads the old pages in ahead of the writer, since
// appends that end inside a page make the kernel read the rest of it).
func OpenSpare(dir string, opts Options, path string) (*Spare, error) {
	opts = opts.withDefaults()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot open recycled segment: %w", ioErr(err))
	}
	sp := &Spare{dir: dir, opts: opts, f: f}
	st, err := f.Stat()
	if err != nil {
		sp.Discard()
		return nil, fmt.Errorf("cannot stat recycled segment: %w", ioErr(err))
	}
	// A file longer than this segment's capacity (segment.bytes was
	// lowered) keeps its excess until the seal trims it.
	sp.reserved = min(st.Size(), opts.MaxBytes)
	sp.recycled = sp.reserved
	if sp.m, err = mmap.Map(f, 0, int(opts.MaxBytes), true); err != nil {
		sp.Discard()
		return nil, fmt.Errorf("cannot map recycled segment: %w", ioErr(err))
	}
	return sp, nil
}

// Recycled is how many bytes at the start of the segment's file held an
// older segment when it became this one (0 for a new file).
func (s *Segment) Recycled() int64 { return s.recycled }
