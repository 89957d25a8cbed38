package txnindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/idemlog/idemlog/errcode"
)

// EntrySize is the size of one entry in the file.
const EntrySize = 34

// version is the only entry version Kafka has ever written.
const version = 0

var (
	// ErrCorrupt reports a file that fails the load-time checks; the caller
	// recovers the segment.
	ErrCorrupt = errcode.New(errcode.CorruptMessage, "corrupt transaction index")
	// ErrOutOfOrder reports an Append whose lastOffset does not increase or
	// lies below the segment base: a caller bug, refused before it reaches
	// the file so that the file always passes Open's checks.
	ErrOutOfOrder = errcode.New(errcode.UnknownServerError, "transaction index entry out of order")
	// ErrClosed reports a write after Close or Delete.
	ErrClosed = errcode.New(errcode.UnknownServerError, "transaction index closed")
)

// Entry is one aborted transaction.
type Entry struct {
	ProducerID       int64
	FirstOffset      int64 // base offset of the producer's first batch in the transaction
	LastOffset       int64 // offset of the ABORT marker
	LastStableOffset int64 // see the package doc
}

// Put encodes e into b[:EntrySize].
func (e Entry) Put(b []byte) {
	_ = b[EntrySize-1]
	binary.BigEndian.PutUint16(b[0:], version)
	binary.BigEndian.PutUint64(b[2:], uint64(e.ProducerID))
	binary.BigEndian.PutUint64(b[10:], uint64(e.FirstOffset))
	binary.BigEndian.PutUint64(b[18:], uint64(e.LastOffset))
	binary.BigEndian.PutUint64(b[26:], uint64(e.LastStableOffset))
}

// Decode decodes one entry from b[:EntrySize].
func Decode(b []byte) (Entry, error) {
	_ = b[EntrySize-1]
	if v := int16(binary.BigEndian.Uint16(b)); v != version {
		return Entry{}, fmt.Errorf("cannot decode transaction index entry: version %d: %w", v, ErrCorrupt)
	}
	return Entry{
		ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
		FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
		LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
		LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
	}, nil
}

// Index is one segment's aborted-transaction index. See the package doc for
// the concurrency contract.
type Index struct {
	path string
	base int64

	mu     sync.Mutex // serializes writers; readers never take it
	f      *os.File   // nil until the file exists
	closed bool

	entries atomic.Pointer[[]Entry] // never nil after Open/Create
}

// Open loads the index at path for the segment with base offset base. A
// missing file is an empty index (the file appears on the first Append).
// A file that fails the checks in the package doc is ErrCorrupt.
func Open(path string, base int64) (*Index, error) {
	x := &Index{path: path, base: base}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		x.publish(nil)
		return x, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot open transaction index: %w", err)
	}
	entries, err := load(f, base)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot open transaction index %s: %w", path, err)
	}
	if len(entries) == 0 {
		// An empty file holds no descriptor: Append opens it again (every
		// segment has one, most stay empty).
		f.Close()
	} else {
		x.f = f
	}
	x.publish(entries)
	return x, nil
}

// EnsureFile creates the index's file, empty, if it does not exist, so that
// a missing file means a lost one. It holds no descriptor afterwards; the
// caller syncs the directory.
func (x *Index) EnsureFile() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return fmt.Errorf("cannot create transaction index: %w", ErrClosed)
	}
	if x.f != nil {
		return nil
	}
	f, err := os.OpenFile(x.path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("cannot create transaction index: %w", err)
	}
	return f.Close()
}

// ReadFile returns the entries of the index at path for the segment with
// base offset base, opening the file read-only (an offline check must
// work on a read-only copy and change nothing); it checks what Open
// checks. A missing file has no entries.
func ReadFile(path string, base int64) ([]Entry, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot open transaction index: %w", err)
	}
	defer f.Close()
	entries, err := load(f, base)
	if err != nil {
		return nil, fmt.Errorf("cannot read transaction index %s: %w", path, err)
	}
	return entries, nil
}

// Create returns an empty index at path, removing any file there: the
// starting point for recovering a segment whose index failed Open.
func Create(path string, base int64) (*Index, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cannot create transaction index: %w", err)
	}
	x := &Index{path: path, base: base}
	x.publish(nil)
	return x, nil
}

func load(f *os.File, base int64) ([]Entry, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size%EntrySize != 0 {
		return nil, fmt.Errorf("size %d not a multiple of %d: %w", size, EntrySize, ErrCorrupt)
	}
	if size > maxFileSize {
		return nil, fmt.Errorf("size %d above the %d a segment's markers can need: %w", size, int64(maxFileSize), ErrCorrupt)
	}
	// Read and checked a chunk at a time, so that a large file of garbage
	// (a sparse one, say) is refused at its first bad entry rather than
	// read whole first.
	var (
		chunk   [loadChunkEntries * EntrySize]byte
		entries []Entry
	)
	for off := int64(0); off < size; {
		n := int(min(size-off, int64(len(chunk))))
		if _, err := f.ReadAt(chunk[:n], off); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		} else if err != nil {
			return nil, fmt.Errorf("file shorter than its size %d: %w", size, ErrCorrupt)
		}
		for i := 0; i < n; i += EntrySize {
			idx := (off + int64(i)) / EntrySize
			e, err := Decode(chunk[i:])
			if err != nil {
				return nil, fmt.Errorf("entry %d: %w", idx, err)
			}
			if e.LastOffset < base {
				return nil, fmt.Errorf("entry %d: last offset %d below segment base %d: %w", idx, e.LastOffset, base, ErrCorrupt)
			}
			if k := len(entries); k > 0 && e.LastOffset <= entries[k-1].LastOffset {
				return nil, fmt.Errorf("entry %d: last offset %d not above %d: %w", idx, e.LastOffset, entries[k-1].LastOffset, ErrCorrupt)
			}
			entries = append(entries, e)
		}
		off += int64(n)
	}
	return entries, nil
}

const (
	// loadChunkEntries is how many entries load reads at a time.
	loadChunkEntries = 1024
	// maxFileSize bounds an index file: an entry per ABORT marker, and a
	// marker batch takes at least 61 bytes of a segment of at most 2 GiB
	// (segment.bytes is an int32 in Kafka).
	maxFileSize = (math.MaxInt32/61 + 1) * EntrySize
)

// publish stores s with its capacity clipped only by Entries; keeping the
// full capacity here lets Append grow in place.
func (x *Index) publish(s []Entry) { x.entries.Store(&s) }

func (x *Index) load() []Entry { return *x.entries.Load() }

// Path returns the file's path.
func (x *Index) Path() string { return x.path }

// Base returns the segment's base offset.
func (x *Index) Base() int64 { return x.base }

// Entries returns the entries in lastOffset order. The slice is shared and
// must not be modified; its capacity is clipped so that appending to it
// copies.
func (x *Index) Entries() []Entry {
	s := x.load()
	return s[:len(s):len(s)]
}

// Append writes e through to the file, creating the file on first use.
// e.LastOffset must exceed the previous entry's and be >= the segment base.
// A failed write leaves the entries as they were; whatever part of the entry
// reached the file is cut off again if possible, and otherwise makes the
// next Open fail with ErrCorrupt so that the segment is recovered.
func (x *Index) Append(e Entry) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return fmt.Errorf("cannot append transaction index entry: %w", ErrClosed)
	}
	cur := x.load()
	if e.LastOffset < x.base {
		return fmt.Errorf("cannot append transaction index entry: last offset %d below segment base %d: %w", e.LastOffset, x.base, ErrOutOfOrder)
	}
	if n := len(cur); n > 0 && e.LastOffset <= cur[n-1].LastOffset {
		return fmt.Errorf("cannot append transaction index entry: last offset %d not above %d: %w", e.LastOffset, cur[n-1].LastOffset, ErrOutOfOrder)
	}
	if x.f == nil {
		// O_TRUNC: with no file open the in-memory index is empty, so
		// anything already at path is stale.
		f, err := os.OpenFile(x.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("cannot create transaction index: %w", err)
		}
		x.f = f
	}
	var b [EntrySize]byte
	e.Put(b[:])
	off := int64(len(cur)) * EntrySize
	if _, err := x.f.WriteAt(b[:], off); err != nil {
		_ = x.f.Truncate(off)
		return fmt.Errorf("cannot append transaction index entry: %w", err)
	}
	x.publish(append(cur, e))
	return nil
}

// Collect appends to dst the entries with LastOffset >= fetchOffset and
// FirstOffset < upperBound, and reports whether the scan is complete: some
// entry has LastStableOffset >= upperBound, so later segments need not be
// scanned. A nil index is empty.
func (x *Index) Collect(dst []Entry, fetchOffset, upperBound int64) ([]Entry, bool) {
	if x == nil {
		return dst, false
	}
	for _, e := range x.load() {
		if e.LastOffset >= fetchOffset && e.FirstOffset < upperBound {
			dst = append(dst, e)
		}
		if e.LastStableOffset >= upperBound {
			return dst, true
		}
	}
	return dst, false
}

// AbortedFor collects the aborted transactions a read_committed fetch of
// [fetchOffset, upperBound) must return, appending them to dst. segments
// are the log's segments in offset order starting with the one holding
// fetchOffset; a nil element is a segment without a transaction index.
func AbortedFor(segments []*Index, fetchOffset, upperBound int64, dst []Entry) []Entry {
	for _, x := range segments {
		var done bool
		dst, done = x.Collect(dst, fetchOffset, upperBound)
		if done {
			break
		}
	}
	return dst
}

// TruncateTo drops the entries with LastOffset >= offset, from the file
// first so that a failure leaves memory matching what is still on disk.
func (x *Index) TruncateTo(offset int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return fmt.Errorf("cannot truncate transaction index: %w", ErrClosed)
	}
	cur := x.load()
	i := sort.Search(len(cur), func(i int) bool { return cur[i].LastOffset >= offset })
	if i == len(cur) {
		return nil
	}
	if x.f != nil {
		if err := x.f.Truncate(int64(i) * EntrySize); err != nil {
			return fmt.Errorf("cannot truncate transaction index: %w", err)
		}
	}
	// A fresh array: readers may still hold views over the dropped entries,
	// which a later in-place Append would otherwise overwrite.
	x.publish(append([]Entry(nil), cur[:i]...))
	return nil
}

// Reset empties the index, leaving an empty file if one exists, as Kafka
// does before rebuilding a segment's indexes.
func (x *Index) Reset() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return fmt.Errorf("cannot reset transaction index: %w", ErrClosed)
	}
	if x.f != nil {
		if err := x.f.Truncate(0); err != nil {
			return fmt.Errorf("cannot reset transaction index: %w", err)
		}
	}
	x.publish(nil)
	return nil
}

// Sync flushes the file, if there is one.
func (x *Index) Sync() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		return nil
	}
	if err := x.f.Sync(); err != nil {
		return fmt.Errorf("cannot sync transaction index: %w", err)
	}
	return nil
}

// Close closes the file. The entries stay readable.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.closeLocked()
}

func (x *Index) closeLocked() error {
	x.closed = true
	if x.f == nil {
		return nil
	}
	err := x.f.Close()
	x.f = nil
	if err != nil {
		return fmt.Errorf("cannot close transaction index: %w", err)
	}
	return nil
}

// Delete closes the index and removes its file, if any.
func (x *Index) Delete() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	cerr := x.closeLocked()
	if err := os.Remove(x.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cannot delete transaction index: %w", err)
	}
	return cerr
}
