package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
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
}

func openPIDAllocator(dir string) (*pidAllocator, error) {
	a := &pidAllocator{dir: dir}
	data, err := os.ReadFile(filepath.Join(dir, pidFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("cannot read producer id watermark: %w", err)
	case len(data) != 12 || crc32.ChecksumIEEE(data[:8]) != binary.BigEndian.Uint32(data[8:]):
		return nil, fmt.Errorf("cannot read producer id watermark: corrupt file %s", filepath.Join(dir, pidFile))
	default:
		a.next = int64(binary.BigEndian.Uint64(data))
	}
	a.end = a.next
	return a, nil
}

// allocate returns a new producer id.
func (a *pidAllocator) allocate() (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next == a.end {
		end := a.end + pidBlockSize
		var buf [12]byte
		binary.BigEndian.PutUint64(buf[:], uint64(end))
		binary.BigEndian.PutUint32(buf[8:], crc32.ChecksumIEEE(buf[:8]))
		if err := writeFileAtomic(filepath.Join(a.dir, pidFile), buf[:]); err != nil {
			return 0, fmt.Errorf("cannot reserve producer ids: %w", err)
		}
		a.end = end
	}
	pid := a.next
	a.next++
	return pid, nil
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
