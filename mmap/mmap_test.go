//go:build linux

package mmap

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// tempFile returns a file in dir with its first size bytes allocated.
func tempFile(tb testing.TB, dir string, size int64) *os.File {
	tb.Helper()
	f, err := os.CreateTemp(dir, "segment")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	if err := Fallocate(f, 0, size); err != nil {
		tb.Fatal(err)
	}
	return f
}

func mustMap(tb testing.TB, f *os.File, off int64, n int, writable bool) *Mapping {
	tb.Helper()
	m, err := Map(f, off, n, writable)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func TestMapWriteSyncRead(t *testing.T) {
	ps := PageSize()
	f := tempFile(t, t.TempDir(), int64(2*ps))
	m := mustMap(t, f, 0, 2*ps, true)
	defer m.Unmap()

	msg := []byte("record straddling a page boundary")
	off := ps - 5
	copy(m.Bytes()[off:], msg)
	if err := m.Sync(off, len(msg)); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[off:off+len(msg)], msg) {
		t.Fatalf("file holds %q, want %q", got[off:off+len(msg)], msg)
	}
}

func TestMapUnalignedOffset(t *testing.T) {
	f := tempFile(t, t.TempDir(), 0)
	content := bytes.Repeat([]byte("0123456789"), 1000)
	if _, err := f.Write(content); err != nil {
		t.Fatal(err)
	}
	off := int64(PageSize() + 7)
	m := mustMap(t, f, off, 50, false)
	defer m.Unmap()
	if m.Len() != 50 {
		t.Fatalf("Len() = %d, want 50", m.Len())
	}
	if want := content[off : off+50]; !bytes.Equal(m.Bytes(), want) {
		t.Fatalf("Bytes() = %q, want %q", m.Bytes(), want)
	}
}

func TestMapInvalid(t *testing.T) {
	f := tempFile(t, t.TempDir(), 4096)
	for _, tc := range []struct {
		off int64
		n   int
	}{{-1, 10}, {0, 0}, {0, -1}} {
		if m, err := Map(f, tc.off, tc.n, false); err == nil {
			m.Unmap()
			t.Errorf("Map(off=%d, n=%d) succeeded", tc.off, tc.n)
		}
	}
	ro, err := os.Open(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	_, err = Map(ro, 0, 4096, true)
	if !errors.Is(err, unix.EACCES) || !strings.Contains(err.Error(), "cannot mmap") {
		t.Fatalf("writable Map of read-only file: got %v, want wrapped EACCES", err)
	}
}

func TestUnmapTwice(t *testing.T) {
	f := tempFile(t, t.TempDir(), 4096)
	m := mustMap(t, f, 0, 4096, true)
	if err := m.Unmap(); err != nil {
		t.Fatal(err)
	}
	if err := m.Unmap(); !errors.Is(err, ErrUnmapped) {
		t.Fatalf("second Unmap: got %v, want ErrUnmapped", err)
	}
	if m.Bytes() != nil || m.Len() != 0 {
		t.Fatalf("after Unmap: Bytes() has len %d, Len() = %d; want nil, 0", len(m.Bytes()), m.Len())
	}
	if err := m.Sync(0, 1); !errors.Is(err, ErrUnmapped) {
		t.Fatalf("Sync after Unmap: got %v, want ErrUnmapped", err)
	}
	if err := m.PopulateWrite(0, 1); !errors.Is(err, ErrUnmapped) {
		t.Fatalf("PopulateWrite after Unmap: got %v, want ErrUnmapped", err)
	}
}

func TestPopulateWrite(t *testing.T) {
	ps := PageSize()
	f := tempFile(t, t.TempDir(), int64(4*ps))
	m := mustMap(t, f, 0, 4*ps, true)
	defer m.Unmap()
	err := m.PopulateWrite(1, 3*ps)
	if errors.Is(err, ErrPopulateUnsupported) {
		t.Logf("kernel lacks MADV_POPULATE_WRITE: %v", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}

	// Where a store would raise SIGBUS, past EOF here, populating fails.
	past := mustMap(t, f, 0, 5*ps, true)
	defer past.Unmap()
	if err := past.PopulateWrite(4*ps, 1); !errors.Is(err, unix.EFAULT) {
		t.Fatalf("PopulateWrite past EOF: got %v, want EFAULT", err)
	}

	ro := mustMap(t, f, 0, ps, false)
	defer ro.Unmap()
	if err := ro.PopulateWrite(0, ps); err == nil || errors.Is(err, ErrPopulateUnsupported) {
		t.Fatalf("PopulateWrite on read-only mapping: got %v, want an error", err)
	}
}

func TestSyncAdviseUnaligned(t *testing.T) {
	ps := PageSize()
	f := tempFile(t, t.TempDir(), int64(4*ps))
	m := mustMap(t, f, 100, 3*ps, true)
	defer m.Unmap()
	copy(m.Bytes()[ps-2:], "kept")

	ok := []struct {
		name string
		fn   func() error
	}{
		{"Sync inside a page", func() error { return m.Sync(1, 10) }},
		{"Sync across pages", func() error { return m.Sync(ps-1, 2) }},
		{"Sync all", func() error { return m.Sync(0, m.Len()) }},
		{"Sync empty at end", func() error { return m.Sync(m.Len(), 0) }},
		{"WillNeed", func() error { return m.WillNeed(7, ps) }},
		{"Sequential", func() error { return m.Sequential(ps+1, 1) }},
		{"DontNeed", func() error { return m.DontNeed(3, 2*ps) }},
		{"Advise", func() error { return m.Advise(m.Len()-1, 1, unix.MADV_RANDOM) }},
	}
	for _, tc := range ok {
		if err := tc.fn(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if got := string(m.Bytes()[ps-2 : ps+2]); got != "kept" {
		t.Fatalf("after DontNeed the shared mapping holds %q, want %q", got, "kept")
	}

	bad := []struct {
		name string
		fn   func() error
	}{
		{"negative offset", func() error { return m.Sync(-1, 1) }},
		{"negative length", func() error { return m.Sync(0, -1) }},
		{"past end", func() error { return m.Sync(0, m.Len()+1) }},
		{"starting at end", func() error { return m.Advise(m.Len(), 1, unix.MADV_NORMAL) }},
	}
	for _, tc := range bad {
		if err := tc.fn(); err == nil || errors.Is(err, ErrUnmapped) {
			t.Errorf("%s: got %v, want a range error", tc.name, err)
		}
	}
}

func TestFallocateAllocates(t *testing.T) {
	ps := int64(PageSize())
	dir := t.TempDir()
	f := tempFile(t, dir, 0)
	if err := Fallocate(f, ps, 16*ps); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 17*ps {
		t.Fatalf("size = %d, want %d", st.Size, 17*ps)
	}
	if st.Blocks*512 < 16*ps {
		t.Fatalf("%d bytes allocated, want at least %d", st.Blocks*512, 16*ps)
	}

	// The hazard Fallocate exists for: ftruncate alone allocates nothing.
	sparse := tempFile(t, dir, 0)
	if err := sparse.Truncate(16 * ps); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fstat(int(sparse.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks != 0 {
		t.Logf("filesystem allocated %d blocks on ftruncate", st.Blocks)
	}

	if err := Fallocate(f, -1, 10); err == nil {
		t.Fatal("Fallocate with negative offset succeeded")
	}
	if err := Fallocate(f, 0, 0); err != nil {
		t.Fatalf("empty Fallocate: %v", err)
	}
}

func TestFallocateENOSPC(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("cannot mount a 1 MiB tmpfs on %s (the test needs root or CAP_SYS_ADMIN): %v", dir, err)
	}
	t.Cleanup(func() {
		// MNT_DETACH so that a file left open by a failed test cannot keep
		// the mount, and with it the temp dir, alive.
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("cannot unmount %s: %v", dir, err)
		}
	})

	f := tempFile(t, dir, 256<<10)
	err := Fallocate(f, 256<<10, 4<<20)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Fallocate past the tmpfs size: got %v, want ENOSPC", err)
	}
	if !strings.Contains(err.Error(), "cannot fallocate") {
		t.Fatalf("error lacks context: %v", err)
	}
}
