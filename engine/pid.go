package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
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
	mu   sync.Mutex
	next int64
	end  int64 // exclusive end of the reserved block
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

func openPIDAllocator(dir string) (*pidAllocator, error) {
	a := &pidAllocator{dir: dir}
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
		// Producer ids are never negative (-1 is "no producer"), and the
		// next block must not wrap. (From review: -1 was handed out.)
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
// writes a watermark past pid before handing out anything.
func (a *pidAllocator) reserveAbove(pid int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if pid >= a.next && pid < math.MaxInt64 {
		a.next = pid + 1
		a.end = a.next
	}
}
