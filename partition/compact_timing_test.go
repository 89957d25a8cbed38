package partition

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/segment"
)

// dirtyLog writes a log of about size bytes of 10-record batches of
// 100-byte values over keys distinct keys, rolled at 8 MiB, and a last
// roll so that all of it is cleanable.
func dirtyLog(b testing.TB, dir string, size int64, keys int) *Log {
	l, err := Open(dir, Options{NoRecycle: true, Logger: slog.New(slog.DiscardHandler),
		Segment: segment.Options{MaxBytes: 8 << 20}})
	if err != nil {
		b.Fatal(err)
	}
	bl := batch.NewBuilder(batch.CodecNone)
	val := make([]byte, 100)
	for i := 0; l.WrittenEnd() == 0 || int64(i)*1300 < size; i++ {
		bl.Reset(batch.CodecNone)
		for j := range 10 {
			bl.Append(int64(i), fmt.Appendf(nil, "key-%06d", (i*10+j)%keys), val, nil)
		}
		v, err := bl.Build()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Append(v); err != nil {
			b.Fatal(err)
		}
	}
	l.mu.Lock()
	err = l.roll(l.leo)
	l.mu.Unlock()
	if err != nil {
		b.Fatal(err)
	}
	l.waitIdle()
	return l
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClean measures a cleaning pass over 64 MiB of dirty log
// (1,000 keys): MB/s of dirty log by the clock, and by the CPU time the
// process spent (MB/s_cpu), which a machine shared with other work
// does not distort.
func BenchmarkClean(b *testing.B) {
	const size = 64 << 20
	b.SetBytes(size)
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		l := dirtyLog(b, b.TempDir(), size, 1000)
		b.StartTimer()
		c0 := cpuTime()
		st, err := l.Clean(CleanConfig{DeleteRetention: time.Hour})
		cpu += cpuTime() - c0
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if st.BytesRead < size*9/10 {
			b.Fatalf("cleaned %d bytes", st.BytesRead)
		}
		l.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(size)*float64(b.N)/1e6/cpu.Seconds(), "MB/s_cpu")
}

// BenchmarkAppendWhileCleaning appends 1 KiB batches to one log, alone
// and while cleaning passes run on another log in the same process, and
// reports the ratio of the two rates measured side by side
// (appends_ratio): with the cleaner unbounded, and bounded to 50 MB/s
// (log.cleaner.io.max.bytes.per.second).
//
// The spin=cpu case replaces the cleaner by a goroutine that only burns
// CPU, in the same alternation: the ratio any background work of one
// busy core costs the appender on this machine, the bound the cleaner's
// own ratio is read against (on 2 vCPUs the appender, the kernel's
// writeback and the cleaner share two cores).
func BenchmarkAppendWhileCleaning(b *testing.B) {
	for _, rate := range []float64{0, 50e6} {
		b.Run(fmt.Sprintf("io_max=%.0fMB", rate/1e6), func(b *testing.B) { benchAppendWhileCleaning(b, rate, false) })
	}
	b.Run("spin=cpu", func(b *testing.B) { benchAppendWhileCleaning(b, 0, true) })
}

// spinSink keeps the spinning loop's work observable.
var spinSink atomic.Int64

func benchAppendWhileCleaning(b *testing.B, rate float64, spin bool) {
	throttle := NewThrottle(rate)
	bl := batch.NewBuilder(batch.CodecNone)
	for i := range 8 {
		bl.Append(0, fmt.Appendf(nil, "k%d", i), make([]byte, 110), nil)
	}
	v, err := bl.Build()
	if err != nil {
		b.Fatal(err)
	}
	v = append(batch.Batch(nil), v...)
	appendFor := func(l *Log, d time.Duration) float64 {
		start := time.Now()
		n := 0
		for time.Since(start) < d {
			for range 1000 {
				if _, err := l.Append(v); err != nil {
					b.Fatal(err)
				}
			}
			n += 1000
		}
		return float64(n) / time.Since(start).Seconds()
	}
	// The windows alternate (alone, cleaning, alone, ...) so that the
	// load of a shared machine falls on both alike.
	var alone, busy float64
	for b.Loop() {
		w, err := Open(b.TempDir(), Options{NoRecycle: true, Logger: slog.New(slog.DiscardHandler),
			Segment: segment.Options{MaxBytes: 64 << 20}})
		if err != nil {
			b.Fatal(err)
		}
		dirty := dirtyLog(b, b.TempDir(), 32<<20, 1000)
		var cleaning atomic.Bool
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Go(func() {
			for !stop.Load() {
				if !cleaning.Load() {
					time.Sleep(time.Millisecond)
					continue
				}
				if spin {
					for x := 0; cleaning.Load(); x++ {
						spinSink.Store(int64(x))
					}
					continue
				}
				dirty.cleaner.mu.Lock()
				dirty.cleaner.firstDirty, dirty.cleaner.loaded = 0, true
				dirty.cleaner.mu.Unlock()
				if _, err := dirty.Clean(CleanConfig{DeleteRetention: time.Hour, Throttle: throttle, Stopped: func() bool { return !cleaning.Load() }}); err != nil && !errors.Is(err, ErrCleanAborted) {
					b.Error(err)
					return
				}
			}
		})
		for range 4 {
			alone += appendFor(w, 500*time.Millisecond) / 4
			cleaning.Store(true)
			busy += appendFor(w, 500*time.Millisecond) / 4
			cleaning.Store(false)
		}
		stop.Store(true)
		wg.Wait()
		dirty.Close()
		w.Close()
	}
	b.ReportMetric(alone/float64(b.N), "appends/s_alone")
	b.ReportMetric(busy/float64(b.N), "appends/s_cleaning")
	b.ReportMetric(busy/alone, "appends_ratio")
}
