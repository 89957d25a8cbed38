package main

import (
	"time"

	"github.com/idemlog/idemlog/bench/sysstat"
)

// cpuTime returns the process's CPU time so far (sysstat.CPUTime:
// getrusage, user plus system).
func cpuTime() time.Duration { return sysstat.CPUTime() }

// diskWriteBytes returns how many bytes the device holding dir has
// written so far (sysstat.DeviceWrittenBytes: sectors written of
// /sys/dev/block/MAJ:MIN/stat), and false where that cannot be read.
func diskWriteBytes(dir string) (int64, bool) { return sysstat.DeviceWrittenBytes(dir) }
