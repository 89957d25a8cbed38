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
)

// baselineRing writes the baseline's slices of an interleaved run: write(2)
// (pwrite) of chunks into files of the engine's segment size in the run's
// directory, each preallocated with fallocate when it is started, as the
// engine's segments are; the oldest files are deleted once the ring holds
// more than the engine's retention keeps, so that the baseline and the
// engine hold the same bytes in the page cache and meet the same writeback
// pressure. Under fsync always the oldest file is reused for the next one
// instead (its blocks are written), as the engine reuses deleted segments'
// files.
type baselineRing struct {
	dir      string
	segBytes int64
	// keep is the bytes of full files each writer keeps before the
	// oldest goes.
	keep    int64
	recycle bool
	writers []*ringWriter
	// src is what the chunks are cut from, at a moving offset: the run's
	// payload pool, so that the baseline reads its bytes from memory as
	// the engine reads its values, not from one buffer that stays in the
	// core's cache (a neighbour's load that evicts the caches then costs
	// both sides alike). buf is src repeated, for chunks larger than it.
	src []byte
	buf []byte
	// doomed takes the files to delete to a goroutine of their own, as
	// the engine's retention deletes segments beside its appenders:
	// deleting a file whose pages are still being written back waits for
	// that writeback, and a writer stalled on it made single slices of
	// the baseline look starved (ratios up to 1.25 where the median pair
	// was 0.96).
	// settle waits for the deletions between slices.
	doomed  chan string
	deleted sync.WaitGroup // the deleting goroutine
	pending sync.WaitGroup // deletions asked for and not done
	delErr  error
}

// ringWriter is one file sequence of the ring; each writer of a synced
// baseline has its own, as each partition syncs its own segment.
type ringWriter struct {
	r       *baselineRing
	id, seq int
	f       *os.File
	off     int64
	full    []ringFile // full files, oldest first
	kept    int64      // their bytes
	pending int64      // chunks written since the last fdatasync
	srcOff  int        // where the next chunk starts in the ring's src
}

type ringFile struct {
	name string
	size int64
}

// newBaselineRing prepares writers file sequences; nothing is written yet.
func newBaselineRing(dir string, segBytes, keepTotal int64, recycle bool, writers int, src []byte) *baselineRing {
	r := &baselineRing{dir: dir, segBytes: segBytes, keep: max(segBytes, keepTotal/int64(writers)), recycle: recycle, src: src,
		doomed: make(chan string, 1024)}
	r.deleted.Go(func() {
		for name := range r.doomed {
			if err := os.Remove(name); err != nil && r.delErr == nil {
				r.delErr = fmt.Errorf("cannot delete a baseline file: %w", err)
			}
			r.pending.Done()
		}
	})
	if len(r.src) == 0 {
		r.src = make([]byte, 1<<20)
		for i := range r.src {
			r.src[i] = byte(i * 131)
		}
	}
	for i := range writers {
		r.writers = append(r.writers, &ringWriter{r: r, id: i, srcOff: i * 1000003 % len(r.src)})
	}
	return r
}

// slice writes chunks of chunk bytes with every writer at once for d, an
// fdatasync after every group chunks of a writer (0: none) and at the end
// of the slice, and returns the bytes written and the slowest writer's
// time. A chunk started before the end is finished, and each writer
// writes one at least.
func (r *baselineRing) slice(ctx context.Context, chunk, group int64, d time.Duration) (int64, float64, error) {
	chunk = max(1, min(chunk, r.segBytes))
	if int64(len(r.src)) < chunk && int64(len(r.buf)) < chunk {
		r.buf = make([]byte, chunk)
		for i := 0; i < len(r.buf); i += copy(r.buf[i:], r.src) {
		}
	}
	type result struct {
		n    int64
		secs float64
		err  error
	}
	out := make([]result, len(r.writers))
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for i, w := range r.writers {
		wg.Go(func() {
			n, err := w.write(ctx, chunk, group, deadline)
			out[i] = result{n: n, secs: time.Since(start).Seconds(), err: err}
		})
	}
	wg.Wait()
	var n int64
	var secs float64
	for _, o := range out {
		if o.err != nil {
			return 0, 0, o.err
		}
		n += o.n
		secs = max(secs, o.secs)
	}
	return n, secs, nil
}

// next returns the writer's next chunk of size bytes.
func (w *ringWriter) next(size int64) []byte {
	src := w.r.src
	if int64(len(src)) < size {
		return w.r.buf[:size]
	}
	if w.srcOff+int(size) > len(src) {
		w.srcOff = 0
	}
	b := src[w.srcOff : w.srcOff+int(size)]
	w.srcOff += int(size) + strideExtra
	return b
}

func (w *ringWriter) write(ctx context.Context, chunk, group int64, deadline time.Time) (int64, error) {
	fd := -1
	if w.f != nil {
		fd = int(w.f.Fd())
	}
	var n int64
	// One chunk at least, so that every slice is a measurement.
	for n == 0 || time.Now().Before(deadline) && ctx.Err() == nil {
		buf := w.next(chunk)
		if w.f == nil || w.off+int64(len(buf)) > w.r.segBytes {
			if err := w.roll(); err != nil {
				return n, err
			}
			fd = int(w.f.Fd())
		}
		if _, err := unix.Pwrite(fd, buf, w.off); err != nil {
			return n, fmt.Errorf("cannot write the baseline: %w", err)
		}
		w.off += int64(len(buf))
		n += int64(len(buf))
		if group > 0 {
			if w.pending++; w.pending >= group {
				if err := unix.Fdatasync(fd); err != nil {
					return n, fmt.Errorf("cannot sync the baseline: %w", err)
				}
				w.pending = 0
			}
		}
	}
	if group > 0 && w.pending > 0 && fd >= 0 {
		if err := unix.Fdatasync(fd); err != nil {
			return n, fmt.Errorf("cannot sync the baseline: %w", err)
		}
		w.pending = 0
	}
	return n, nil
}

// roll starts the writer's next file: the oldest full one reused under
// recycle once the ring is full, else a new one, fallocated; full files
// beyond the ring's keep are deleted.
func (w *ringWriter) roll() error {
	if w.f != nil {
		if w.pending > 0 {
			// The engine's seal syncs what its segment holds; here the
			// slice's next sync would, on another file.
			if err := unix.Fdatasync(int(w.f.Fd())); err != nil {
				return err
			}
			w.pending = 0
		}
		w.full = append(w.full, ringFile{w.f.Name(), w.off})
		w.kept += w.off
		w.f.Close()
		w.f = nil
	}
	w.seq++
	name := filepath.Join(w.r.dir, fmt.Sprintf(".bench-baseline-%d-%d", w.id, w.seq))
	var reused string
	for w.kept > w.r.keep && len(w.full) > 0 {
		oldest := w.full[0]
		w.full = w.full[1:]
		w.kept -= oldest.size
		if w.r.recycle && reused == "" {
			reused = oldest.name
			continue
		}
		w.r.pending.Add(1)
		w.r.doomed <- oldest.name
	}
	if reused != "" {
		if err := os.Rename(reused, name); err != nil {
			return fmt.Errorf("cannot reuse a baseline file: %w", err)
		}
		f, err := os.OpenFile(name, os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("cannot reuse a baseline file: %w", err)
		}
		w.f, w.off = f, 0
		return nil
	}
	f, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("cannot create a baseline file: %w", err)
	}
	if err := mmap.Fallocate(f, 0, w.r.segBytes); err != nil {
		f.Close()
		os.Remove(name)
		return fmt.Errorf("cannot preallocate a baseline file: %w", err)
	}
	w.f, w.off = f, 0
	return nil
}

// settle waits for the deletions the slices asked for: between slices,
// off both sides' clocks and their CPU accounting, so that the ring is
// within its bound when the engine's next slice starts.
func (r *baselineRing) settle() error {
	r.pending.Wait()
	return r.delErr
}

// bytesOnDisk returns the bytes the ring's files take at most: the full
// files kept and the one being written, per writer.
func (r *baselineRing) bytesOnDisk() int64 {
	return int64(len(r.writers)) * (r.keep + r.segBytes)
}

// remove deletes every file of the ring.
func (r *baselineRing) remove() {
	if r.doomed != nil {
		close(r.doomed)
		r.deleted.Wait()
		r.doomed = nil
	}
	for _, w := range r.writers {
		if w.f != nil {
			w.f.Close()
			os.Remove(w.f.Name())
			w.f = nil
		}
		for _, rf := range w.full {
			os.Remove(rf.name)
		}
		w.full, w.kept = nil, 0
	}
}
