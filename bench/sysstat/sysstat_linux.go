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

// clockTick is the unit of /proc/stat's counters, USER_HZ: 100 per second
// on every Linux architecture that Go supports (the kernel's ABI fixes it,
// whatever the kernel's own HZ).
const clockTick = 10 * time.Millisecond

// MachineIdle returns the time the machine's CPUs have spent idle (idle
// plus iowait, summed over the CPUs, from the first line of /proc/stat),
// in clock ticks of 10ms, and false where /proc/stat cannot be read. With
// CPUTime it says what share of the cores a process could have had: its
// own CPU time plus the idle time, over the same interval, is what other
// processes (and the hypervisor's steal) left to it.
func MachineIdle() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	return parseMachineIdle(string(b))
}

// parseMachineIdle reads idle and iowait from /proc/stat's "cpu" line.
func parseMachineIdle(stat string) (time.Duration, bool) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, false
	}
	var ticks int64
	for _, s := range f[4:6] { // idle, iowait
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, true
}
