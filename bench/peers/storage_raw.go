package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/idemlog/idemlog/mmap"
)

// rawPeer is the machine's own speed, the floor every peer stands on: each
// batch's values laid end to end, written with one pwrite(2) into a file
// preallocated with fallocate (so no write extends the file), followed by
// an fdatasync when the workload syncs. No framing, no index, no
// deduplication.
var rawPeer = storagePeer{name: "raw", about: "pwrite(2) of the batch's values into a fallocated file (+ fdatasync per batch)", open: openRaw}

// rawZeroedPeer is raw over a file zero-filled (and synced) before the
// run, off the clock: appends overwrite written blocks, so an fdatasync
// flushes data only, where after an append into fallocated (unwritten)
// blocks it also commits their conversion to the journal. It is the raw
// bound for idemlog under fsync always, whose segments are zero-filled
// ahead of the writer (segment.ReserveZeroFill, on the clock).
var rawZeroedPeer = storagePeer{name: "raw-zeroed", about: "raw over a file zero-filled before the run (written blocks)", open: openRawZeroed}

// rawExtendPeer is raw into a file extended by its writes, with no
// preallocation (as pebble's WAL grows): each fdatasync then commits the
// new size and the blocks allocated at writeback.
var rawExtendPeer = storagePeer{name: "raw-extend", about: "raw into a file extended by its writes (no preallocation)", open: openRawExtend}

func openRawExtend(dir string, w workload) (storageWriter, error) {
	f, err := os.Create(filepath.Join(dir, "raw"))
	if err != nil {
		return nil, fmt.Errorf("cannot create raw file: %w", err)
	}
	return &rawWriter{f: f, sync: w.Sync, buf: make([]byte, 0, w.Size*w.PerBatch)}, nil
}

type rawWriter struct {
	f    *os.File
	off  int64
	sync bool
	buf  []byte
	g    rawGroup
}

func openRaw(dir string, w workload) (storageWriter, error) {
	f, err := os.Create(filepath.Join(dir, "raw"))
	if err != nil {
		return nil, fmt.Errorf("cannot create raw file: %w", err)
	}
	if err := mmap.Fallocate(f, 0, int64(w.Records)*int64(w.Size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot preallocate raw file: %w", err)
	}
	return &rawWriter{f: f, sync: w.Sync, buf: make([]byte, 0, w.Size*w.PerBatch)}, nil
}

func openRawZeroed(dir string, w workload) (storageWriter, error) {
	f, err := os.Create(filepath.Join(dir, "raw"))
	if err != nil {
		return nil, fmt.Errorf("cannot create raw file: %w", err)
	}
	if err := zeroFile(f, int64(w.Records)*int64(w.Size)); err != nil {
		f.Close()
		return nil, err
	}
	return &rawWriter{f: f, sync: w.Sync, buf: make([]byte, 0, w.Size*w.PerBatch)}, nil
}

// zeroFile writes n zero bytes into f from offset 0 and syncs them, so
// that its blocks are allocated and written before the timed run.
func zeroFile(f *os.File, n int64) error {
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < n; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), n-off)], off); err != nil {
			return fmt.Errorf("cannot zero-fill %s: %w", f.Name(), err)
		}
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("cannot sync %s: %w", f.Name(), err)
	}
	return nil
}

func (r *rawWriter) write(recs [][]byte) error {
	r.buf = r.buf[:0]
	for _, v := range recs {
		r.buf = append(r.buf, v...)
	}
	if _, err := r.f.WriteAt(r.buf, r.off); err != nil {
		return fmt.Errorf("cannot write: %w", err)
	}
	r.off += int64(len(r.buf))
	if r.sync {
		if err := unix.Fdatasync(int(r.f.Fd())); err != nil {
			return fmt.Errorf("cannot fdatasync: %w", err)
		}
	}
	return nil
}

// rawGroup is raw's group commit (the group durability), the textbook
// leader/follower scheme that pebble's LogWriter and idemlog's partitions
// also follow: a writer copies its batch's values behind the pending ones
// and, if no write is in flight, becomes the leader: it takes everything
// pending, writes it with one pwrite, syncs it, and wakes every writer
// whose batch it covered; otherwise it waits, and the next leader covers
// its batch. Each write and sync thus covers every batch queued while the
// previous one ran.
type rawGroup struct {
	mu      sync.Mutex
	cond    sync.Cond // on mu
	pending []byte    // values queued, not yet written
	spare   []byte    // the buffer the last leader wrote, for reuse
	queued  int64     // batches ever queued
	done    int64     // batches written (and synced)
	leading bool
	err     error
}

// lane is a handle on the group commit; lanes share the writer.
func (r *rawWriter) lane(int) (lane, error) {
	if r.g.cond.L == nil {
		r.g.cond.L = &r.g.mu
	}
	return rawLane{r}, nil
}

type rawLane struct{ r *rawWriter }

func (l rawLane) write(recs [][]byte) error {
	r, g := l.r, &l.r.g
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, v := range recs {
		g.pending = append(g.pending, v...)
	}
	g.queued++
	mine := g.queued
	for g.done < mine {
		if g.err != nil {
			return g.err
		}
		if g.leading {
			g.cond.Wait()
			continue
		}
		g.leading = true
		buf, upto := g.pending, g.queued
		g.pending = g.spare[:0]
		g.mu.Unlock()
		// Only the leader touches r.off and r.f's contents.
		_, err := r.f.WriteAt(buf, r.off)
		r.off += int64(len(buf))
		if err == nil && r.sync {
			err = unix.Fdatasync(int(r.f.Fd()))
		}
		g.mu.Lock()
		g.spare, g.leading = buf, false
		if err != nil {
			g.err = fmt.Errorf("cannot write: %w", err)
		} else {
			g.done = upto
		}
		g.cond.Broadcast()
	}
	return nil
}

func (r *rawWriter) finish() error { return nil }
func (r *rawWriter) close() error  { return r.f.Close() }
