package partition

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/idemlog/idemlog/bench/sysstat"
	"github.com/idemlog/idemlog/mmap"
)

// BenchmarkGroupCommitDevice is the device-bound group-commit cell: 16
// appenders of 100 x 100 B batches under SyncAlways on one partition,
// against the device's own byte rate measured in the same run. Turns of
// the log's appends alternate with turns of a raw writer (write(2) of
// the same batch size with an fdatasync every G chunks, G the appends per
// sync the log's turn achieved, into a fallocated file), each of the
// same bytes; the block device under the directory is read after each
// (sysstat.DeviceWrittenBytes), so each side's device bytes are its own
// on an otherwise quiet machine.
//
// Metrics: records/s of the log; log-MB/s, its bytes (Kafka's framing
// included: 10,997 bytes a batch for 10,000 of values); device-MB/s, what
// the device wrote meanwhile; raw-device-MB/s, what it wrote under the
// raw writer. x-device is log-MB/s over device-MB/s: the share of what
// the device wrote that reaches the log as framed records (the rest is
// each sync's partial last page written again, the journal, the
// indexes), so records/s = x-device x device-MB/s / framed bytes per
// record: where the device's byte rate bounds the cell, x-device is the
// engine's part of the figure. x-raw is log-MB/s over the raw writer's
// MB/s (a single writer whose syncs do not overlap its writes: it keeps
// the device less busy than 16 appenders do).
func BenchmarkGroupCommitDevice(b *testing.B) {
	const writers, records, size, turns = 16, 100, 100, 4
	dir := b.TempDir()
	if _, ok := sysstat.DeviceWrittenBytes(dir); !ok {
		b.Skip("no block device statistics for the temp dir")
	}
	v := makeBatch(b, 1, records, size, 1)
	l, err := Open(filepath.Join(dir, "t-0"), Options{Sync: SyncPolicy{Kind: SyncAlways}})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ReportAllocs()
	perTurn := max(writers, (b.N+turns-1)/turns)
	per := (perTurn + writers - 1) / writers
	var logSecs, rawSecs float64
	var logDev, rawDev, logBytes, rawBytes, appends, syncs int64
	b.ResetTimer()
	for r := range turns {
		dev0, _ := sysstat.DeviceWrittenBytes(dir)
		syncs0 := l.sync.syncs.Load()
		t0 := time.Now()
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				for range per {
					if _, err := l.Append(v); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		logSecs += time.Since(t0).Seconds()
		dev1, _ := sysstat.DeviceWrittenBytes(dir)
		logDev += dev1 - dev0
		n := int64(per * writers)
		logBytes += n * int64(len(v))
		appends += n
		s := max(1, l.sync.syncs.Load()-syncs0)
		syncs += s

		group := max(1, int(n/s))
		t0 = time.Now()
		raw := rawGroupWrite(b, filepath.Join(dir, fmt.Sprintf("raw-%d", r)), len(v), int(n), group)
		rawSecs += time.Since(t0).Seconds()
		dev2, _ := sysstat.DeviceWrittenBytes(dir)
		rawDev += dev2 - dev1
		rawBytes += raw
	}
	b.StopTimer()
	logRate, rawRate := float64(logBytes)/logSecs, float64(rawBytes)/rawSecs
	rawDevRate := float64(rawDev) / rawSecs
	b.ReportMetric(float64(appends*records)/logSecs, "records/s")
	b.ReportMetric(logRate/1e6, "log-MB/s")
	b.ReportMetric(float64(logDev)/logSecs/1e6, "device-MB/s")
	b.ReportMetric(rawDevRate/1e6, "raw-device-MB/s")
	b.ReportMetric(logRate/(float64(logDev)/logSecs), "x-device")
	b.ReportMetric(logRate/rawRate, "x-raw")
	b.ReportMetric(float64(appends)/float64(syncs), "appends/sync")
}

// rawGroupWrite writes chunks chunks of chunk bytes into a new fallocated
// file at path, with an fdatasync after every group and at the end, and
// returns the bytes written; the file is removed.
func rawGroupWrite(tb testing.TB, path string, chunk, chunks, group int) int64 {
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer os.Remove(path)
	defer f.Close()
	if err := mmap.Fallocate(f, 0, int64(chunk*chunks)); err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, chunk)
	for i := range buf {
		buf[i] = byte(i * 131)
	}
	fd := int(f.Fd())
	for i := range chunks {
		if _, err := unix.Pwrite(fd, buf, int64(i*chunk)); err != nil {
			tb.Fatal(err)
		}
		if (i+1)%group == 0 || i == chunks-1 {
			if err := unix.Fdatasync(fd); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return int64(chunk * chunks)
}
