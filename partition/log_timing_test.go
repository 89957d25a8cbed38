package partition

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/mmap"
	"github.com/idemlog/idemlog/segment"
)

// Every benchmark here measures its raw machine baseline in the same run,
// on the same directory, and reports the ratio: absolute numbers on a
// shared 2-core VM mean little on their own.

var openGiB = flag.Int("open.gib", 1, "size of the log BenchmarkOpenClean reopens")

// benchBatch returns a valid plain batch of about size bytes.
func benchBatch(b testing.TB, size int) []byte {
	return makeBatch(b, 1, 1, size-batch.HeaderSize-12, 1)
}

// baselineWrite measures sequential write(2) of total bytes, in chunks of
// chunk, into a file preallocated with fallocate, syncing every group
// chunks (0: never). It returns bytes per second.
func baselineWrite(tb testing.TB, dir string, chunk, total, group int) float64 {
	f, err := os.Create(filepath.Join(dir, "baseline"))
	if err != nil {
		tb.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := mmap.Fallocate(f, 0, int64(total)); err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, chunk)
	for i := range buf {
		buf[i] = byte(i)
	}
	start := time.Now()
	for i, off := 0, 0; off < total; i, off = i+1, off+chunk {
		if _, err := f.WriteAt(buf, int64(off)); err != nil {
			tb.Fatal(err)
		}
		if group > 0 && (i+1)%group == 0 {
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return float64(total) / time.Since(start).Seconds()
}

func report(b *testing.B, bytes int64, base float64) {
	got := float64(bytes) / b.Elapsed().Seconds()
	b.ReportMetric(got/1e9, "GB/s")
	b.ReportMetric(base/1e9, "baseline-GB/s")
	b.ReportMetric(got/base, "x-baseline")
}

// BenchmarkAppendNever64K: one partition, SyncNever, 64 KiB batches,
// against write(2) of the same bytes into a preallocated file.
func BenchmarkAppendNever64K(b *testing.B) {
	for _, mode := range []segment.WriteMode{segment.WriteMmap, segment.WritePwrite} {
		name := map[segment.WriteMode]string{segment.WriteMmap: "mmap", segment.WritePwrite: "pwrite"}[mode]
		b.Run("mode="+name, func(b *testing.B) {
			dir := b.TempDir()
			v := benchBatch(b, 64<<10)
			l, err := Open(filepath.Join(dir, "t-0"), Options{Segment: segment.Options{Mode: mode}})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			n := int64(b.N) * int64(len(v))
			// The baseline runs first, on the same bytes, so both meet the
			// page cache and the writeback of the disk in the same state.
			base := baselineWrite(b, dir, len(v), int(min(n, 1<<30)), 0)
			b.SetBytes(int64(len(v)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := l.Append(v); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			report(b, n, base)
		})
	}
}

// BenchmarkAppendNeverSmall: one partition, SyncNever, 100-byte batches:
// the append path's fixed costs (lock, index, watermark publication)
// dominate, so this is where an extra atomic on that path would show.
func BenchmarkAppendNeverSmall(b *testing.B) {
	l, err := Open(filepath.Join(b.TempDir(), "t-0"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	v := benchBatch(b, 100)
	b.SetBytes(int64(len(v)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := l.Append(v); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer() // the deferred Close syncs what was appended: off the clock
}

// BenchmarkAppendNeverSmallParked is BenchmarkAppendNeverSmall with a
// reader parked on Advanced throughout, as a Fetch long-poll would be:
// appends then close a channel and the reader takes a new one.
func BenchmarkAppendNeverSmallParked(b *testing.B) {
	l, err := Open(filepath.Join(b.TempDir(), "t-0"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	v := benchBatch(b, 100)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-l.Advanced():
			case <-stop:
				return
			}
		}
	}()
	b.SetBytes(int64(len(v)))
	b.ResetTimer()
	for range b.N {
		if _, err := l.Append(v); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
}

// BenchmarkAppendAlways64x16K: 64 concurrent appenders, 16 KiB batches,
// SyncAlways with group commit, against write(2)+fdatasync of the same
// bytes in groups of the size group commit achieved.
//
// visible=durable is DurableVisibility, as `idemlog serve` runs under
// always: readers see only durable bytes, and every append also kicks the
// visibility syncer.
func BenchmarkAppendAlways64x16K(b *testing.B) {
	type variant struct {
		mode    segment.WriteMode
		durable bool
	}
	for _, vr := range []variant{{segment.WriteMmap, false}, {segment.WritePwrite, false}, {segment.WritePwrite, true}} {
		mode := vr.mode
		name := map[segment.WriteMode]string{segment.WriteMmap: "mmap", segment.WritePwrite: "pwrite"}[mode]
		if vr.durable {
			name += "/visible=durable"
		}
		b.Run("mode="+name, func(b *testing.B) {
			dir := b.TempDir()
			v := benchBatch(b, 16<<10)
			l, err := Open(filepath.Join(dir, "t-0"), Options{Sync: SyncPolicy{Kind: SyncAlways}, DurableVisibility: vr.durable, Segment: segment.Options{Mode: mode}})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			b.SetBytes(int64(len(v)))
			b.ReportAllocs()
			syncs0 := l.sync.syncs.Load()
			var wg sync.WaitGroup
			per := (b.N + 63) / 64
			b.ResetTimer()
			for range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range per {
						if _, err := l.Append(v); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			total := int64(per*64) * int64(len(v))
			syncs := max(1, l.sync.syncs.Load()-syncs0)
			group := max(1, int(int64(per*64)/syncs))
			base := baselineWrite(b, dir, len(v), int(min(total, 256<<20)), group)
			b.ReportMetric(float64(per*64)/float64(syncs), "appends/sync")
			report(b, total, base)
		})
	}
}

// BenchmarkReadAll reads a 256 MiB partition from the start, zero-copy
// (Read) and copying (ReadAppend), against memcpy of the same bytes.
func BenchmarkReadAll(b *testing.B) {
	dir := b.TempDir()
	l, err := Open(filepath.Join(dir, "t-0"), Options{Segment: segment.Options{MaxBytes: 64 << 20}})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	v := benchBatch(b, 16<<10)
	var size int64
	for size < 256<<20 {
		if _, err := l.Append(v); err != nil {
			b.Fatal(err)
		}
		size += int64(len(v))
	}
	src := make([]byte, 1<<20)
	dst := make([]byte, 1<<20)
	start := time.Now()
	for range 256 {
		copy(dst, src)
	}
	memcpy := float64(256<<20) / time.Since(start).Seconds()
	b.Run("zero-copy", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			for off := int64(0); off < l.HighWatermark(); {
				c, err := l.Read(off, 1<<20)
				if err != nil {
					b.Fatal(err)
				}
				off = c.NextOffset
				c.Release()
			}
		}
		report(b, size*int64(b.N), memcpy)
	})
	b.Run("copy", func(b *testing.B) {
		buf := make([]byte, 0, 2<<20)
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			for off := int64(0); off < l.HighWatermark(); {
				buf, off, err = l.ReadAppend(buf[:0], off, 1<<20)
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		report(b, size*int64(b.N), memcpy)
	})
}

// BenchmarkOpenClean measures Open of a cleanly closed log of -open.gib
// GiB (default 1; the figure is for 4): it must not scan the data.
func BenchmarkOpenClean(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "t-0")
	l, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	v := benchBatch(b, 1<<20)
	for written := int64(0); written < int64(*openGiB)<<30; written += int64(len(v)) {
		if _, err := l.Append(v); err != nil {
			b.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		l, err := Open(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if l.LogEndOffset() != leo {
			b.Fatalf("reopened at %d, want %d", l.LogEndOffset(), leo)
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(*openGiB), "GiB")
	_ = fmt.Sprint()
}

// BenchmarkAppendPolicy: every sync policy on the same workload, 4
// appenders of 1 KiB batches on one partition, each against write(2) of
// the same bytes with an fdatasync at the group size the run observed
// (plain write(2) when it made no sync): one table for benchstat.
func BenchmarkAppendPolicy(b *testing.B) {
	for _, pol := range []string{"never", "interval=10ms", "bytes=1048576", "always"} {
		b.Run("policy="+pol, func(b *testing.B) {
			sp, err := ParseSyncPolicy(pol)
			if err != nil {
				b.Fatal(err)
			}
			dir := b.TempDir()
			v := benchBatch(b, 1<<10)
			l, err := Open(filepath.Join(dir, "t-0"), Options{Sync: sp})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			b.SetBytes(int64(len(v)))
			b.ReportAllocs()
			syncs0 := l.sync.syncs.Load()
			const appenders = 4
			per := (b.N + appenders - 1) / appenders
			var wg sync.WaitGroup
			b.ResetTimer()
			for range appenders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range per {
						if _, err := l.Append(v); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			n := int64(per * appenders)
			syncs := l.sync.syncs.Load() - syncs0
			group := 0
			if syncs > 0 {
				group = max(1, int(n/syncs))
				b.ReportMetric(float64(n)/float64(syncs), "appends/sync")
			}
			base := baselineWrite(b, dir, len(v), int(min(n*int64(len(v)), 256<<20)), group)
			report(b, n*int64(len(v)), base)
		})
	}
}

// BenchmarkAppendAlwaysRecycled: one appender syncing every batch, in a
// steady state where retention deletes segments as fast as the log rolls
// (8 MiB segments, 16 MiB retained, retention applied every 32 appends),
// with segment recycling and without (NoRecycle: fallocated or
// zero-filled new files), in one run: two logs, appended to in
// alternating blocks of 16 so that drift on the machine hits both alike.
// Batches of 100 records of 100 B and of 1 KiB.
func BenchmarkAppendAlwaysRecycled(b *testing.B) {
	for _, size := range []int{100 * 100, 100 * 1024} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			v := benchBatch(b, size)
			open := func(noRecycle bool) *Log {
				o := Options{Sync: SyncPolicy{Kind: SyncAlways}, RetentionAge: -1, RetentionBytes: 16 << 20, NoRecycle: noRecycle,
					Segment: segment.Options{MaxBytes: 8 << 20}}
				l, err := Open(b.TempDir(), o)
				if err != nil {
					b.Fatal(err)
				}
				return l
			}
			logs := [2]*Log{open(false), open(true)}
			defer logs[0].Close()
			defer logs[1].Close()
			appends := [2]int{}
			appendOne := func(i int) {
				if _, err := logs[i].Append(v); err != nil {
					b.Fatal(err)
				}
				if appends[i]++; appends[i]%32 == 0 {
					if _, err := logs[i].ApplyRetention(); err != nil {
						b.Fatal(err)
					}
				}
			}
			// Warm up past the first retirements: four segments each.
			for i := range logs {
				for logs[i].LogEndOffset() == 0 || int64(appends[i]*len(v)) < 4*(8<<20) {
					appendOne(i)
				}
			}
			reused0 := logs[0].Recycled()
			var spent [2]time.Duration
			const block = 16
			b.SetBytes(int64(len(v)))
			b.ResetTimer()
			for n := 0; n < b.N; n += block {
				for k := range 2 {
					i := k
					if (n/block)%2 == 1 {
						i = 1 - k
					}
					t0 := time.Now()
					for range min(block, b.N-n) {
						appendOne(i)
					}
					spent[i] += time.Since(t0)
				}
			}
			b.StopTimer()
			recs := float64(100 * b.N)
			b.ReportMetric(recs/spent[0].Seconds(), "rec/s-recycled")
			b.ReportMetric(recs/spent[1].Seconds(), "rec/s-new-files")
			b.ReportMetric(spent[1].Seconds()/spent[0].Seconds(), "x-recycled")
			b.ReportMetric(float64(logs[0].Recycled()-reused0), "files-recycled")
		})
	}
}
