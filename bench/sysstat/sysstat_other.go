//go:build !linux

package sysstat

import "time"

// CPUTime is the process's CPU time on Linux; 0 elsewhere.
func CPUTime() time.Duration { return 0 }

// DeviceWrittenBytes reads Linux's block device statistics; elsewhere it
// reports false.
func DeviceWrittenBytes(dir string) (int64, bool) { return 0, false }
