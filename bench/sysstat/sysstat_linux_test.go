//go:build linux

package sysstat

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The stat file's seventh field is sectors written, 512 bytes each, as
// the kernel's Documentation/block/stat.rst lays it out.
func TestParseDeviceWritten(t *testing.T) {
	const stat = "  128933     3245  9132010    58233   482812   301882 53498176  3328112        0   598052  3412884"
	n, ok := parseDeviceWritten(stat)
	if !ok || n != 53498176*512 {
		t.Errorf("parsed %d, %v; want %d", n, ok, int64(53498176*512))
	}
	for _, bad := range []string{"", "1 2 3 4 5 6", "1 2 3 4 5 6 x", "1 2 3 4 5 6 -8"} {
		if n, ok := parseDeviceWritten(bad); ok {
			t.Errorf("%q parsed as %d", bad, n)
		}
	}
}

func TestCPUTimeMoves(t *testing.T) {
	t0 := CPUTime()
	if t0 <= 0 {
		t.Fatalf("CPU time %v", t0)
	}
	x := 0
	for start := time.Now(); time.Since(start) < 30*time.Millisecond; {
		x++
	}
	if t1 := CPUTime(); t1 <= t0 {
		t.Errorf("CPU time did not move over a busy loop of %d turns: %v then %v", x, t0, t1)
	}
}

// A synced write is on the device when fdatasync returns: the count moves
// by at least its size, where the directory sits on a block device.
func TestDeviceWrittenBytesCountsSyncedWrite(t *testing.T) {
	dir := t.TempDir()
	before, ok := DeviceWrittenBytes(dir)
	if !ok {
		t.Skipf("%s is on no block device with statistics (tmpfs?)", dir)
	}
	f, err := os.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 4 << 20
	if _, err := f.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
	after, _ := DeviceWrittenBytes(dir)
	if after-before < size {
		t.Errorf("device wrote %d bytes over a synced write of %d", after-before, size)
	}
	if _, ok := DeviceWrittenBytes(filepath.Join(dir, "missing")); ok {
		t.Errorf("a missing directory has a device count")
	}
}
