package segment

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/idemlog/idemlog/mmap"
)

// spareSeq numbers spare files: each has its own name, so one being made
// can never be confused with one being discarded.
var spareSeq atomic.Uint64

// spareName is the name of a segment file created ahead of a roll. The
// ".tmp" suffix makes recovery delete it if the process dies before the
// roll renames it.
func spareName() string { return fmt.Sprintf("spare-%d.log.tmp", spareSeq.Add(1)) }

// Spare is a .log file created, reserved, mapped and prefaulted before the
// roll that needs it, so the roll itself only renames it and creates the
// indexes.
type Spare struct {
	dir      string
	opts     Options
	f        *os.File
	m        *mmap.Mapping
	reserved int64 // bytes of the file backed by blocks
	recycled int64 // bytes of an older segment in the file (OpenSpare)
}

// CreateSpare prepares the next segment's .log in dir, reserving its first
// zero bytes (at most ReserveAhead) by zero-filling them under
// ReserveZeroFill, or, with zero 0 (or where zero-filling fails), its first
// ReserveAhead bytes with fallocate.
func CreateSpare(dir string, opts Options, zero int64) (*Spare, error) {
	opts = opts.withDefaults()
	path := filepath.Join(dir, spareName())
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot create spare segment: %w", ioErr(err))
	}
	sp := &Spare{dir: dir, opts: opts, f: f}
	if err := sp.reserve(zero); err != nil {
		sp.Discard()
		return nil, fmt.Errorf("cannot reserve spare segment: %w", ioErr(err))
	}
	if sp.m, err = mmap.Map(f, 0, int(opts.MaxBytes), true); err != nil {
		sp.Discard()
		return nil, fmt.Errorf("cannot map spare segment: %w", ioErr(err))
	}
	if opts.Mode != WritePwrite {
		if err := sp.m.PopulateWrite(0, int(sp.reserved)); err != nil && !errors.Is(err, mmap.ErrPopulateUnsupported) {
			sp.Discard()
			return nil, fmt.Errorf("cannot prefault spare segment: %w", ioErr(err))
		}
	}
	return sp, nil
}

// reserve backs the spare's first bytes with blocks: zero bytes (rounded
// to pages, at most ReserveAhead) zero-filled under ReserveZeroFill (the
// spare is private until Activate: no writer to wait for), else, or where
// that fails, ReserveAhead bytes fallocated.
func (sp *Spare) reserve(zero int64) error {
	if zero > 0 && sp.opts.Reserve == ReserveZeroFill {
		page := int64(mmap.PageSize())
		n := min((zero+page-1)/page*page, sp.opts.ReserveAhead)
		if zf, err := fillFile(sp.f); err == nil {
			err = zeroFill(zf, 0, n)
			zf.Close()
			if err == nil {
				sp.reserved = n
				return nil
			}
		}
	}
	sp.reserved = sp.opts.ReserveAhead
	return mmap.Fallocate(sp.f, 0, sp.reserved)
}

// Activate renames the spare to the segment at base and returns it, ready
// for appends. The rename reaches the disk with the next sync of the
// directory (the partition syncs it before acknowledging data in the new
// segment under SyncAlways).
func (sp *Spare) Activate(base int64) (*Segment, error) {
	path := filepath.Join(sp.dir, FileName(base, ".log"))
	if err := os.Rename(sp.f.Name(), path); err != nil {
		sp.Discard()
		return nil, fmt.Errorf("cannot activate spare segment: %w", ioErr(err))
	}
	s := &Segment{dir: sp.dir, base: base, opts: sp.opts, log: sp.f, fd: int(sp.f.Fd()), m: sp.m, data: sp.m.Bytes(),
		nextOffset: base, maxTimestamp: -1, maxTimestampOff: base, firstTimestamp: -1}
	s.reserved.Store(sp.reserved)
	s.recycled = sp.recycled
	sp.f, sp.m = nil, nil
	if err := s.openIndexes(true); err != nil {
		s.closeFiles()
		os.Remove(path)
		return nil, err
	}
	return s, nil
}

// Recycled reports whether the spare is a retired segment's file
// (OpenSpare).
func (sp *Spare) Recycled() bool { return sp.recycled > 0 }

// Discard removes an unused spare.
func (sp *Spare) Discard() {
	if sp.m != nil {
		_ = sp.m.Unmap()
		sp.m = nil
	}
	if sp.f != nil {
		_ = sp.f.Close()
		_ = os.Remove(sp.f.Name())
		sp.f = nil
	}
}
