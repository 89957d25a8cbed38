//go:build linux

package sysstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// CPUTime returns the process's CPU time so far, user plus system, GC and
// every goroutine included (getrusage RUSAGE_SELF). On a shared machine it
// moves far less than wall time: other tenants take the cores, not this
// process's cycles, so CPU per record explains a figure that wall time
// alone cannot.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// DeviceWrittenBytes returns how many bytes the block device holding dir
// has written since boot (sectors written, field 7 of
// /sys/dev/block/MAJ:MIN/stat, in 512-byte sectors), and false where that
// cannot be read (no dir, a filesystem without a block device, such as
// tmpfs). The count is the device's: every process's writes, the
// filesystem's journal and metadata included. So a difference of two
// readings is a run's cost on a quiet machine; a run that does not sync
// leaves dirty pages that are written after it, or never, if their files
// are deleted first.
//
// /proc/self/io's write_bytes is not used: it counts a whole folio, up to
// 2 MiB, each time a clean one is dirtied again, many times the payload
// for small synced writes into a zero-filled file.
func DeviceWrittenBytes(dir string) (int64, bool) {
	if dir == "" {
		return 0, false
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/sys/dev/block/%d:%d/stat", unix.Major(st.Dev), unix.Minor(st.Dev)))
	if err != nil {
		return 0, false
	}
	return parseDeviceWritten(string(b))
}

// parseDeviceWritten reads the sectors-written field of a block device's
// stat file as bytes.
func parseDeviceWritten(stat string) (int64, bool) {
	f := strings.Fields(stat)
	if len(f) < 7 {
		return 0, false
	}
	n, err := strconv.ParseInt(f[6], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n * 512, true
}
