//go:build linux

package mmap

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sentinel errors. Methods wrap them with context, so compare with errors.Is.
var (
	// ErrUnmapped is returned by every Mapping method that would reach the
	// kernel after Unmap, including a second Unmap: the range may already
	// belong to another mapping, so touching it again is never safe.
	ErrUnmapped = errors.New("mapping already unmapped")

	// ErrPopulateUnsupported is returned by PopulateWrite on kernels older
	// than 5.14, which reject MADV_POPULATE_WRITE with EINVAL. Callers fall
	// back to storing one byte per page.
	ErrPopulateUnsupported = errors.New("MADV_POPULATE_WRITE not supported by the kernel")
)

var pageSize = os.Getpagesize()

// PageSize returns the granularity of mappings, msync and madvise.
func PageSize() int { return pageSize }

// Mapping is a MAP_SHARED mapping of part of a file.
//
// The goroutine that calls Unmap owns the Mapping and must ensure that no
// slice obtained from Bytes is used afterwards. All methods may be called
// concurrently; Sync and Advise hold a shared lock so they run in parallel
// with each other but never with Unmap.
type Mapping struct {
	name     string
	writable bool

	mu sync.RWMutex
	// full is exactly the slice mmap returned, starting on the page
	// boundary at or below the requested offset; munmap needs it unchanged.
	// It is nil once unmapped.
	full []byte
	// skew is the distance from the start of full to the requested offset.
	skew int
}

// Map maps length bytes of f starting at offset, which need not be page
// aligned. The mapping stays valid after f is closed.
//
// Map does not check the file size: a store to a page past EOF, or to
// blocks not reserved with Fallocate once the disk is full, raises SIGBUS
// (see the package doc).
func Map(f *os.File, offset int64, length int, writable bool) (*Mapping, error) {
	if offset < 0 || length <= 0 {
		return nil, fmt.Errorf("cannot mmap %q: invalid range offset=%d length=%d", f.Name(), offset, length)
	}
	skew := int(offset % int64(pageSize))
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	var full []byte
	err := withFD(f, func(fd int) (err error) {
		full, err = unix.Mmap(fd, offset-int64(skew), skew+length, prot, unix.MAP_SHARED)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cannot mmap %q at offset %d length %d: %w", f.Name(), offset, length, err)
	}
	return &Mapping{name: f.Name(), writable: writable, full: full, skew: skew}, nil
}

// Bytes returns the mapped range, or nil after Unmap. The slice does not
// keep the mapping alive; see the package doc.
func (m *Mapping) Bytes() []byte {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.full == nil {
		return nil
	}
	return m.full[m.skew:]
}

// Len returns len(m.Bytes()): the requested length, or 0 after Unmap.
func (m *Mapping) Len() int { return len(m.Bytes()) }

// Unmap releases the mapping. Calling it again returns ErrUnmapped.
//
// With Invariants set the address range is not returned to the kernel but
// left inaccessible, so a stale slice faults instead of reading whatever
// would otherwise be mapped there next.
func (m *Mapping) Unmap() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.full == nil {
		return fmt.Errorf("cannot munmap %q: %w", m.name, ErrUnmapped)
	}
	full := m.full
	// Forget the range even if releasing it fails: retrying could hit a
	// range the kernel has handed to someone else in the meantime.
	m.full = nil
	if err := release(full); err != nil {
		return fmt.Errorf("cannot munmap %q: %w", m.name, err)
	}
	return nil
}

func release(b []byte) error {
	if !Invariants {
		return unix.Munmap(b)
	}
	// Mapping anonymous PROT_NONE memory over the range with MAP_FIXED,
	// rather than mprotecting the file mapping, swaps it in one step, so
	// no other mmap can claim the range in between, and drops the file
	// mapping's reference to the inode, so a deleted segment still frees
	// its disk space. Only address space leaks.
	_, err := unix.MmapPtr(-1, 0, unsafe.Pointer(&b[0]), uintptr(len(b)), unix.PROT_NONE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED|unix.MAP_NORESERVE)
	return err
}

// Sync writes the pages covering [off, off+n) of Bytes back to the file
// and waits for the I/O (msync with MS_SYNC).
func (m *Mapping) Sync(off, n int) error {
	return m.rangeOp("msync", off, n, func(b []byte) error {
		return unix.Msync(b, unix.MS_SYNC)
	})
}

// Advise applies madvise advice (a unix.MADV_* constant) to the pages
// covering [off, off+n) of Bytes.
func (m *Mapping) Advise(off, n, advice int) error {
	return m.rangeOp("madvise", off, n, func(b []byte) error {
		return unix.Madvise(b, advice)
	})
}

// PopulateWrite faults in the pages covering [off, off+n) of Bytes for
// writing in one syscall, so the write path takes no page faults. Where a
// store would raise SIGBUS, for instance on a page past EOF, it returns an
// error (EFAULT) instead. It returns ErrPopulateUnsupported on kernels
// without MADV_POPULATE_WRITE.
func (m *Mapping) PopulateWrite(off, n int) error {
	if !m.writable {
		return fmt.Errorf("cannot populate %q for writing: mapping is read-only", m.name)
	}
	return m.rangeOp("populate", off, n, func(b []byte) error {
		err := unix.Madvise(b, unix.MADV_POPULATE_WRITE)
		if err == unix.EINVAL {
			// The kernel also answers EINVAL for a read-only mapping, but
			// that was ruled out above, and rangeOp passes an aligned,
			// valid range, so only unknown advice remains.
			return ErrPopulateUnsupported
		}
		return err
	})
}

// WillNeed starts readahead of the pages covering [off, off+n), for a
// reader about to scan them.
func (m *Mapping) WillNeed(off, n int) error { return m.Advise(off, n, unix.MADV_WILLNEED) }

// DontNeed drops the page-table entries for the pages covering
// [off, off+n). The file contents are unaffected, dirty data included,
// because the mapping is shared; later accesses fault the pages back in.
func (m *Mapping) DontNeed(off, n int) error { return m.Advise(off, n, unix.MADV_DONTNEED) }

// Sequential tells the kernel that [off, off+n) will be read in order, so
// it reads ahead aggressively and drops pages soon after use.
func (m *Mapping) Sequential(off, n int) error { return m.Advise(off, n, unix.MADV_SEQUENTIAL) }

// rangeOp runs op on the span of the mapping that starts at the page
// boundary at or below off and ends at off+n. Only the start needs
// aligning: msync and madvise round the length up to whole pages.
func (m *Mapping) rangeOp(what string, off, n int, op func([]byte) error) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.full == nil {
		return fmt.Errorf("cannot %s %q: %w", what, m.name, ErrUnmapped)
	}
	size := len(m.full) - m.skew
	if off < 0 || n < 0 || off > size-n {
		return fmt.Errorf("cannot %s %q: range [%d, %d) outside mapping of %d bytes", what, m.name, off, off+n, size)
	}
	if n == 0 {
		return nil
	}
	start := m.skew + off
	b := m.full[start-start%pageSize : start+n]
	if err := ignoringEINTR(func() error { return op(b) }); err != nil {
		return fmt.Errorf("cannot %s %q range [%d, %d): %w", what, m.name, off, off+n, err)
	}
	return nil
}

// Fallocate reserves disk blocks for [off, off+n) of f, extending the file
// if needed. Reserving blocks ahead of the write cursor is what makes
// stores through a shared mapping safe; see the package doc. When the
// filesystem is full the error satisfies errors.Is(err, syscall.ENOSPC).
//
// On filesystems without fallocate support it writes zeros over the range
// instead, so the range must not hold data yet, which is always true ahead
// of the write cursor.
func Fallocate(f *os.File, off, n int64) error {
	if off < 0 || n < 0 {
		return fmt.Errorf("cannot fallocate %q: invalid range offset=%d length=%d", f.Name(), off, n)
	}
	if n == 0 {
		return nil // fallocate(2) rejects it; nothing to reserve anyway.
	}
	err := withFD(f, func(fd int) error {
		// Mode 0 also extends the file: with FALLOC_FL_KEEP_SIZE the
		// reserved blocks would lie past EOF, where stores still fault.
		return ignoringEINTR(func() error { return unix.Fallocate(fd, 0, off, n) })
	})
	if errors.Is(err, unix.EOPNOTSUPP) {
		err = writeZeros(f, off, n)
	}
	if err != nil {
		return fmt.Errorf("cannot fallocate %q range [%d, %d): %w", f.Name(), off, off+n, err)
	}
	return nil
}

// writeZeros allocates blocks the slow way; unlike ftruncate, writing data
// leaves no holes.
func writeZeros(f *os.File, off, n int64) error {
	zeros := make([]byte, min(n, 64<<10))
	for n > 0 {
		chunk := min(n, int64(len(zeros)))
		if _, err := f.WriteAt(zeros[:chunk], off); err != nil {
			return err
		}
		off += chunk
		n -= chunk
	}
	return nil
}

// withFD runs fn on f's descriptor. Unlike f.Fd, it neither switches the
// descriptor to blocking mode nor lets a concurrent Close recycle the
// descriptor number while fn runs.
func withFD(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var fnErr error
	if err := rc.Control(func(fd uintptr) { fnErr = fn(int(fd)) }); err != nil {
		return err
	}
	return fnErr
}

// ignoringEINTR retries fn while it fails with EINTR. The Go runtime
// interrupts threads with signals for preemption, and long-running calls
// such as fallocate and msync can report that instead of restarting.
func ignoringEINTR(fn func() error) error {
	for {
		if err := fn(); err != unix.EINTR {
			return err
		}
	}
}
