//go:build linux

package index

import (
	"encoding/binary"
	"fmt"
	"math"
)

// OffsetIndex maps offsets to byte positions in a segment's .log: a sparse,
// sorted list of {offset, position} entries (see the package doc).
type OffsetIndex struct{ c core }

// OpenOffset opens or creates the offset index at path for the segment
// with base offset base, writable. maxBytes (<= 0 means DefaultMaxBytes)
// is rounded down to a multiple of OffsetEntrySize; the file is
// preallocated to it, or kept at its used size if that is larger. An
// existing file's entries are found by the zero-terminator rule; a file
// that breaks the rules gives ErrCorrupt.
func OpenOffset(path string, base int64, maxBytes int) (*OffsetIndex, error) {
	x := &OffsetIndex{c: core{kind: "offset index", entrySize: OffsetEntrySize}}
	if err := x.c.open(path, base, maxBytes, true, scanOffset); err != nil {
		return nil, err
	}
	return x, nil
}

// OpenOffsetReadOnly opens an existing offset index without modifying the
// file, for sealed segments: no preallocation, no descriptor kept, and
// every mutation returns ErrReadOnly. A missing file gives an error
// matching fs.ErrNotExist.
func OpenOffsetReadOnly(path string, base int64) (*OffsetIndex, error) {
	x := &OffsetIndex{c: core{kind: "offset index", entrySize: OffsetEntrySize}}
	if err := x.c.open(path, base, 0, false, scanOffset); err != nil {
		return nil, err
	}
	return x, nil
}

func offsetAt(b []byte, i int) (rel, pos int32) {
	e := b[i*OffsetEntrySize : i*OffsetEntrySize+OffsetEntrySize]
	return int32(binary.BigEndian.Uint32(e)), int32(binary.BigEndian.Uint32(e[4:]))
}

func relAt(b []byte, i int) int64 {
	return int64(int32(binary.BigEndian.Uint32(b[i*OffsetEntrySize:])))
}

// scanOffset returns the length of the used prefix of an existing file.
func scanOffset(b []byte) (int, error) {
	var buf [64]int
	n, probes := firstZero(b, 0, len(b)/OffsetEntrySize, OffsetEntrySize, buf[:0])
	first := func(i int) error {
		if rel, pos := offsetAt(b, i); rel < 0 || pos <= 0 {
			return fmt.Errorf("first entry {%d, %d} below base or at position 0: %w", rel, pos, ErrCorrupt)
		}
		return nil
	}
	err := checkSamples(n, probes, first, func(prev, i int) error { return checkOffsetPair(b, prev, i) })
	return n, err
}

func checkOffsetPair(b []byte, prev, i int) error {
	r0, p0 := offsetAt(b, prev)
	r1, p1 := offsetAt(b, i)
	if r1 <= r0 || p1 <= p0 {
		return fmt.Errorf("entry %d {%d, %d} does not follow entry %d {%d, %d}: %w", i, r1, p1, prev, r0, p0, ErrCorrupt)
	}
	return nil
}

// SanityCheck verifies that every entry follows the previous one, in
// O(n); opening only samples O(log n) of them. It may run concurrently
// with Append.
func (x *OffsetIndex) SanityCheck() error {
	n, b := int(x.c.n.Load()), x.c.buf
	if n == 0 {
		return nil
	}
	if rel, pos := offsetAt(b, 0); rel < 0 || pos <= 0 {
		return fmt.Errorf("cannot verify offset index %q: first entry {%d, %d} below base or at position 0: %w", x.c.path, rel, pos, ErrCorrupt)
	}
	for i := 1; i < n; i++ {
		if err := checkOffsetPair(b, i-1, i); err != nil {
			return fmt.Errorf("cannot verify offset index %q: %w", x.c.path, err)
		}
	}
	return nil
}

// Append adds {offset, position}. Both must be greater than the last
// entry's (position > 0 for the first entry; see the package doc for why
// that holds under the sparse rule and why it matters).
func (x *OffsetIndex) Append(offset, position int64) error {
	c := &x.c
	if err := c.errIfNotWritable("append to"); err != nil {
		return err
	}
	n := int(c.n.Load())
	if n >= c.maxEntries {
		return fmt.Errorf("cannot append to offset index %q: %d entries: %w", c.path, n, ErrFull)
	}
	rel := offset - c.base
	if offset < c.base || rel > math.MaxInt32 || position > math.MaxInt32 {
		return fmt.Errorf("cannot append to offset index %q: offset %d position %d with base %d: %w", c.path, offset, position, c.base, ErrRelativeOverflow)
	}
	lastRel, lastPos := int64(-1), int64(0)
	if n > 0 {
		r, p := offsetAt(c.buf, n-1)
		lastRel, lastPos = int64(r), int64(p)
	}
	if rel <= lastRel || position <= lastPos {
		return fmt.Errorf("cannot append to offset index %q: {%d, %d} after {%d, %d}: %w", c.path, offset, position, c.base+lastRel, lastPos, ErrOutOfOrder)
	}
	if err := c.grow(n); err != nil {
		return err
	}
	e := c.buf[n*OffsetEntrySize : n*OffsetEntrySize+OffsetEntrySize]
	binary.BigEndian.PutUint32(e, uint32(rel))
	binary.BigEndian.PutUint32(e[4:], uint32(position))
	c.n.Store(int64(n + 1)) // publish only now; see core.n
	return nil
}

// ReserveNext makes sure the file has blocks for the next entry, so that
// an append that also indexes can grow the file before it changes
// anything. Writer only.
func (x *OffsetIndex) ReserveNext() error {
	c := &x.c
	if err := c.errIfNotWritable("grow"); err != nil {
		return err
	}
	if n := int(c.n.Load()); n < c.maxEntries {
		return c.grow(n)
	}
	return nil
}

// Lookup returns the entry with the greatest offset <= target, or
// (base, 0) if there is none: where a scan of the .log for target starts.
// It does not allocate and is safe concurrently with Append.
func (x *OffsetIndex) Lookup(target int64) (offset, position int64) {
	n, base := int(x.c.n.Load()), x.c.base
	if n == 0 || target < base {
		return base, 0
	}
	b := x.c.buf
	i := searchOffset(b, n, target-base)
	if i < 0 {
		return base, 0
	}
	rel, pos := offsetAt(b, i)
	return base + int64(rel), int64(pos)
}

// searchOffset returns the greatest i < n with relative offset <= rel, or
// -1.
func searchOffset(b []byte, n int, rel int64) int {
	lo, hi := 0, n
	if hot := n - warmBytes/OffsetEntrySize; hot > 0 {
		if relAt(b, hot) <= rel {
			lo = hot
		} else {
			hi = hot
		}
	}
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if relAt(b, h) <= rel {
			lo = h + 1
		} else {
			hi = h
		}
	}
	return lo - 1
}

// TruncateTo drops the entries with offset >= offset, zeroing them. Must
// not overlap readers (see the package doc).
func (x *OffsetIndex) TruncateTo(offset int64) error {
	c := &x.c
	if err := c.errIfNotWritable("truncate"); err != nil {
		return err
	}
	keep := 0
	if offset > c.base {
		keep = searchOffset(c.buf, int(c.n.Load()), offset-c.base-1) + 1
	}
	c.dropFrom(keep)
	return nil
}

// Reset drops and zeroes every entry, for a rebuild from the .log. Must
// not overlap readers.
func (x *OffsetIndex) Reset() error {
	if err := x.c.errIfNotWritable("reset"); err != nil {
		return err
	}
	x.c.dropFrom(0)
	return nil
}

// Entries returns the number of entries.
func (x *OffsetIndex) Entries() int { return int(x.c.n.Load()) }

// Full reports whether Append would return ErrFull: the partition rolls.
// Writer-only, like Append. A trimmed or read-only index is full.
func (x *OffsetIndex) Full() bool { return int(x.c.n.Load()) >= x.c.maxEntries }

// LastOffset returns the last entry's offset, or base if there is none.
func (x *OffsetIndex) LastOffset() int64 {
	n := int(x.c.n.Load())
	if n == 0 {
		return x.c.base
	}
	return x.c.base + relAt(x.c.buf, n-1)
}

// Entry returns entry i; it panics unless 0 <= i < Entries().
func (x *OffsetIndex) Entry(i int) (offset, position int64) {
	if n := int(x.c.n.Load()); i < 0 || i >= n {
		panic(fmt.Sprintf("index: offset index entry %d out of range [0, %d)", i, n))
	}
	rel, pos := offsetAt(x.c.buf, i)
	return x.c.base + int64(rel), int64(pos)
}

// Base returns the segment's base offset.
func (x *OffsetIndex) Base() int64 { return x.c.base }

// Path returns the file's current path. Writer-only, like Rename.
func (x *OffsetIndex) Path() string { return x.c.path }

// Trim cuts the file to exactly Entries()*OffsetEntrySize bytes, on roll
// and before a clean Close, and makes the index full. Safe concurrently
// with readers: the mapping stays where it is. A no-op when read-only.
func (x *OffsetIndex) Trim() error { return x.c.trim() }

// Sync flushes the entries and the file size to disk.
func (x *OffsetIndex) Sync() error { return x.c.sync() }

// Close unmaps and closes the file without trimming it (call Trim first on
// a clean shutdown; an untrimmed file still reopens correctly). Closing
// twice is a no-op. Must not overlap readers.
func (x *OffsetIndex) Close() error { return x.c.close() }

// Delete closes the index and removes its file; a missing file is not an
// error. Must not overlap readers.
func (x *OffsetIndex) Delete() error { return x.c.delete() }

// Rename moves the file, e.g. to the .deleted or .swap name. The mapping
// is unaffected. Writer-only.
func (x *OffsetIndex) Rename(path string) error { return x.c.rename(path) }
