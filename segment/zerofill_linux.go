//go:build linux

package segment

import (
	"os"

	"golang.org/x/sys/unix"
)

// zeroPage is the source of every zero write (read-only).
var zeroPage [zeroPiece]byte

// zeroFill writes zeros over [off, off+n) of f, extending it, and waits
// until they are on the device (sync_file_range), so that the blocks are
// allocated and written (not fallocate's unwritten extents) before anyone
// appends there. An fdatasync after an overwrite of written blocks flushes
// data only; after a write into unwritten blocks it must also commit the
// extent conversion to the journal (Options.Reserve has the figures). The
// allocation itself reaches the journal with the next fdatasync of f.
func zeroFill(f *os.File, off, n int64) error {
	fd := int(f.Fd())
	for n > 0 {
		k := min(n, int64(zeroPiece))
		for w := int64(0); w < k; {
			m, err := unix.Pwrite(fd, zeroPage[:k-w], off+w)
			if err != nil {
				if err == unix.EINTR {
					continue
				}
				return err
			}
			w += int64(m)
		}
		for {
			err := unix.SyncFileRange(fd, off, k, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			break
		}
		off, n = off+k, n-k
	}
	return nil
}
