//go:build linux

package segment

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/idemlog/idemlog/batch"
)

// unwrittenBytes reports how many bytes of [off, off+n) of the file lie in
// extents the file system marks unwritten (fallocated, never written), by
// FIEMAP; ok is false where the file system does not answer it.
func unwrittenBytes(t *testing.T, path string, off, n int64) (unwritten int64, ok bool) {
	t.Helper()
	const (
		fsIocFiemap        = 0xC020660B // _IOWR('f', 11, struct fiemap)
		fiemapFlagSync     = 0x1
		fiemapExtUnwritten = 0x800
		maxExtents         = 64
	)
	type extent struct {
		Logical, Physical, Length uint64
		_                         [2]uint64
		Flags                     uint32
		_                         [3]uint32
	}
	var req struct {
		Start, Length           uint64
		Flags, Mapped, Count, _ uint32
		Extents                 [maxExtents]extent
	}
	req.Start, req.Length, req.Flags, req.Count = uint64(off), uint64(n), fiemapFlagSync, maxExtents
	fd, err := unix.Open(path, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fsIocFiemap, uintptr(unsafe.Pointer(&req))); errno != 0 {
		return 0, false
	}
	for _, e := range req.Extents[:req.Mapped] {
		if e.Flags&fiemapExtUnwritten == 0 {
			continue
		}
		lo, hi := max(int64(e.Logical), off), min(int64(e.Logical+e.Length), off+n)
		if hi > lo {
			unwritten += hi - lo
		}
	}
	return unwritten, true
}

// TestZeroFillWritesBlocks: Prepare with zero under ReserveZeroFill leaves
// the run ahead of the cursor in written extents (no fallocate), and
// raises the reserved mark; the same Prepare without zero fallocates
// (unwritten extents), which also proves that FIEMAP tells them apart here.
func TestZeroFillWritesBlocks(t *testing.T) {
	t.Parallel()
	opts := Options{MaxBytes: 8 << 20, ReserveAhead: 1 << 20, Mode: WritePwrite, Reserve: ReserveZeroFill}
	for _, zero := range []bool{false, true} {
		dir := t.TempDir()
		s, err := Create(dir, 0, opts)
		if err != nil {
			t.Fatal(err)
		}
		const ahead = 3 << 20
		if err := s.Prepare(0, ahead, false, zero); err != nil {
			t.Fatal(err)
		}
		if got := s.reserved.Load(); got != ahead {
			t.Fatalf("zero=%v: reserved %d after Prepare, want %d", zero, got, ahead)
		}
		unwritten, ok := unwrittenBytes(t, filepath.Join(dir, FileName(0, ".log")), 0, ahead)
		s.Close()
		if !ok {
			t.Skip("FIEMAP not supported here")
		}
		switch {
		case !zero && unwritten == 0:
			t.Skip("fallocate leaves no unwritten extents on this file system: nothing to tell apart")
		case zero && unwritten != 0:
			t.Fatalf("zero-filled run has %d unwritten bytes", unwritten)
		}
	}
}

// TestZeroFillConcurrentAppends: a writer appends while Prepare zero-fills
// ahead of it in another goroutine, piece by piece; a writer that outruns
// the fill waits for it. Every batch reads back intact (no zero landed on
// data) and the file verifies.
func TestZeroFillConcurrentAppends(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{MaxBytes: 16 << 20, IndexMaxBytes: 1 << 20, ReserveAhead: 2 << 20, Mode: WritePwrite, Reserve: ReserveZeroFill}
	s, err := Create(dir, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	prepare := make(chan int64, 64)
	wg.Go(func() {
		for cursor := range prepare {
			if err := s.Prepare(cursor, opts.ReserveAhead, false, true); err != nil {
				t.Error(err)
			}
		}
	})
	var sent []batch.Batch
	off, asked := int64(0), int64(0)
	for i := 0; ; i++ {
		b := testBatch(t, i, 1+i%7, 1500)
		if !s.Fits(len(b), off+int64(b.LastOffsetDelta())) {
			break
		}
		if _, err := s.Append(b, off); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		s.Publish(s.Size())
		sent = append(sent, b)
		off += int64(b.RecordsCount())
		if size := s.Size(); size >= asked-opts.ReserveAhead/2 {
			asked = size + opts.ReserveAhead
			select {
			case prepare <- size:
			default:
			}
		}
	}
	close(prepare)
	wg.Wait()
	data := s.Read(0, s.Size())
	for i, b := range sent {
		n, err := batch.Size(data)
		if err != nil || !bytes.Equal(data[batch.HeaderSize:n], b[batch.HeaderSize:]) {
			t.Fatalf("batch %d of %d does not read back (%v)", i, len(sent), err)
		}
		data = data[n:]
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	r, err := VerifyFile(filepath.Join(dir, FileName(0, ".log")), 0)
	if err != nil || r.Batches != int64(len(sent)) || r.Gaps != 0 {
		t.Fatalf("verify: %+v, %v (%d batches sent)", r, err, len(sent))
	}
}

// TestZeroFillOwnOpenFile: zeroFill writes through a new open file of the
// segment's file, not the segment's own (nor a dup of it, which shares its
// status flags and its writeback-error tracking): a sync_file_range there
// would mark an error on the writer's data as seen, and the syncer's
// fdatasync would then return success over lost data. Status flags tell a
// dup from a new open: set O_APPEND on one, look at the other.
func TestZeroFillOwnOpenFile(t *testing.T) {
	t.Parallel()
	f, err := os.Create(filepath.Join(t.TempDir(), "seg"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zf, err := fillFile(f)
	if err != nil {
		t.Fatal(err)
	}
	defer zf.Close()
	var a, b unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fstat(int(zf.Fd()), &b); err != nil {
		t.Fatal(err)
	}
	if a.Dev != b.Dev || a.Ino != b.Ino {
		t.Fatal("the fill file is another file")
	}
	flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFL, flags|unix.O_APPEND); err != nil {
		t.Fatal(err)
	}
	zflags, err := unix.FcntlInt(zf.Fd(), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	if zflags&unix.O_APPEND != 0 {
		t.Fatal("the fill file shares the segment's open file (a dup): its errors would be the segment's")
	}
}

// TestZeroFillSpare: a spare asked to zero-fill reserves that much
// (rounded to pages) in written blocks, and its segment, once activated,
// takes appends past it that verify.
func TestZeroFillSpare(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{MaxBytes: 4 << 20, IndexMaxBytes: 1 << 20, ReserveAhead: 1 << 20, Mode: WritePwrite, Reserve: ReserveZeroFill}
	sp, err := CreateSpare(dir, opts, 100<<10)
	if err != nil {
		t.Fatal(err)
	}
	page := int64(unix.Getpagesize())
	if want := (100<<10 + page - 1) / page * page; sp.reserved != want {
		t.Fatalf("spare reserved %d bytes, want %d", sp.reserved, want)
	}
	if unwritten, ok := unwrittenBytes(t, sp.f.Name(), 0, sp.reserved); ok && unwritten != 0 {
		t.Fatalf("zero-filled spare has %d unwritten bytes", unwritten)
	}
	s, err := sp.Activate(0)
	if err != nil {
		t.Fatal(err)
	}
	sent, _ := fill(t, s, 0)
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	r, err := VerifyFile(filepath.Join(dir, FileName(0, ".log")), 0)
	if err != nil || r.Batches != int64(len(sent)) || s.Size() <= 100<<10 {
		t.Fatalf("verify: %+v, %v (%d batches sent, %d bytes)", r, err, len(sent), s.Size())
	}
}
