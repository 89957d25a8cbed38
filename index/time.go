//go:build linux

package index

import (
	"encoding/binary"
	"fmt"
	"math"
)

// TimeIndex maps timestamps to offsets: a sparse list of {timestamp,
// offset} entries with strictly increasing timestamps and non-decreasing
// offsets (see the package doc).
type TimeIndex struct{ c core }

// OpenTime opens or creates the time index at path, writable; see
// OpenOffset. maxBytes is rounded down to a multiple of TimeEntrySize.
func OpenTime(path string, base int64, maxBytes int) (*TimeIndex, error) {
	x := &TimeIndex{c: core{kind: "time index", entrySize: TimeEntrySize}}
	if err := x.c.open(path, base, maxBytes, true, scanTime); err != nil {
		return nil, err
	}
	// The slot AppendFinal takes at a seal has its blocks from the start,
	// and each MaybeAppend keeps one more: a seal never grows the file,
	// so a full disk cannot fail it.
	if n := int(x.c.n.Load()); n < x.c.maxEntries {
		if err := x.c.grow(n); err != nil {
			x.c.close()
			return nil, err
		}
	}
	return x, nil
}

// OpenTimeReadOnly opens an existing time index without modifying it; see
// OpenOffsetReadOnly.
func OpenTimeReadOnly(path string, base int64) (*TimeIndex, error) {
	x := &TimeIndex{c: core{kind: "time index", entrySize: TimeEntrySize}}
	if err := x.c.open(path, base, 0, false, scanTime); err != nil {
		return nil, err
	}
	return x, nil
}

func timeAt(b []byte, i int) (ts int64, rel int32) {
	e := b[i*TimeEntrySize : i*TimeEntrySize+TimeEntrySize]
	return int64(binary.BigEndian.Uint64(e)), int32(binary.BigEndian.Uint32(e[8:]))
}

func tsAt(b []byte, i int) int64 {
	return int64(binary.BigEndian.Uint64(b[i*TimeEntrySize:]))
}

func timeRelAt(b []byte, i int) int64 {
	return int64(int32(binary.BigEndian.Uint32(b[i*TimeEntrySize+8:])))
}

// scanTime returns the length of the used prefix of an existing file. The
// search starts at entry 1 because entry 0 may genuinely be all zero (see
// the package doc); only when nothing follows it is it taken as empty.
func scanTime(b []byte) (int, error) {
	slots := len(b) / TimeEntrySize
	if slots == 0 {
		return 0, nil
	}
	var buf [64]int
	n, probes := firstZero(b, 1, slots, TimeEntrySize, buf[:0])
	if n == 1 && zeroEntry(b, 0, TimeEntrySize) {
		return 0, nil
	}
	err := checkSamples(n, probes, checkFirstTime(b), func(prev, i int) error { return checkTimePair(b, prev, i) })
	return n, err
}

func checkFirstTime(b []byte) func(int) error {
	return func(i int) error {
		if ts, rel := timeAt(b, i); ts < 0 || rel < 0 {
			return fmt.Errorf("first entry {%d, %d} has a negative timestamp or is below base: %w", ts, rel, ErrCorrupt)
		}
		return nil
	}
}

func checkTimePair(b []byte, prev, i int) error {
	t0, r0 := timeAt(b, prev)
	t1, r1 := timeAt(b, i)
	if t1 <= t0 || r1 < r0 {
		return fmt.Errorf("entry %d {%d, %d} does not follow entry %d {%d, %d}: %w", i, t1, r1, prev, t0, r0, ErrCorrupt)
	}
	return nil
}

// SanityCheck verifies every entry in O(n); see OffsetIndex.SanityCheck.
func (x *TimeIndex) SanityCheck() error {
	n, b := int(x.c.n.Load()), x.c.buf
	if n == 0 {
		return nil
	}
	if err := checkFirstTime(b)(0); err != nil {
		return fmt.Errorf("cannot verify time index %q: %w", x.c.path, err)
	}
	for i := 1; i < n; i++ {
		if err := checkTimePair(b, i-1, i); err != nil {
			return fmt.Errorf("cannot verify time index %q: %w", x.c.path, err)
		}
	}
	return nil
}

// MaybeAppend adds {timestamp, offset} if timestamp is greater than the
// last entry's (NoTimestamp when empty, so negative timestamps are never
// stored) and returns nil without adding anything otherwise. An offset
// below the last entry's is ErrOutOfOrder even then, as in Kafka. The last
// slot is reserved for AppendFinal, so ErrFull comes one entry early; it
// is only reported when the entry would actually be added.
func (x *TimeIndex) MaybeAppend(timestamp, offset int64) error {
	return x.append(timestamp, offset, false)
}

// AppendFinal is MaybeAppend allowed to use the reserved last slot: the
// segment's final {max timestamp, its offset} entry, appended on roll and
// close before Trim.
func (x *TimeIndex) AppendFinal(timestamp, offset int64) error {
	return x.append(timestamp, offset, true)
}

func (x *TimeIndex) append(timestamp, offset int64, final bool) error {
	c := &x.c
	if err := c.errIfNotWritable("append to"); err != nil {
		return err
	}
	n := int(c.n.Load())
	rel := offset - c.base
	if offset < c.base || rel > math.MaxInt32 {
		return fmt.Errorf("cannot append to time index %q: offset %d with base %d: %w", c.path, offset, c.base, ErrRelativeOverflow)
	}
	lastTs, lastOff := x.lastEntry(n)
	if offset < lastOff {
		return fmt.Errorf("cannot append to time index %q: {%d, %d} after {%d, %d}: %w", c.path, timestamp, offset, lastTs, lastOff, ErrOutOfOrder)
	}
	if timestamp <= lastTs {
		return nil
	}
	limit := c.maxEntries - 1
	if final {
		limit = c.maxEntries
	}
	if n >= limit {
		return fmt.Errorf("cannot append to time index %q: %d entries: %w", c.path, n, ErrFull)
	}
	if err := x.reserve(n, final); err != nil {
		return err
	}
	e := c.buf[n*TimeEntrySize : n*TimeEntrySize+TimeEntrySize]
	binary.BigEndian.PutUint64(e, uint64(timestamp))
	binary.BigEndian.PutUint32(e[8:], uint32(rel))
	c.n.Store(int64(n + 1)) // publish only now; see core.n
	return nil
}

// reserve grows the file for entry n and, unless n is the final entry,
// the final slot after it (see OpenTime).
func (x *TimeIndex) reserve(n int, final bool) error {
	if !final && n+1 < x.c.maxEntries {
		n++
	}
	return x.c.grow(n)
}

// ReserveNext makes sure the file has blocks for the next entry (and the
// final slot after it), so that an append that also indexes can grow the
// file before it changes anything. Writer only.
func (x *TimeIndex) ReserveNext() error {
	c := &x.c
	if err := c.errIfNotWritable("grow"); err != nil {
		return err
	}
	if n := int(c.n.Load()); n < c.maxEntries {
		return x.reserve(n, false)
	}
	return nil
}

// Lookup returns the offset of the entry with the greatest timestamp <=
// timestamp, or base if there is none. It does not allocate and is safe
// concurrently with MaybeAppend.
func (x *TimeIndex) Lookup(timestamp int64) (offset int64) {
	n, base := int(x.c.n.Load()), x.c.base
	if n == 0 {
		return base
	}
	b := x.c.buf
	i := searchTime(b, n, timestamp)
	if i < 0 {
		return base
	}
	return base + timeRelAt(b, i)
}

// searchTime returns the greatest i < n with timestamp <= ts, or -1,
// searching the warm tail first (see warmBytes).
func searchTime(b []byte, n int, ts int64) int {
	lo, hi := 0, n
	if hot := n - warmBytes/TimeEntrySize; hot > 0 {
		if tsAt(b, hot) <= ts {
			lo = hot
		} else {
			hi = hot
		}
	}
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if tsAt(b, h) <= ts {
			lo = h + 1
		} else {
			hi = h
		}
	}
	return lo - 1
}

// TruncateTo drops the entries with offset >= offset, zeroing them. Must
// not overlap readers.
func (x *TimeIndex) TruncateTo(offset int64) error {
	c := &x.c
	if err := c.errIfNotWritable("truncate"); err != nil {
		return err
	}
	// Offsets only need to be non-decreasing for a lower-bound search; the
	// first entry at or above the offset is where the drop starts.
	keep := 0
	if offset > c.base {
		lo, hi, rel := 0, int(c.n.Load()), offset-c.base
		for lo < hi {
			h := int(uint(lo+hi) >> 1)
			if timeRelAt(c.buf, h) < rel {
				lo = h + 1
			} else {
				hi = h
			}
		}
		keep = lo
	}
	c.dropFrom(keep)
	return nil
}

// Reset drops and zeroes every entry. Must not overlap readers.
func (x *TimeIndex) Reset() error {
	if err := x.c.errIfNotWritable("reset"); err != nil {
		return err
	}
	x.c.dropFrom(0)
	return nil
}

// Entries returns the number of entries.
func (x *TimeIndex) Entries() int { return int(x.c.n.Load()) }

// Full reports whether MaybeAppend would refuse a new entry: entries >=
// max-1, the last slot being reserved for AppendFinal. Writer-only.
func (x *TimeIndex) Full() bool { return int(x.c.n.Load()) >= x.c.maxEntries-1 }

// LastEntry returns the last entry, or (NoTimestamp, base) if there is none.
func (x *TimeIndex) LastEntry() (timestamp, offset int64) {
	return x.lastEntry(int(x.c.n.Load()))
}

func (x *TimeIndex) lastEntry(n int) (timestamp, offset int64) {
	if n == 0 {
		return NoTimestamp, x.c.base
	}
	ts, rel := timeAt(x.c.buf, n-1)
	return ts, x.c.base + int64(rel)
}

// Entry returns entry i; it panics unless 0 <= i < Entries().
func (x *TimeIndex) Entry(i int) (timestamp, offset int64) {
	if n := int(x.c.n.Load()); i < 0 || i >= n {
		panic(fmt.Sprintf("index: time index entry %d out of range [0, %d)", i, n))
	}
	ts, rel := timeAt(x.c.buf, i)
	return ts, x.c.base + int64(rel)
}

// Base returns the segment's base offset.
func (x *TimeIndex) Base() int64 { return x.c.base }

// Path returns the file's current path. Writer-only, like Rename.
func (x *TimeIndex) Path() string { return x.c.path }

// Trim cuts the file to exactly Entries()*TimeEntrySize bytes; see
// OffsetIndex.Trim. Append the final entry first: afterwards the index is
// full, reserved slot included.
func (x *TimeIndex) Trim() error { return x.c.trim() }

// Sync flushes the entries and the file size to disk.
func (x *TimeIndex) Sync() error { return x.c.sync() }

// Close unmaps and closes the file without trimming it; see
// OffsetIndex.Close.
func (x *TimeIndex) Close() error { return x.c.close() }

// Delete closes the index and removes its file; see OffsetIndex.Delete.
func (x *TimeIndex) Delete() error { return x.c.delete() }

// Rename moves the file; see OffsetIndex.Rename.
func (x *TimeIndex) Rename(path string) error { return x.c.rename(path) }
