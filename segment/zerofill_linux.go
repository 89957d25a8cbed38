//go:build linux

package segment

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ZeroFillSupported reports whether ReserveZeroFill can zero-fill here.
const ZeroFillSupported = true

// zeroPage is the source of every zero write (read-only).
var zeroPage [zeroPiece]byte

// zeroFill writes zeros over [off, off+n) of the file open as zf,
// extending it, and waits until they are on the device
// (sync_file_range), so that the blocks are allocated and written (not
// fallocate's unwritten extents) before anyone appends there. An
// fdatasync after an overwrite of written blocks flushes data only; after
// a write into unwritten blocks it must also commit the extent conversion
// to the journal (Options.Reserve has the figures). The allocation itself
// reaches the journal with the next fdatasync of the file.
//
// zf must be a file of its own (fillFile), never the segment's descriptor
// or a dup of it: sync_file_range's wait reports a writeback error from
// anywhere in the file and marks it seen for the open file it was called
// on, so on the segment's own it could swallow an error on the writer's
// data before the syncer's fdatasync sees it, and acknowledged data would
// be lost silently. Write errors are tracked per open file, so the
// syncer's fdatasync still reports them.
func zeroFill(zf *os.File, off, n int64) error {
	fd := int(zf.Fd())
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

// fillFile opens f's file again, as a new open file (not a dup, which
// would share f's error tracking): through /proc/self/fd, or by name
// where there is no /proc (a spare renamed since has moved: the fill then
// fails and the caller fallocates).
func fillFile(f *os.File) (*os.File, error) {
	zf, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), os.O_WRONLY, 0)
	if err != nil {
		zf, err = os.OpenFile(f.Name(), os.O_WRONLY, 0)
	}
	return zf, err
}
