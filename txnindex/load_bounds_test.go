package txnindex

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// A large file of garbage (here a sparse GiB of zeros, whose first entry
// has version 0) is refused as corrupt at its first entry, without being
// read whole first; one past what any segment's markers can need is
// refused by its size alone.
func TestLoadBoundsLargeFiles(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		size int64
	}{
		{"sparse GiB of zeros", (1 << 30) / EntrySize * EntrySize},
		{"above the bound", maxFileSize + EntrySize},
	} {
		path := filepath.Join(dir, "00000000000000000000.txnindex")
		if err := os.Truncate(path, 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(c.size); err != nil {
			t.Fatal(err)
		}
		f.Close()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		x, err := Open(path, 0)
		runtime.ReadMemStats(&after)
		if err == nil {
			x.Close()
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Open: %v, want ErrCorrupt", c.name, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
			t.Errorf("%s: Open allocated %d bytes", c.name, grew)
		}
	}
}
