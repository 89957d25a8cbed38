//go:build linux

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/idemlog/idemlog/mmap"
	"github.com/idemlog/idemlog/partition"
)

// maxBaselineBytes bounds the bytes a baseline writes (BaselineMax bounds
// its time).
const maxBaselineBytes = 64 << 30

// baselineBytes is how many bytes the baseline writes: the run's own
// count, so that it meets the page cache as the run did. (With at most 1
// GiB written: a run of several GB that went from the page
// cache into dirty-page throttling was compared with a baseline that never
// left it, 0.47-0.57x for 4 producers x 4 partitions of 1 KiB x 64 over 3
// s, against 1.19-1.35x for the same workload over 1 s.) Less if the disk
// lacks room for a second copy beside the run's data: at most half the
// free space.
func baselineBytes(dir string, runBytes int64) int64 {
	n := min(runBytes, maxBaselineBytes)
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) == nil {
		n = min(n, int64(st.Bavail)*st.Bsize/2)
	}
	return max(n, 0)
}

// informativeMax bounds the baseline that the ratio does not use.
const informativeMax = 500 * time.Millisecond

// informativeZeroed bounds the zero fill ahead of an informative
// write+fdatasync baseline (about what half a second of synced writes
// reaches here).
const informativeZeroed = 128 << 20

// zeroFile writes n zero bytes into f from offset 0 and syncs them, so its
// blocks are allocated and written before a timed baseline overwrites them.
func zeroFile(ctx context.Context, f *os.File, n int64) error {
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < n; off += int64(len(zeros)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), n-off)], off); err != nil {
			return err
		}
	}
	return unix.Fdatasync(int(f.Fd()))
}

// runBaseline measures the machine after the run (the engine is closed, so
// its bytes are on disk, and their pages are then dropped from the page
// cache: evictPageCache) on the run's directory and bytes. After an
// interleaved run (res.Baseline.When "interleaved") the compared figure and
// the ratio are already in res, and only the informative figures are
// measured here, for at most informativeMax each; otherwise it fills
// res.Baseline and res.RatioToBaseline.
func runBaseline(ctx context.Context, dir string, c Config, p parsed, res *Result) error {
	bl := &res.Baseline
	interleaved := bl.When == "interleaved"
	zeroed := p.sync.Kind == partition.SyncAlways
	if !interleaved {
		// Under always and bytes=N appenders wait for syncs (bytes=N:
		// the one that crosses N), so the run is compared with synced
		// writes; under interval the syncs run beside the appenders.
		// The partition zero-fills ahead of its writer only under
		// always, so the synced baseline writes over zero-filled blocks
		// only then.
		bl.ComparedWith = "write"
		if p.sync.Kind == partition.SyncAlways || p.sync.Kind == partition.SyncBytes {
			bl.ComparedWith = "write_fdatasync"
		}
		bl.SyncGroup, bl.SyncGroupSource = int64(c.Producers), "producers"
		if p.sync.Kind != partition.SyncNever && res.SyncsObserved > 0 {
			bl.SyncGroup, bl.SyncGroupSource = max(1, (res.Batches+res.SyncsObserved/2)/res.SyncsObserved), "observed"
		}
	}
	if res.Bytes == 0 || res.Batches == 0 || c.BaselineMax == 0 || ctx.Err() != nil {
		if !interleaved {
			bl.When = "skipped"
		}
		return nil
	}
	total := baselineBytes(dir, res.Bytes)
	if total == 0 {
		if !interleaved {
			bl.When = "skipped"
		}
		return nil
	}
	if !interleaved {
		bl.When = "after"
		bl.ChunkBytes = max(1, res.Bytes/res.Batches)
	}
	bl.EvictedBytes = evictPageCache(dir)
	// Each measurement stops after its time limit: its file (fallocated,
	// and zero-filled before the fdatasync one, off the clock) need not be
	// larger than it can reach, taken as 4x the run's rate for that long
	// and at least 256 MiB. Freeing a larger one costs a discard of it.
	reach := func(limit time.Duration) int64 {
		return min(total, max(256<<20, int64(4*res.BytesPerSec*limit.Seconds())))
	}

	var trunc bool
	var err error
	// interrupted reports whether err came from a signal (ctx cancelled)
	// rather than the disk: the run is whole and is reported, its baseline
	// marked cut short.
	interrupted := func() bool {
		if ctx.Err() == nil {
			return false
		}
		bl.Truncated, res.Interrupted = true, true
		return true
	}
	if !interleaved || bl.ComparedWith != "write" {
		limit := c.BaselineMax
		if bl.ComparedWith != "write" || interleaved {
			limit = min(limit, informativeMax)
		}
		bl.WriteBytes, bl.WriteBytesPerSec, trunc, err = baselineWrite(ctx, dir, ".bench-baseline", bl.ChunkBytes, reach(limit), 0, limit, false)
		if err != nil {
			if interrupted() {
				return nil
			}
			return err
		}
		bl.Truncated = bl.Truncated || trunc && bl.ComparedWith == "write" && !interleaved
	}

	syncWriters := max(1, min(c.Partitions, c.Producers))
	if !interleaved || bl.ComparedWith != "write_fdatasync" {
		limit := c.BaselineMax
		if bl.ComparedWith != "write_fdatasync" || interleaved {
			limit = min(limit, informativeMax)
		}
		bl.SyncWriters = syncWriters
		bl.WriteFdatasyncBytes, bl.WriteFdatasyncBytesPerSec, trunc, err = baselineWriters(ctx, dir, bl.ChunkBytes, reach(limit), bl.SyncGroup, limit, zeroed, bl.SyncWriters)
		if err != nil {
			if !interrupted() {
				return err
			}
			bl.WriteFdatasyncBytes, bl.WriteFdatasyncBytesPerSec = 0, 0
		}
		bl.Truncated = bl.Truncated || trunc && bl.ComparedWith == "write_fdatasync" && !interleaved
	}
	if zeroed && ctx.Err() == nil {
		bl.WriteFdatasyncUnwrittenBytes, bl.WriteFdatasyncUnwrittenBytesPerSec, _, err = baselineWriters(ctx, dir, bl.ChunkBytes, reach(informativeMax), bl.SyncGroup, informativeMax, false, syncWriters)
		if err != nil {
			if !interrupted() {
				return err
			}
			bl.WriteFdatasyncUnwrittenBytes, bl.WriteFdatasyncUnwrittenBytesPerSec = 0, 0
		}
	}

	if interleaved {
		return nil
	}
	base := bl.WriteBytesPerSec
	if bl.ComparedWith == "write_fdatasync" {
		base = bl.WriteFdatasyncBytesPerSec
	}
	if base > 0 {
		res.RatioToBaseline = res.BytesPerSec / base
	}
	return nil
}

// baselineWriters is baselineWrite over writers files at once, each with
// its share of total: the bytes written and their rate over the slowest
// writer's time.
func baselineWriters(ctx context.Context, dir string, chunk, total, group int64, limit time.Duration, zeroed bool, writers int) (int64, float64, bool, error) {
	if writers <= 1 {
		return baselineWrite(ctx, dir, ".bench-baseline", chunk, total, group, limit, zeroed)
	}
	type result struct {
		n         int64
		secs      float64
		truncated bool
		err       error
	}
	out := make([]result, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			n, rate, trunc, err := baselineWrite(ctx, dir, fmt.Sprintf(".bench-baseline-%d", i), chunk, max(chunk, total/int64(writers)), group, limit, zeroed)
			out[i] = result{n: n, truncated: trunc, err: err}
			if rate > 0 {
				out[i].secs = float64(n) / rate
			}
		})
	}
	wg.Wait()
	var n int64
	var secs float64
	truncated := false
	for _, r := range out {
		if r.err != nil {
			return 0, 0, false, r.err
		}
		n += r.n
		secs = max(secs, r.secs)
		truncated = truncated || r.truncated
	}
	if secs == 0 {
		return n, 0, truncated, nil
	}
	return n, float64(n) / secs, truncated, nil
}

// baselineWrite writes total bytes sequentially with write(2)-family calls
// (pwrite), in chunks of chunk bytes, into a file preallocated with
// fallocate, with an fdatasync after every group chunks and at the end
// (group 0: none), as partition/log_timing_test.go does; with zeroed and
// group > 0, over blocks zero-filled first, off the clock. It stops early
// (truncated) after limit or when ctx is done, and returns the bytes
// written and bytes per second.
func baselineWrite(ctx context.Context, dir, name string, chunk, total, group int64, limit time.Duration, zeroed bool) (int64, float64, bool, error) {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return 0, 0, false, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if group > 0 && zeroed {
		// The fdatasync baseline overwrites zero-filled blocks, off the
		// clock: the machine's best case for a sync per group (an
		// fdatasync after a write into fallocated, unwritten blocks also
		// writes the extent metadata it converts: 157-223 against
		// 102-142 us per 11 KB write here). idemlog zero-fills ahead of
		// small syncs itself, on its clock (segment.ReserveZeroFill).
		zeroed := total
		if limit <= informativeMax {
			zeroed = min(total, informativeZeroed)
		}
		if err := zeroFile(ctx, f, zeroed); err != nil {
			return 0, 0, false, err
		}
	}
	if err := mmap.Fallocate(f, 0, total); err != nil {
		return 0, 0, false, err
	}
	buf := make([]byte, min(chunk, total))
	for i := range buf {
		buf[i] = byte(i * 131)
	}
	fd := int(f.Fd())
	truncated := false
	var off, i int64
	start := time.Now()
	for off < total {
		n := min(int64(len(buf)), total-off)
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return 0, 0, false, err
		}
		off += n
		i++
		if group > 0 && (i%group == 0 || off == total) {
			if err := unix.Fdatasync(fd); err != nil {
				return 0, 0, false, err
			}
		}
		// The clock is read every 64 chunks: a few ns against a write call.
		if i%64 == 0 || group > 0 {
			if time.Since(start) > limit || ctx.Err() != nil {
				truncated = off < total
				break
			}
		}
	}
	if truncated && group > 0 && i%group != 0 {
		if err := unix.Fdatasync(fd); err != nil {
			return 0, 0, false, err
		}
	}
	return off, float64(off) / time.Since(start).Seconds(), truncated, nil
}
