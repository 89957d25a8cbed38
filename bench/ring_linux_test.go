//go:build linux

package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ringFiles returns the baseline files in dir and their total size.
func ringFiles(t *testing.T, dir string) ([]string, int64) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var total int64
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".bench-baseline-") {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, e.Name())
		total += fi.Size()
	}
	return names, total
}

// The ring holds at most what retention would: however much the baseline
// writes, its files never take more than bytesOnDisk, and remove leaves
// none behind.
func TestBaselineRingBounded(t *testing.T) {
	dir := t.TempDir()
	const seg = 1 << 20
	r := newBaselineRing(dir, seg, 2*seg, false, 2, nil) // 1 MiB of full files per writer
	var written int64
	for deadline := time.Now().Add(10 * time.Second); written < 8*r.bytesOnDisk() && time.Now().Before(deadline); {
		n, secs, err := r.slice(context.Background(), 64<<10, 0, 5*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if n <= 0 || secs <= 0 {
			t.Fatalf("slice wrote %d bytes in %v s", n, secs)
		}
		written += n
		if err := r.settle(); err != nil {
			t.Fatal(err)
		}
		if names, size := ringFiles(t, dir); size > r.bytesOnDisk() {
			t.Fatalf("after %d bytes written the ring's files take %d bytes (%v), bound %d", written, size, names, r.bytesOnDisk())
		}
	}
	if written < 8*r.bytesOnDisk() {
		t.Fatalf("only %d bytes written in 10 s", written)
	}
	r.remove()
	if names, _ := ringFiles(t, dir); len(names) != 0 {
		t.Errorf("files left after remove: %v", names)
	}
}

// Under fsync always the ring reuses its oldest file for the next one, as
// the engine reuses a deleted segment's file: the next file then holds
// the old bytes beyond what it has been written, where a new, fallocated
// one reads as zeros.
func TestBaselineRingRecycles(t *testing.T) {
	for _, recycle := range []bool{false, true} {
		dir := t.TempDir()
		const seg, chunk = 256 << 10, 16 << 10
		r := newBaselineRing(dir, seg, seg, recycle, 1, nil)
		// Three files' worth and a chunk: the fourth file is started
		// with the ring full, and holds one chunk.
		for written := int64(0); written < 3*seg+chunk; {
			n, _, err := r.slice(context.Background(), chunk, 1, time.Microsecond)
			if err != nil {
				t.Fatal(err)
			}
			written += n
		}
		w := r.writers[0]
		if w.off != chunk {
			t.Fatalf("recycle %v: current file at %d, want %d", recycle, w.off, chunk)
		}
		tail := make([]byte, chunk)
		if _, err := w.f.ReadAt(tail, seg-chunk); err != nil {
			// Opened write-only: read through a new handle.
			f, err := os.Open(filepath.Join(dir, filepath.Base(w.f.Name())))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.ReadAt(tail, seg-chunk); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		old := !bytes.Equal(tail, make([]byte, chunk))
		if old != recycle {
			t.Errorf("recycle %v: the new file's tail holds old bytes: %v", recycle, old)
		}
		r.remove()
	}
}
