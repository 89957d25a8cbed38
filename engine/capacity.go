package engine

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

const (
	// DefaultMaxPartitions is Options.MaxPartitions' default: an idle
	// partition costs a directory of a few small files and about 16 KiB
	// of heap, so 100,000 of them about 1.6 GB of each at most.
	DefaultMaxPartitions = 100_000
	// DefaultDiskReserve is Options.DiskReserve's default: 64 MiB, or 1%
	// of the filesystem where that is less (a small tmpfs).
	DefaultDiskReserve = 64 << 20
	// defaultDiskReserve marks the default in Options (withDefaults).
	defaultDiskReserve = -1 << 62
	// newPartitionDiskBytes is what a new partition takes on disk before
	// its first append: its directory and three small files, a block each.
	newPartitionDiskBytes = 4 * 4096
	// creationFDs is what a creation needs at most at once (a directory
	// and a file being written, the data dir's sync, a partition's
	// metadata reads), and descriptorReserveMin the fewest free ones it
	// leaves for the partitions' first appends and the rest of the
	// process; a quarter of the limit is kept free when that is more.
	creationFDs          = 8
	descriptorReserveMin = 64
)

// checkCapacity refuses, before anything is created, a creation of n
// partitions of topic to an engine holding have, with pending more being
// created by other creations in progress: past
// Options.MaxPartitions, with too few descriptors free (RLIMIT_NOFILE) or
// too little disk left above Options.DiskReserve for n new directories.
func (e *Engine) checkCapacity(topic string, have, pending, n int) error {
	if n == 0 {
		return nil
	}
	if limit := e.opts.MaxPartitions; limit > 0 && have+pending+n > limit {
		return fmt.Errorf("cannot create %d partitions of %q: the data dir would hold %d, above the limit of %d partitions (engine.Options.MaxPartitions): %w",
			n, topic, have+pending+n, limit, ErrResourceLimit)
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err == nil && rl.Cur != unix.RLIM_INFINITY {
		if open, err := openDescriptors(); err == nil {
			reserve := max(descriptorReserveMin, int(rl.Cur/4))
			if free := int(rl.Cur) - open; free < creationFDs+reserve {
				return fmt.Errorf("cannot create %d partitions of %q: %d of the process's %d descriptors (RLIMIT_NOFILE) are free, fewer than the %d kept free: %w",
					n, topic, free, rl.Cur, creationFDs+reserve, ErrResourceLimit)
			}
		}
	}
	if reserve := e.opts.DiskReserve; reserve > 0 || reserve == defaultDiskReserve {
		var st unix.Statfs_t
		if err := unix.Statfs(e.dir, &st); err == nil {
			if reserve == defaultDiskReserve {
				reserve = min(DefaultDiskReserve, int64(st.Blocks)*st.Bsize/100)
			}
			avail := int64(st.Bavail) * st.Bsize
			// The pending creations' files may not be written yet.
			need := int64(pending+n) * newPartitionDiskBytes
			if avail-need < reserve {
				return fmt.Errorf("cannot create %d partitions of %q: they need about %d bytes and %d are free on the data dir's filesystem, which must keep %d (engine.Options.DiskReserve): %w",
					n, topic, need, avail, reserve, ErrResourceLimit)
			}
		}
	}
	return nil
}

// openDescriptors counts the process's open descriptors.
func openDescriptors() (int, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	return len(names), err
}
