// Package mmap is a small layer over golang.org/x/sys/unix for log segments
// that are written through shared, writable memory mappings. It is Linux
// only; this file builds everywhere so that the package documentation does.
//
// Writing through a MAP_SHARED mapping is fast because a store into the
// slice is a store into the page cache: no syscall, no copy. The price is
// that errors which write(2) would report as return values arrive as
// signals instead, and a signal inside a Go program is a crash. The package
// exists to prevent two such hazards.
//
// # Hazard 1: writing past allocated blocks
//
// When a store dirties a page of a shared file mapping, the filesystem must
// find a disk block for it. If the page lies over a hole and the disk is
// full, there is nowhere to report ENOSPC, so the kernel raises SIGBUS and
// the process dies, possibly losing every record that was acknowledged but
// not yet synced. Extending the file with ftruncate does not help: it only
// moves the end-of-file, producing a sparse file whose new range is all
// holes. The blocks must be reserved before the first store reaches them.
//
// The rule is therefore: callers keep the region ahead of the write cursor
// reserved with Fallocate, and never store into a byte that has not been
// covered by a successful Fallocate. Fallocate uses mode 0, which really
// reserves blocks, so ENOSPC is returned as an ordinary error (matching
// errors.Is(err, syscall.ENOSPC)) at a point where the engine can still
// refuse the write cleanly. On filesystems that do not implement fallocate
// it writes zeros instead, which is slower but reserves blocks all the same.
//
// # Hazard 2: using a slice after Unmap
//
// Mapping.Bytes returns a slice that points outside the Go heap; the garbage
// collector does not keep the memory alive, so nothing stops code from using
// the slice after Unmap. In the best case that faults. In the worst case the
// kernel has already reused the address range for a later mapping, perhaps
// another segment, and the stale slice silently reads or corrupts it.
//
// Two measures mitigate this. Unmap drops the slice held by the Mapping, so
// Bytes returns nil afterwards and a caller that re-fetches the slice gets
// an index panic rather than stale memory. And in builds with the
// "invariants" tag, or with -race (see Invariants), Unmap does not release
// the address range at all: it replaces the mapping with an inaccessible
// (PROT_NONE) anonymous one and deliberately leaks it, so any later use of
// a stale slice faults deterministically instead of reading whatever was
// mapped there next. Because the file mapping itself is gone, a deleted
// segment's disk space is still freed; only address space is leaked.
//
// # Ownership
//
// A Mapping has one owner, the goroutine responsible for calling Unmap. The
// owner must ensure that nobody still uses a slice obtained from Bytes when
// it calls Unmap; the package cannot check that for slices that have
// escaped. The methods themselves are safe for concurrent use, and those
// that reach the kernel return ErrUnmapped rather than touching a range
// that has been released.
package mmap
