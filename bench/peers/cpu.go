package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cpuTime returns the process's CPU time so far, user plus system, GC and
// every goroutine included. On a shared machine it moves far less than
// wall time: other tenants steal the cores, not our cycles.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// diskWriteBytes returns how many bytes the device holding dir has
// written so far (sectors written, field 7 of /sys/dev/block/MAJ:MIN/stat,
// in 512-byte sectors), and false where that cannot be read (no dir, a
// filesystem with no block device). The count is the device's: every
// process's writes, the filesystem's journal and metadata included. So
// it is the run's cost on a quiet machine, and, for a run that syncs, all
// of it; a run that does not sync leaves dirty pages to be written after
// it. (Until review: write_bytes of /proc/self/io, which counts a whole
// folio, up to 2 MiB, each time a clean one is dirtied again: 74x the
// payload for small synced writes into a file zero-filled in 1 MiB
// writes.)
func diskWriteBytes(dir string) (int64, bool) {
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
	f := strings.Fields(string(b))
	if len(f) < 7 {
		return 0, false
	}
	n, err := strconv.ParseInt(f[6], 10, 64)
	return n * 512, err == nil
}
