package engine

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"golang.org/x/sys/unix"
)

// openFDs counts the process's open descriptors.
func openFDs(tb testing.TB) int {
	tb.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Fatal(err)
	}
	return len(ents)
}

// allocatedBytes is what dir holds on disk: allocated blocks (du), not
// apparent sizes, so preallocated space counts and holes do not.
func allocatedBytes(tb testing.TB, dir string) int64 {
	tb.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return total
}

// cpuTime is the CPU time (user and system) the process used so far: on a
// shared machine it tells the work done from the wait for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// residentBytes is the process's resident set (VmRSS).
func residentBytes(tb testing.TB) int64 {
	tb.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// rawCreateDirs is the floor a creation of n partitions stands on: n
// directories of two small files, written one after the other and made
// durable by one syncfs, with nothing else (no temporary name, intent or
// rename, no partition opened).
func rawCreateDirs(tb testing.TB, dir string, n int) {
	tb.Helper()
	data := []byte("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
	for i := range n {
		d := filepath.Join(dir, "t-"+strconv.Itoa(i))
		if err := os.Mkdir(d, 0o755); err != nil {
			tb.Fatal(err)
		}
		for _, name := range []string{partitionMetadataFile, topicConfigFile} {
			if err := os.WriteFile(filepath.Join(d, name), data, 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
	f, err := os.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkPartitionsLifecycle measures, for a topic of N empty partitions
// in a fresh data dir: CreateTopic, a clean Close, a clean Open, a second
// Close, and what each idle partition costs once the data dir is open
// again (heap, descriptors, goroutines) and on disk (disk-created: right
// after CreateTopic; disk: after the clean Close; rss: the whole test
// process's resident set with the data dir open again). Run it with
// -benchtime=1x: one lifecycle is one op. The -cpu-s metrics are the
// process's CPU time (user and system) over the phase: on a shared
// machine, the work done as against the wait for a core. raw-create-*
// is rawCreateDirs of as many directories in the same run, and
// create-cpu-x-raw the creation's CPU over it.
func BenchmarkPartitionsLifecycle(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			var create, close1, open, close2 time.Duration
			var createCPU, openCPU, raw, rawCPU time.Duration
			var heap, fds, goroutines, disk, diskOpen, rss float64
			for range b.N {
				rawDir := b.TempDir()
				t0, c0 := time.Now(), cpuTime()
				rawCreateDirs(b, rawDir, n)
				raw += time.Since(t0)
				rawCPU += cpuTime() - c0
				dir := b.TempDir()
				e, err := Open(dir, Options{MaxPartitions: -1})
				if err != nil {
					b.Fatal(err)
				}
				t0, c0 = time.Now(), cpuTime()
				if err := e.CreateTopic("t", n); err != nil {
					b.Fatal(err)
				}
				create += time.Since(t0)
				createCPU += cpuTime() - c0
				diskOpen += float64(allocatedBytes(b, dir)) / float64(n)
				t0 = time.Now()
				if err := e.Close(); err != nil {
					b.Fatal(err)
				}
				close1 += time.Since(t0)
				disk += float64(allocatedBytes(b, dir)) / float64(n)

				heap0, fds0, g0 := liveHeap(), openFDs(b), runtime.NumGoroutine()
				t0, c0 = time.Now(), cpuTime()
				e, err = Open(dir, Options{MaxPartitions: -1})
				if err != nil {
					b.Fatal(err)
				}
				open += time.Since(t0)
				openCPU += cpuTime() - c0
				heap += (float64(liveHeap()) - float64(heap0)) / float64(n)
				fds += float64(openFDs(b)-fds0) / float64(n)
				goroutines += float64(runtime.NumGoroutine()-g0) / float64(n)
				rss += float64(residentBytes(b))
				t0 = time.Now()
				if err := e.Close(); err != nil {
					b.Fatal(err)
				}
				close2 += time.Since(t0)
			}
			per := float64(b.N)
			b.ReportMetric(create.Seconds()/per, "create-s")
			b.ReportMetric(createCPU.Seconds()/per, "create-cpu-s")
			b.ReportMetric(raw.Seconds()/per, "raw-create-s")
			b.ReportMetric(rawCPU.Seconds()/per, "raw-create-cpu-s")
			b.ReportMetric(createCPU.Seconds()/rawCPU.Seconds(), "create-cpu-x-raw")
			b.ReportMetric(openCPU.Seconds()/per, "open-cpu-s")
			b.ReportMetric(close1.Seconds()/per, "close-s")
			b.ReportMetric(open.Seconds()/per, "open-s")
			b.ReportMetric(close2.Seconds()/per, "reclose-s")
			b.ReportMetric(heap/per, "heap-B/part")
			b.ReportMetric(fds/per, "fds/part")
			b.ReportMetric(goroutines/per, "goroutines/part")
			b.ReportMetric(diskOpen/per, "disk-created-B/part")
			b.ReportMetric(disk/per, "disk-B/part")
			b.ReportMetric(rss/per, "rss-B")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkAppendAmongIdlePartitions appends 1 KiB batches to one
// partition, alone in its data dir (idle=0) and beside 10,000 idle
// partitions that were created, closed and opened again: the idle ones
// must cost the busy one nothing.
func BenchmarkAppendAmongIdlePartitions(b *testing.B) {
	bld := batch.NewBuilder(batch.CodecNone)
	for range 10 {
		bld.Append(1, nil, make([]byte, 100), nil)
	}
	rec, err := bld.Build()
	if err != nil {
		b.Fatal(err)
	}
	rec = append([]byte(nil), rec...)
	for _, idle := range []int{0, 10000} {
		b.Run(fmt.Sprintf("idle=%d", idle), func(b *testing.B) {
			dir := b.TempDir()
			e, err := Open(dir, Options{MaxPartitions: -1})
			if err != nil {
				b.Fatal(err)
			}
			if idle > 0 {
				if err := e.CreateTopic("idle", idle); err != nil {
					b.Fatal(err)
				}
			}
			if err := e.CreateTopic("busy", 1); err != nil {
				b.Fatal(err)
			}
			if err := e.Close(); err != nil {
				b.Fatal(err)
			}
			if e, err = Open(dir, Options{MaxPartitions: -1}); err != nil {
				b.Fatal(err)
			}
			p, err := e.Partition("busy", 0)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(rec)))
			b.ResetTimer()
			for range b.N {
				if _, err := p.Append(rec); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if err := e.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkCloseWrittenPartitions closes a data dir of N partitions that
// each took one append since it opened: every one was woken and has its
// segment, indexes, snapshot, checkpoints and marker to sync.
func BenchmarkCloseWrittenPartitions(b *testing.B) {
	rec := plainRecordBatch(b, "v")
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			var closing, closingCPU time.Duration
			for range b.N {
				dir := b.TempDir()
				e, err := Open(dir, Options{MaxPartitions: -1})
				if err != nil {
					b.Fatal(err)
				}
				if err := e.CreateTopic("t", n); err != nil {
					b.Fatal(err)
				}
				for i := range n {
					p, err := e.Partition("t", i)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := p.Append(rec); err != nil {
						b.Fatal(err)
					}
				}
				t0, c0 := time.Now(), cpuTime()
				if err := e.Close(); err != nil {
					b.Fatal(err)
				}
				closing += time.Since(t0)
				closingCPU += cpuTime() - c0
			}
			b.ReportMetric(closing.Seconds()/float64(b.N), "close-s")
			b.ReportMetric(closingCPU.Seconds()/float64(b.N), "close-cpu-s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
