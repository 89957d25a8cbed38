package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/cockroachdb/pebble/v2/record"
	"golang.org/x/sys/unix"
)

// pebblePeer is pebble's write-ahead log writer alone (record.LogWriter,
// what pebble's commit pipeline writes every batch through): the batch's
// values laid end to end as one record, which the writer frames into 32
// KiB blocks with a checksum per chunk and writes from a goroutine of its
// own. With the workload's sync, SyncRecord waits for the fdatasync that
// covers it; without, WriteRecord returns once the record is buffered and
// finish (Close) waits for the last block to be written. No
// deduplication.
var pebblePeer = storagePeer{name: "pebble", about: "pebble/v2 record.LogWriter, one record per batch (SyncRecord + wait: fdatasync per batch)", open: openPebble}

type pebbleWriter struct {
	lw   *record.LogWriter
	sync bool
	sem  chan struct{}
	buf  []byte
	done bool
	// mu serializes the lanes' calls into the LogWriter, as pebble's
	// commit pipeline does (its mutex around WriteRecord); the syncs are
	// awaited outside it, so that the writer's flusher covers every
	// record queued while its previous sync ran (group commit).
	mu sync.Mutex
}

// datasyncFile gives the LogWriter fdatasync, as pebble's own file system
// layer does on Linux.
type datasyncFile struct{ *os.File }

func (f datasyncFile) Sync() error { return unix.Fdatasync(int(f.Fd())) }

// unsyncedFile hides Sync, so that Close does not sync in the no-sync
// workload.
type unsyncedFile struct{ f *os.File }

func (f unsyncedFile) Write(p []byte) (int, error) { return f.f.Write(p) }
func (f unsyncedFile) Close() error                { return f.f.Close() }

func openPebble(dir string, w workload) (storageWriter, error) { return openPebbleWAL(dir, w, false) }

// pebbleRecycledPeer is the LogWriter over a file zero-filled before the
// run (off the clock), standing in for the recycled WAL file that pebble's
// DB hands its LogWriter once it has one to reuse: its writes then
// overwrite written blocks, as idemlog's do into its zero-filled segments
// under fsync always (see rawZeroedPeer).
var pebbleRecycledPeer = storagePeer{name: "pebble-recycled", about: "pebble's record.LogWriter over a file zero-filled before the run, like a recycled WAL",
	open: func(dir string, w workload) (storageWriter, error) { return openPebbleWAL(dir, w, true) }}

func openPebbleWAL(dir string, w workload, recycled bool) (storageWriter, error) {
	f, err := os.Create(filepath.Join(dir, "000001.log"))
	if err != nil {
		return nil, fmt.Errorf("cannot create wal: %w", err)
	}
	if recycled {
		// Values plus the LogWriter's framing (11 bytes per chunk, at
		// least one chunk per 32 KiB block and per record), with room.
		n := int64(w.Records)*int64(w.Size)*5/4 + 1<<20
		if err := zeroFile(f, n); err != nil {
			f.Close()
			return nil, err
		}
	}
	pw := &pebbleWriter{sync: w.Sync, sem: make(chan struct{}, record.SyncConcurrency),
		buf: make([]byte, 0, w.Size*w.PerBatch)}
	cfg := record.LogWriterConfig{QueueSemChan: pw.sem, WriteWALSyncOffsets: func() bool { return false }}
	if w.Sync {
		pw.lw = record.NewLogWriter(datasyncFile{f}, 1, cfg)
	} else {
		pw.lw = record.NewLogWriter(unsyncedFile{f}, 1, cfg)
	}
	return pw, nil
}

func (pw *pebbleWriter) write(recs [][]byte) error { return pebbleLane{pw, &pw.buf}.write(recs) }

// lane is one of several writers sharing the LogWriter (the group
// durability).
func (pw *pebbleWriter) lane(int) (lane, error) {
	buf := make([]byte, 0, cap(pw.buf))
	return pebbleLane{pw, &buf}, nil
}

type pebbleLane struct {
	pw  *pebbleWriter
	buf *[]byte
}

func (l pebbleLane) write(recs [][]byte) error {
	pw, buf := l.pw, (*l.buf)[:0]
	for _, v := range recs {
		buf = append(buf, v...)
	}
	*l.buf = buf
	if !pw.sync {
		pw.mu.Lock()
		_, err := pw.lw.WriteRecord(buf)
		pw.mu.Unlock()
		return err
	}
	// The semaphore bounds the writer's sync queue, as pebble's commit
	// pipeline does; its flusher releases the slot.
	pw.sem <- struct{}{}
	var wg sync.WaitGroup
	var serr error
	wg.Add(1)
	pw.mu.Lock()
	_, err := pw.lw.SyncRecord(buf, &wg, &serr)
	pw.mu.Unlock()
	if err != nil {
		return fmt.Errorf("cannot write record: %w", err)
	}
	wg.Wait()
	if serr != nil {
		return fmt.Errorf("cannot sync record: %w", serr)
	}
	return nil
}

// finish closes the writer: it writes the last buffered block (and syncs
// once more when the workload syncs).
func (pw *pebbleWriter) finish() error {
	pw.done = true
	return pw.lw.Close()
}

func (pw *pebbleWriter) close() error {
	if !pw.done {
		return pw.lw.Close()
	}
	return nil
}
