//go:build linux

package bench

import (
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// evictPageCache drops the page-cache pages of every file under dir (the
// engine is closed, so they are clean) and returns the bytes of the files
// it went through.
//
// Why: on the project's VM, page-cache writes slow from about 5.7 GB/s to
// the disk's 0.45 GB/s once some 4 GB of the guest's memory hold cached
// pages, and recover when those pages are freed. A baseline measured with
// the run's gigabytes still cached ran in that slow state (0.41-3.8 GB/s
// after 2 s runs), and a run that had written its first gigabytes fast
// came out at 2-7x "the machine". Dropping the run's pages first starts
// the baseline from the page-cache state the run started from, so the
// ratio can only err on the engine's side.
func evictPageCache(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return nil
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil {
			n += fi.Size()
		}
		_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		return nil
	})
	return n
}
