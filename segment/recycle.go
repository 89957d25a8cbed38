package segment

import (
	"encoding/binary"
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
// segment is open (readers see only published bytes), and Seal trims them.
// Recovery tells them from data by offsets: every stale batch has offsets
// below the new segment's base (retention only ever deletes from the start
// of the log, and a log's offsets never go back below its start), so the
// scan, which requires each batch to start exactly at the offset after the
// previous one, stops at the first of them. Exactly, not at or above: the
// device may persist sectors in any order, and a new batch whose first
// sector stayed stale while the rest of it reached the disk would carry
// stale high bytes of its base offset in front of a valid length, CRC and
// body (the CRC does not cover the base offset). What the scan does not
// prove, the open proves with the next segment's base: a rolled segment
// whose batches run exactly up to the next base is complete, whatever lies
// after them (partition.Open). LoadTail, which trusts sizes and not CRCs,
// refuses a batch below the offset before it for the same reason.
//
// Offsets alone fail in one case: an append torn inside the first 21
// bytes of its header (base offset, length, leader epoch, magic, CRC: the
// bytes the CRC does not cover), over an old batch of the same length at
// the same position. The new base offset and length would then stand in
// front of the old batch's CRC and body, which match: old records at a
// new offset. A device writes an aligned sector (512 bytes, or a multiple)
// whole or not at all, so such a tear needs a sector boundary inside the
// header. Before the file takes new data, OpenSpare therefore complements
// the CRC of each old batch whose header straddles a sector boundary
// (about 1 in 25 at arbitrary positions); any mix there fails its CRC. An
// old header inside one sector is, after a crash, either wholly old (its
// offsets stop the scan) or wholly new (the new CRC over the rest, which
// must then be new to match).
//
//	sector boundaries:   |512            |1024           |1536
//	old batches:     ...=====][hdr21]=========][h]|[dr21]=====...
//	                        inside one sector:    straddles: CRC complemented
//	                        whole or old after    (a torn new header in front
//	                        a crash               of it fails its CRC)
//
// Caveats: this rests on sector atomicity, as every write-ahead log that
// overwrites in place does. And the scan after a crash trusts CRCs, so a
// batch forged inside an old record's value, with the right offset and a
// valid CRC, that happens to start exactly where a crash cut the new data
// would be taken as data. pebble's recyclable record format rules this out
// by stamping each chunk with the file's number; Kafka's batch format has
// no room for that. Set partition.Options.NoRecycle where producers are
// not trusted that far, or where the storage does not write sectors
// atomically.

// maxInvalidatedShare bounds the pages of a file that recycling may dirty
// to invalidate old batches' CRCs, as a fraction of the file (1 /
// maxInvalidatedShare): one page per old batch whose header straddles a
// sector boundary, about 1 in 25 batches, so files of batches smaller
// than about 2.5 KiB are deleted rather than recycled. Those come from
// small syncs, which zero fills serve instead.
const maxInvalidatedShare = 16

// sectorSize is the unit of write atomicity assumed of the device: after
// a power loss an aligned 512-byte sector holds its old bytes or its new
// ones, never a mix. Devices with larger sectors (4 KiB) only have fewer
// boundaries.
const sectorSize = 512

// headerLen is the part of a v2 batch header read to walk and invalidate
// old batches: base offset, length, leader epoch, magic, CRC.
const headerLen = offCRC + 4

// headerStraddles reports whether a batch header at pos crosses a sector
// boundary, so that a crash could leave part of it new and part old.
func headerStraddles(pos int64) bool {
	return pos/sectorSize != (pos+headerLen-1)/sectorSize
}

// walkWindow is how much of the old file oldCRCs reads at a time while
// batches are small: many headers per read.
const walkWindow = 64 << 10

// offCRC is where a v2 batch header keeps its CRC: after base offset (8),
// length (4), partition leader epoch (4) and magic (1).
const offCRC = 17

// RecycledFile is the .log of a retired segment awaiting reuse (Recycle,
// OpenSpare).
type RecycledFile struct {
	Path string
	size int64 // the old segment's data: its batches end to end
}

// ErrNotRecycled: OpenSpare found that the file's batches are too small
// for recycling to pay (maxInvalidatedShare); the caller deletes it.
var ErrNotRecycled = errors.New("segment: batches too small to recycle the file")

// Recycle closes the segment and removes its indexes and producer snapshot
// like Delete, but renames its .log to a spare name in the same directory
// for OpenSpare (a sealed, non-empty segment only; any other is deleted,
// and Recycle returns nil). It reads nothing: it may run under the
// partition's writer mutex (retention), and a retired segment's pages are
// usually cold. The rename reaches the disk only with a sync of the
// directory, which OpenSpare's caller must do before the file is written
// again: until then a crash may bring the old name back, and the old
// segment with it (it lies below the log start offset, where retention
// deletes it again), but never new data under the old name.
func (s *Segment) Recycle() (*RecycledFile, error) {
	recyclable := s.sealed && s.size > 0
	err := s.closeFiles()
	var rf *RecycledFile
	if err == nil && recyclable {
		rf = &RecycledFile{Path: filepath.Join(s.dir, spareName()), size: s.size}
		err = os.Rename(s.path(".log"), rf.Path)
	}
	if rf == nil || err != nil {
		err = errors.Join(err, removeMissingOK(s.path(".log")))
	}
	for _, suffix := range []string{".index", ".timeindex", ".txnindex", ".snapshot"} {
		err = errors.Join(err, removeMissingOK(s.path(suffix)))
	}
	if err != nil {
		if rf != nil {
			_ = os.Remove(rf.Path)
		}
		return nil, fmt.Errorf("cannot recycle segment %d: %w", s.base, ioErr(err))
	}
	return rf, nil
}

func removeMissingOK(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// oldCRCs walks the headers of the file's batches (pread: nothing mapped)
// and returns the positions and values of the CRC fields to invalidate,
// those of headers that straddle a sector boundary, or ErrNotRecycled if
// that would dirty more than a maxInvalidatedShare of the file's pages.
func oldCRCs(f *os.File, size int64) (at []int64, crcs []uint32, err error) {
	page := int64(mmap.PageSize())
	limit := (size + page - 1) / page / maxInvalidatedShare
	lastPage, pages := int64(-1), int64(0)
	buf := make([]byte, walkWindow)
	var from, to int64 // buf holds the file's bytes [from, to)
	var last int64     // the previous batch's length
	for pos := int64(0); pos < size; {
		if pos+headerLen > size {
			return nil, nil, fmt.Errorf("cannot walk recycled segment: %d bytes at %d, short of a batch header: %w", size-pos, pos, ErrNotRecycled)
		}
		if pos+headerLen > to {
			// A window of headers while batches are small; past a large
			// batch, a page (the kernel reads one anyway).
			n := min(int64(len(buf)), size-pos)
			if last > walkWindow/4 {
				n = min(4096, n)
			}
			if _, err := f.ReadAt(buf[:n], pos); err != nil {
				return nil, nil, fmt.Errorf("cannot read batch header at %d: %w", pos, ioErr(err))
			}
			from, to = pos, pos+n
		}
		hdr := buf[pos-from : pos-from+headerLen]
		n := int64(binary.BigEndian.Uint32(hdr[8:12])) + 12
		if n < headerLen || pos+n > size {
			return nil, nil, fmt.Errorf("cannot walk recycled segment: batch at %d of length %d past %d: %w", pos, n, size, ErrNotRecycled)
		}
		if headerStraddles(pos) {
			at = append(at, pos+offCRC)
			crcs = append(crcs, binary.BigEndian.Uint32(hdr[offCRC:]))
			// The 4-byte field may cross a page: both are dirtied.
			for p := (pos + offCRC) / page; p <= (pos+headerLen-1)/page; p++ {
				if p != lastPage {
					lastPage = p
					if pages++; pages > limit {
						return nil, nil, ErrNotRecycled
					}
				}
			}
		}
		pos, last = pos+n, n
	}
	return at, crcs, nil
}

// OpenSpare makes a spare of a file that Recycle left. First it overwrites
// with its complement the CRC of each old batch whose header straddles a
// sector boundary, and syncs the file, so that no append torn inside its
// header can put new offsets in front of an old batch that passes its CRC
// check (the package comment above has the argument). That costs a
// dirtied page per such batch: a file whose batches would dirty more than
// a maxInvalidatedShare of its pages is refused with ErrNotRecycled (the
// caller deletes it).
//
// The file's blocks back its whole length, so nothing is reserved and
// nothing prefaulted (Prepare reads the old pages in ahead of the writer,
// since appends that end inside a page make the kernel read the rest of
// it). It runs off the append path (the partition's maintainer).
func OpenSpare(dir string, opts Options, rf *RecycledFile) (*Spare, error) {
	opts = opts.withDefaults()
	f, err := os.OpenFile(rf.Path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot open recycled segment: %w", ioErr(err))
	}
	sp := &Spare{dir: dir, opts: opts, f: f}
	st, err := f.Stat()
	if err != nil {
		sp.Discard()
		return nil, fmt.Errorf("cannot stat recycled segment: %w", ioErr(err))
	}
	crcAt, crcs, err := oldCRCs(f, min(rf.size, st.Size()))
	if err != nil {
		sp.Discard()
		return nil, err
	}
	// pwrite, not stores through the mapping: a store faults in the pages
	// around it (fault-around), and every mapped page costs each later
	// writeback a write-protect walk (WritePwrite has the figures).
	var crc [4]byte
	for i, at := range crcAt {
		binary.BigEndian.PutUint32(crc[:], ^crcs[i])
		if _, err := f.WriteAt(crc[:], at); err != nil {
			sp.Discard()
			return nil, fmt.Errorf("cannot invalidate recycled segment: %w", ioErr(err))
		}
	}
	if err := fdatasync(int(f.Fd())); err != nil {
		sp.Discard()
		return nil, fmt.Errorf("cannot sync recycled segment: %w", ioErr(err))
	}
	// A file longer than this segment's capacity (segment.bytes was
	// lowered) keeps its excess until the seal trims it.
	sp.reserved = min(st.Size(), opts.MaxBytes)
	sp.recycled = sp.reserved
	if sp.m, err = mmap.Map(f, 0, int(max(opts.MaxBytes, st.Size())), true); err != nil {
		sp.Discard()
		return nil, fmt.Errorf("cannot map recycled segment: %w", ioErr(err))
	}
	return sp, nil
}

// Recycled is how many bytes at the start of the segment's file held an
// older segment when it became this one (0 for a new file).
func (s *Segment) Recycled() int64 { return s.recycled }
