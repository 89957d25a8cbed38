//go:build linux

package index

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"sync/atomic"

	"github.com/idemlog/idemlog/mmap"
)

const (
	// OffsetEntrySize and TimeEntrySize are the on-disk entry sizes.
	OffsetEntrySize = 8
	TimeEntrySize   = 12

	// DefaultMaxBytes is Kafka's segment.index.bytes default, used when
	// maxBytes <= 0.
	DefaultMaxBytes = 10 << 20

	// NoTimestamp is Kafka's RecordBatch.NO_TIMESTAMP, the last timestamp
	// of an empty time index.
	NoTimestamp = -1

	// warmBytes is the tail of the index that lookups search first, as
	// Kafka does (KAFKA-6432). Most lookups are for recent offsets; a plain
	// binary search would first probe the middle of the file, pages that
	// only cold readers touch and that the kernel may have evicted, so even
	// tail reads would take page faults. Searching the last 8 KiB first
	// keeps the hot path on a couple of resident pages.
	warmBytes = 8192
)

// core is the state both index kinds share: the file, its mapping and the
// published entry count.
type core struct {
	kind      string // "offset index" or "time index", for messages
	entrySize int
	path      string
	base      int64

	// buf is the whole mapping. It never changes between open and Close,
	// which is what lets Trim run under concurrent readers: they index buf
	// without synchronisation and only ever read entries [0, n).
	buf []byte
	m   *mmap.Mapping
	// f is held only by writable indexes, for Trim (ftruncate) and Sync. A
	// read-only index has nothing to flush, so it keeps no descriptor; a
	// log with thousands of sealed segments would otherwise hold thousands.
	f        *os.File
	writable bool
	closed   bool
	// size is the file's length in bytes. A writable index's mapping
	// covers its whole capacity (maxEntries) from the start, but its file
	// grows only as entries fill it (grow): an index of an idle or small
	// segment holds a block, not segment.index.bytes.
	size int64
	// maxEntries is the capacity: entries that may be stored. Writer-only.
	maxEntries int

	// n is the published entry count, the only field readers and the
	// writer share. The writer stores the entry's bytes and only then
	// stores n+1; a reader loads n once and reads entries [0, n). Go's
	// atomics are sequentially consistent and an atomic store
	// synchronizes-with the load that observes it, so the writes of the
	// entry bytes happen-before any read made after observing n+1: a
	// reader that sees count n sees entries [0, n) complete. The writer
	// never rewrites a published entry except under TruncateTo/Reset, which
	// exclude readers.
	n atomic.Int64
}

func (c *core) open(path string, base int64, maxBytes int, writable bool, scan func([]byte) (int, error)) (err error) {
	c.path, c.base, c.writable = path, base, writable
	fail := func(err error) error {
		return fmt.Errorf("cannot open %s %q: %w", c.kind, path, err)
	}
	if base < 0 {
		return fail(fmt.Errorf("base offset %d: %w", base, ErrInvalidArgument))
	}
	capBytes := 0
	if writable {
		if maxBytes <= 0 {
			maxBytes = DefaultMaxBytes
		}
		capBytes = maxBytes - maxBytes%c.entrySize
		if capBytes == 0 || maxBytes > math.MaxInt32 {
			return fail(fmt.Errorf("max size %d bytes for %d-byte entries: %w", maxBytes, c.entrySize, ErrInvalidArgument))
		}
	}

	flag := os.O_RDONLY
	if writable {
		flag = os.O_RDWR | os.O_CREATE
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return fail(err)
	}
	defer func() {
		if err != nil || !writable {
			f.Close()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	size := st.Size()
	if size%int64(c.entrySize) != 0 || size/int64(c.entrySize) > math.MaxInt32 {
		return fail(fmt.Errorf("file size %d is not a multiple of %d-byte entries: %w", size, c.entrySize, ErrCorrupt))
	}

	n := 0
	var m *mmap.Mapping
	if size > 0 {
		if m, err = mmap.Map(f, 0, int(size), false); err != nil {
			return fail(err)
		}
		if n, err = scan(m.Bytes()); err != nil {
			m.Unmap()
			return fail(err)
		}
	}

	if writable {
		if m != nil {
			if err := m.Unmap(); err != nil {
				return fail(err)
			}
			m = nil
		}
		// Cutting the file back to the used prefix before preallocating
		// guarantees the tail reads as zeros even if it held torn garbage,
		// which the zero terminator and Append both rely on. The prefix
		// itself has no holes: every block of it holds non-zero entries.
		used := int64(n * c.entrySize)
		if size > used {
			if err := f.Truncate(used); err != nil {
				return fail(err)
			}
		}
		capBytes = max(capBytes, int(used))
		// Mapped at full capacity, allocated only up to the used prefix:
		// grow extends the file (with allocated blocks, so a store never
		// meets a hole on a full disk) before an entry lands past it.
		if m, err = mmap.Map(f, 0, capBytes, true); err != nil {
			return fail(err)
		}
		size = used
		c.f = f
	}

	c.m, c.size = m, size
	if m != nil {
		c.buf = m.Bytes()
	}
	c.maxEntries = capBytes / c.entrySize
	if !writable {
		c.maxEntries = n
	}
	c.n.Store(int64(n))
	return nil
}

// growMinBytes is the least a writable index's file grows by: a block.
const growMinBytes = 4096

// grow makes the file long enough for entry n (0-based), doubling it
// (at least growMinBytes, at most the capacity, in whole entries) with
// allocated blocks: Kafka sizes an index at its maximum and trims it at
// the roll, which on a filesystem that allocates (fallocate) costs every
// segment segment.index.bytes up front. Writer only; n < maxEntries.
func (c *core) grow(n int) error {
	need := int64(n+1) * int64(c.entrySize)
	if need <= c.size {
		return nil
	}
	capBytes := int64(c.maxEntries) * int64(c.entrySize)
	want := min(capBytes, max(need, 2*c.size, growMinBytes))
	want -= want % int64(c.entrySize)
	want = max(want, need)
	if err := mmap.Fallocate(c.f, c.size, want-c.size); err != nil {
		return fmt.Errorf("cannot grow %s %q to %d bytes: %w", c.kind, c.path, want, err)
	}
	c.size = want
	return nil
}

// errIfNotWritable returns the reason a mutation is refused, or nil.
func (c *core) errIfNotWritable(verb string) error {
	if c.closed {
		return fmt.Errorf("cannot %s %s %q: %w", verb, c.kind, c.path, ErrClosed)
	}
	if !c.writable {
		return fmt.Errorf("cannot %s %s %q: %w", verb, c.kind, c.path, ErrReadOnly)
	}
	return nil
}

// dropFrom drops entries [keep, n). The count goes down before the bytes
// are cleared so that a new lookup never reads a cleared entry; readers are
// excluded anyway (see the package doc), because one that loaded the old
// count could still meet zeros mid-search.
func (c *core) dropFrom(keep int) {
	n := int(c.n.Load())
	if keep >= n {
		return
	}
	c.n.Store(int64(keep))
	clear(c.buf[keep*c.entrySize : n*c.entrySize])
}

func (c *core) trim() error {
	if c.closed {
		return fmt.Errorf("cannot trim %s %q: %w", c.kind, c.path, ErrClosed)
	}
	if !c.writable {
		// A read-only handle never modifies the file; an untrimmed one is
		// still read correctly thanks to the zero terminator.
		return nil
	}
	n := int(c.n.Load())
	used := int64(n * c.entrySize)
	if c.size != used {
		// The mapping is deliberately kept as it is, larger than the file:
		// remapping would pull memory from under concurrent readers, and
		// they only read entries [0, n), which stay inside the file. Nothing
		// stores past n any more because the capacity shrinks to n, so the
		// region past EOF, where a store would raise SIGBUS, is never
		// touched.
		if err := c.f.Truncate(used); err != nil {
			return fmt.Errorf("cannot trim %s %q: %w", c.kind, c.path, err)
		}
		c.size = used
	}
	c.maxEntries = n
	return nil
}

func (c *core) sync() error {
	if c.closed {
		return fmt.Errorf("cannot sync %s %q: %w", c.kind, c.path, ErrClosed)
	}
	if c.f == nil {
		return nil
	}
	// fsync rather than msync: on Linux it writes back pages dirtied
	// through the shared mapping too, and it also persists the file size
	// that Trim and the preallocation changed.
	if err := c.f.Sync(); err != nil {
		return fmt.Errorf("cannot sync %s %q: %w", c.kind, c.path, err)
	}
	return nil
}

func (c *core) close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	c.n.Store(0)
	c.buf = nil
	var errs []error
	if c.m != nil {
		errs = append(errs, c.m.Unmap())
		c.m = nil
	}
	if c.f != nil {
		errs = append(errs, c.f.Close())
		c.f = nil
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cannot close %s %q: %w", c.kind, c.path, err)
	}
	return nil
}

func (c *core) delete() error {
	err := c.close()
	if rerr := os.Remove(c.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, fmt.Errorf("cannot delete %s %q: %w", c.kind, c.path, rerr))
	}
	return err
}

func (c *core) rename(path string) error {
	if err := os.Rename(c.path, path); err != nil {
		return fmt.Errorf("cannot rename %s %q: %w", c.kind, c.path, err)
	}
	c.path = path
	return nil
}

// zeroEntry reports whether slot i is all zeros, the end-of-entries mark.
func zeroEntry(b []byte, i, size int) bool {
	for _, x := range b[i*size : (i+1)*size] {
		if x != 0 {
			return false
		}
	}
	return true
}

// firstZero binary-searches [lo, slots) for the first all-zero slot,
// assuming that the slots before it are non-zero and the ones after zero
// (see "the zero terminator" in the package doc). It appends the non-zero
// slots it probed to probes; they come out in increasing order because
// each such probe raises lo past itself, so they double as free samples
// for the order check.
func firstZero(b []byte, lo, slots, size int, probes []int) (int, []int) {
	hi := slots
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if zeroEntry(b, h, size) {
			hi = h
		} else {
			probes = append(probes, h)
			lo = h + 1
		}
	}
	return lo, probes
}

// checkSamples calls ok(prev, i) for each consecutive pair of the ordered
// sample indexes 0, probes..., n-1, skipping duplicates, and first(0).
func checkSamples(n int, probes []int, first func(i int) error, ok func(prev, i int) error) error {
	if n == 0 {
		return nil
	}
	if err := first(0); err != nil {
		return err
	}
	prev := 0
	visit := func(i int) error {
		if i <= prev || i >= n {
			return nil
		}
		err := ok(prev, i)
		prev = i
		return err
	}
	for _, i := range probes {
		if err := visit(i); err != nil {
			return err
		}
	}
	return visit(n - 1)
}
