package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"math"
	"path/filepath"
	"sync"

	"github.com/idemlog/idemlog/internal/fsutil"
)

// pidBlockSize is how many producer ids one durable write reserves, as
// Kafka's controller hands them out in blocks of 1000.
const pidBlockSize = 1000

const pidFile = "producer-id-block"

// pidAllocator hands out producer ids that are unique across restarts:
// before an id of a new block is used, the end of that block is written
// (and synced) as the watermark, and a restart starts at the watermark,
// skipping whatever was left of the previous block.
type pidAllocator struct {
	dir  string
	log  *slog.Logger
	mu   sync.Mutex
	next int64
	end  int64 // exclusive end of the reserved block
	// fileNext is the watermark the file held at open (-1: no file).
	fileNext int64
	// raisedBy is the highest id reserveAbove found at or above the
	// watermark since the last report (-1: none): the file was lost or is
	// stale, and the next ids were derived again.
	raisedBy int64
	// closed is set by the engine's Close or Kill before it releases the
	// data dir's lock: from then on another engine may own the dir.
	closed bool
}

// close stops allocation (allocate returns ErrClosed).
func (a *pidAllocator) close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
}

func openPIDAllocator(dir string, log *slog.Logger) (*pidAllocator, error) {
	a := &pidAllocator{dir: dir, log: log, fileNext: -1, raisedBy: -1}
	data, err := fsutil.ReadFileMax(filepath.Join(dir, pidFile), 12)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case errors.Is(err, fsutil.ErrFileTooLarge):
		return nil, fmt.Errorf("cannot read producer id watermark: %w: %w", ErrCorruptMetadata, err)
	case err != nil:
		return nil, fmt.Errorf("cannot read producer id watermark: %w", err)
	case len(data) != 12 || crc32.ChecksumIEEE(data[:8]) != binary.BigEndian.Uint32(data[8:]):
		return nil, fmt.Errorf("cannot read producer id watermark: corrupt file %s: %w", filepath.Join(dir, pidFile), ErrCorruptMetadata)
	default:
		a.next = int64(binary.BigEndian.Uint64(data))
		a.fileNext = a.next
		// Producer ids are never negative (-1 is "no producer"), and the
		// next block must not wrap. (Without this: -1 was handed out.)
		if a.next < 0 || a.next > math.MaxInt64-pidBlockSize {
			return nil, fmt.Errorf("cannot read producer id watermark: %d out of range in %s: %w", a.next, filepath.Join(dir, pidFile), ErrCorruptMetadata)
		}
	}
	a.end = a.next
	return a, nil
}

// allocate returns a new producer id.
func (a *pidAllocator) allocate() (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return 0, fmt.Errorf("cannot allocate a producer id: %w", ErrClosed)
	}
	a.reportLocked()
	if a.next == a.end {
		if a.end > math.MaxInt64-pidBlockSize {
			return 0, fmt.Errorf("cannot reserve producer ids: the id space is exhausted at %d: %w", a.end, ErrCorruptMetadata)
		}
		end := a.end + pidBlockSize
		var buf [12]byte
		binary.BigEndian.PutUint64(buf[:], uint64(end))
		binary.BigEndian.PutUint32(buf[8:], crc32.ChecksumIEEE(buf[:8]))
		path := filepath.Join(a.dir, pidFile)
		err := fsutil.WriteFileAtomic(path, buf[:])
		if err == nil {
			err = fsutil.SyncDir(a.dir)
		}
		if err != nil {
			return 0, fmt.Errorf("cannot reserve producer ids: %w", err)
		}
		a.end = end
	}
	pid := a.next
	a.next++
	return pid, nil
}

// reserveAbove makes every later id larger than pid, which some state of
// the data dir holds (a partition's producer table, the transaction
// coordinator's records). With the watermark file intact that is already
// so; without it (lost or deleted, while the partitions survived) ids would
// start again at 0, and a new producer given an id whose old state a
// partition still keeps would have its first batches taken as that old
// producer's retries: acknowledged, never written. The next allocate
// writes a watermark past the new start before handing out anything.
//
// The new start is not pid+1: ids were handed out in blocks, and the
// watermark that covered pid was at least the end of pid's block, whose
// later ids may have gone to producers that never wrote (or whose state
// expired). Ids start after the block that follows pid's: the end of
// pid's block, plus one block for ids a next reservation may have handed
// out without a trace in any partition.
func (a *pidAllocator) reserveAbove(pid int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if pid < a.next || pid < 0 {
		return
	}
	next := int64(math.MaxInt64 - pidBlockSize)
	if pid/pidBlockSize < next/pidBlockSize-2 {
		next = (pid/pidBlockSize + 2) * pidBlockSize
	}
	a.next, a.end = next, next
	a.raisedBy = max(a.raisedBy, pid)
}

// report logs, once, that reserveAbove derived the next ids again.
func (a *pidAllocator) report() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reportLocked()
}

func (a *pidAllocator) reportLocked() {
	if a.raisedBy < 0 {
		return
	}
	path := filepath.Join(a.dir, pidFile)
	if a.fileNext < 0 {
		a.log.Warn("producer id watermark missing: derived again from the ids in use", "file", path,
			"highest_id_found", a.raisedBy, "next_id", a.next)
	} else {
		a.log.Warn("producer id watermark below an id in use: derived again from the ids in use", "file", path,
			"watermark", a.fileNext, "highest_id_found", a.raisedBy, "next_id", a.next)
	}
	a.raisedBy = -1
}
