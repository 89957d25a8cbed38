package lazyfs

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemlog/idemlog/powercut/internal/child"
	"golang.org/x/sys/unix"
)

// mounted mounts a fresh mount of d in a temporary directory, skipping the
// test loudly where FUSE is unavailable.
func mounted(t *testing.T, d *Disk) *Mount {
	t.Helper()
	dir := t.TempDir()
	m, err := d.Mount(dir)
	if errors.Is(err, ErrUnavailable) {
		fmt.Fprintf(os.Stderr, "WARNING: lazy filesystem tests skipped: %v\n", err)
		t.Skipf("WARNING: FUSE unavailable, power-cut model not tested: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Unmount() })
	return m
}

// cut unmounts, cuts the power and mounts the disk again.
func cut(t *testing.T, d *Disk, m *Mount, torn Torn) *Mount {
	t.Helper()
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	d.Cut(torn)
	m2, err := d.Mount(m.Dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m2.Unmount() })
	return m2
}

func mustWrite(t *testing.T, f *os.File, b []byte, off int64) {
	t.Helper()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func syncDir(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// createSynced creates path with content, syncs it and its directory.
func createSynced(t *testing.T, path string, content []byte) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	mustWrite(t, f, content, 0)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	syncDir(t, filepath.Dir(path))
	return f
}

func TestCutKeepsOnlySyncedWrites(t *testing.T) {
	d := NewDisk()
	m := mounted(t, d)
	path := filepath.Join(m.Dir, "f")
	f := createSynced(t, path, []byte("synced"))
	mustWrite(t, f, []byte(" and lost"), 6)
	// fdatasync counts as a sync too: write, fdatasync, write more.
	g, err := os.OpenFile(filepath.Join(m.Dir, "g"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	syncDir(t, m.Dir)
	mustWrite(t, g, []byte("datasynced"), 0)
	if err := unix.Fdatasync(int(g.Fd())); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, g, []byte("XXXX"), 0)
	if got := readFile(t, path); string(got) != "synced and lost" {
		t.Fatalf("before the cut %q", got)
	}
	f.Close()
	g.Close()
	m = cut(t, d, m, Torn{})
	if got := readFile(t, path); string(got) != "synced" {
		t.Fatalf("after the cut f holds %q, want only the synced %q", got, "synced")
	}
	if got := readFile(t, filepath.Join(m.Dir, "g")); string(got) != "datasynced" {
		t.Fatalf("after the cut g holds %q, want %q", got, "datasynced")
	}
}

func TestCutUndoesRenameWithoutDirSync(t *testing.T) {
	d := NewDisk()
	m := mounted(t, d)
	createSynced(t, filepath.Join(m.Dir, "old"), []byte("x")).Close()
	if err := os.Rename(filepath.Join(m.Dir, "old"), filepath.Join(m.Dir, "new")); err != nil {
		t.Fatal(err)
	}
	m = cut(t, d, m, Torn{})
	if _, err := os.Stat(filepath.Join(m.Dir, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("new name survived an unsynced rename: %v", err)
	}
	if got := readFile(t, filepath.Join(m.Dir, "old")); string(got) != "x" {
		t.Fatalf("old name holds %q", got)
	}
	// Synced, the rename survives.
	if err := os.Rename(filepath.Join(m.Dir, "old"), filepath.Join(m.Dir, "new")); err != nil {
		t.Fatal(err)
	}
	syncDir(t, m.Dir)
	m = cut(t, d, m, Torn{})
	if got := readFile(t, filepath.Join(m.Dir, "new")); string(got) != "x" {
		t.Fatalf("synced rename lost: %q", got)
	}
	if _, err := os.Stat(filepath.Join(m.Dir, "old")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old name back after a synced rename: %v", err)
	}
}

func TestCutDropsCreationWithoutDirSync(t *testing.T) {
	d := NewDisk()
	m := mounted(t, d)
	if err := os.Mkdir(filepath.Join(m.Dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	syncDir(t, m.Dir)
	// A file synced itself, but its directory never: the name is lost.
	f, err := os.Create(filepath.Join(m.Dir, "sub", "f"))
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, []byte("data"), 0)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// A directory whose parent was never synced is lost with its content.
	if err := os.MkdirAll(filepath.Join(m.Dir, "sub", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	createSynced(t, filepath.Join(m.Dir, "sub", "deep", "g"), []byte("g")).Close()
	m = cut(t, d, m, Torn{})
	ents, err := os.ReadDir(filepath.Join(m.Dir, "sub"))
	if err != nil {
		t.Fatalf("synced directory lost: %v", err)
	}
	if len(ents) != 0 {
		t.Fatalf("sub holds %v after the cut, want nothing", ents)
	}
}

func TestCutUndoesUnsyncedUnlinkAndTruncate(t *testing.T) {
	d := NewDisk()
	m := mounted(t, d)
	createSynced(t, filepath.Join(m.Dir, "gone"), []byte("still here")).Close()
	f := createSynced(t, filepath.Join(m.Dir, "short"), bytes.Repeat([]byte("a"), 3*PageSize+10))
	if err := f.Truncate(5); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Remove(filepath.Join(m.Dir, "gone")); err != nil {
		t.Fatal(err)
	}
	m = cut(t, d, m, Torn{})
	if got := readFile(t, filepath.Join(m.Dir, "gone")); string(got) != "still here" {
		t.Fatalf("unsynced unlink not undone: %q", got)
	}
	if got := readFile(t, filepath.Join(m.Dir, "short")); len(got) != 3*PageSize+10 {
		t.Fatalf("unsynced truncate not undone: %d bytes", len(got))
	}
	// Synced, the truncation survives, and extending again reads zeros.
	f, err := os.OpenFile(filepath.Join(m.Dir, "short"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(5); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(PageSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	m = cut(t, d, m, Torn{})
	want := append([]byte("aaaaa"), make([]byte, PageSize-5)...)
	if got := readFile(t, filepath.Join(m.Dir, "short")); !bytes.Equal(got, want) {
		t.Fatalf("synced truncate+extend: got %d bytes %q...", len(got), got[:min(len(got), 16)])
	}
}

func TestFallocateExtendsAndSurvivesOnlySynced(t *testing.T) {
	d := NewDisk()
	m := mounted(t, d)
	f := createSynced(t, filepath.Join(m.Dir, "f"), []byte("head"))
	if err := unix.Fallocate(int(f.Fd()), 0, 0, 1<<20); err != nil {
		t.Fatal(err)
	}
	if st, _ := f.Stat(); st.Size() != 1<<20 {
		t.Fatalf("fallocate left size %d", st.Size())
	}
	f.Close()
	m = cut(t, d, m, Torn{})
	if got := readFile(t, filepath.Join(m.Dir, "f")); string(got) != "head" {
		t.Fatalf("unsynced fallocate survived: %d bytes", len(got))
	}
	if d.Stats().Allocates == 0 {
		t.Fatal("fallocate did not reach the model")
	}
}

func TestTornCutKeepsSomeUnsyncedPages(t *testing.T) {
	// Over 200 seeds, a torn cut must sometimes keep none, sometimes
	// some and sometimes all of 8 unsynced pages, and whatever it keeps
	// must be whole pages of the written data.
	var none, some, all int
	for seed := uint64(0); seed < 200; seed++ {
		d := NewDisk()
		root := d.root
		n, _ := d.create(root, "f", false, true)
		d.sync(root)
		d.sync(n)
		data := bytes.Repeat([]byte{7}, 8*PageSize)
		d.write(n, data, 0, 0)
		d.Cut(Torn{Rand: rand.New(rand.NewPCG(seed, 1))})
		buf := make([]byte, 8*PageSize)
		got := buf[:d.read(n, buf, 0)]
		kept := 0
		for p := 0; p*PageSize < len(got); p++ {
			pg := got[p*PageSize : min(len(got), (p+1)*PageSize)]
			switch {
			case bytes.Equal(pg, data[:len(pg)]):
				kept++
			case !allZero(pg):
				t.Fatalf("seed %d: page %d is neither written nor zero", seed, p)
			}
		}
		switch kept {
		case 0:
			none++
		case 8:
			all++
		default:
			some++
		}
	}
	if none == 0 || some == 0 || all == 0 {
		t.Fatalf("torn cuts kept none %d, some %d, all %d times: want each at least once", none, some, all)
	}
}

// TestMappedWritesChild maps the file it is given, stores through the
// mapping and, when asked, msyncs; then it reports and waits to be killed.
func TestMappedWritesChild(t *testing.T) {
	path := os.Getenv("LAZYFS_MMAP_FILE")
	if path == "" {
		t.Skip("child process of TestMappedWritesSurviveOnlyWithMsync")
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, 2*PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Madvise(b, unix.MADV_POPULATE_WRITE); err != nil && err != unix.EINVAL {
		t.Fatal(err)
	}
	copy(b, "synced through the mapping")
	if err := unix.Msync(b, unix.MS_SYNC); err != nil {
		t.Fatal(err)
	}
	copy(b[PageSize:], "never synced")
	fmt.Println("written")
	select {}
}

func TestMappedWritesSurviveOnlyWithMsync(t *testing.T) {
	d := NewDisk()
	m := mounted(t, d)
	path := filepath.Join(m.Dir, "mapped")
	f := createSynced(t, path, nil)
	if err := f.Truncate(2 * PageSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	c := child.Start(t, "TestMappedWritesChild", "LAZYFS_MMAP_FILE="+path)
	if l := <-c.Lines; l != "written" {
		c.Abort()
		t.Fatalf("child said %q", l)
	}
	c.Kill()
	if _, err := c.Wait(); err == nil {
		t.Fatal("child exited cleanly")
	}
	// A process crash keeps both writes (they are in the page cache).
	got := readFile(t, path)
	if !strings.HasPrefix(string(got), "synced through the mapping") || !strings.HasPrefix(string(got[PageSize:]), "never synced") {
		t.Fatalf("after SIGKILL the file holds %q / %q", got[:32], got[PageSize:PageSize+16])
	}
	m = cut(t, d, m, Torn{})
	got = readFile(t, filepath.Join(m.Dir, "mapped"))
	if !strings.HasPrefix(string(got), "synced through the mapping") {
		t.Fatalf("msynced store lost: %q", got[:32])
	}
	if !allZero(got[PageSize:]) {
		t.Fatalf("store never msynced survived the cut: %q", got[PageSize:PageSize+16])
	}
}
