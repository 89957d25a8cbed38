package logdump

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrIndex wraps the problems found in an .index or .timeindex file: a size
// that is not a whole number of entries, an entry below the base offset, or
// one that does not follow the previous entry.
var ErrIndex = errors.New("bad index entry")

// DumpPath dumps what path names: a partition directory (its .log files,
// segments in base-offset order first), an offset index (.index), a time
// index (.timeindex), a producer snapshot (.snapshot), an aborted-transaction
// index (.txnindex), or a segment (any other file, as Kafka's tool takes
// a segment of any name). A directory's files are all dumped even after a
// bad one; the error then joins one error per bad file.
func DumpPath(w io.Writer, path string, opts Options) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		segs, others, err := listLogs(path)
		if err != nil {
			return fmt.Errorf("cannot dump %s: %w", path, err)
		}
		files := others
		if len(segs) > 0 {
			files = make([]string, 0, len(segs)+len(others))
			for _, s := range segs {
				files = append(files, s.path)
			}
			files = append(files, others...)
		}
		if len(files) == 0 {
			return fmt.Errorf("cannot dump %s: no .log files in it", path)
		}
		var errs FileErrors
		next := int64(-1)
		for i, f := range files {
			o := opts
			if i > 0 && i < len(segs) && next >= 0 {
				// A segment's gaps are measured from where the one
				// before ended: compaction empties segment tails too.
				o.expectSet, o.expect = true, next
			}
			sum, err := DumpFile(w, f, o)
			if err != nil {
				errs = append(errs, err)
			}
			if sum.NextOffset >= 0 {
				// An empty segment (compaction may leave one) moves
				// nothing: the next one's gap counts from the last batch.
				next = sum.NextOffset
			}
		}
		if len(errs) == 0 {
			return nil
		}
		return errs
	}
	switch {
	case strings.HasSuffix(path, ".index"):
		return dumpIndexFile(w, path, offsetIndex, opts)
	case strings.HasSuffix(path, ".timeindex"):
		return dumpIndexFile(w, path, timeIndex, opts)
	case strings.HasSuffix(path, ".snapshot"):
		return dumpSnapshotFile(w, path, opts)
	case strings.HasSuffix(path, ".txnindex"):
		return dumpTxnIndexFile(w, path, opts)
	}
	_, err := DumpFile(w, path, opts)
	return err
}

// FileErrors is DumpPath's error for a directory: one error per bad file,
// each naming its file. (A single file's error may wrap several causes;
// only this type is a list of files.)
type FileErrors []error

func (e FileErrors) Error() string   { return errors.Join(e...).Error() }
func (e FileErrors) Unwrap() []error { return e }

// indexKind describes one of the two index formats (see package index).
type indexKind struct {
	suffix    string
	entrySize int
	// fields names the two numbers of an entry, in file order for the
	// time index and in Kafka's print order for both.
	fields [2]string
	// decode returns an entry's two numbers in print order, the offset
	// made absolute.
	decode func(e []byte, base int64) (a, b int64)
	// offsetAt says which of the two numbers is the offset.
	offsetAt int
	// follows reports whether an entry may come after prev.
	follows func(prev, cur [2]int64) bool
	// posAt says which number is a file position (never negative), -1 if
	// neither.
	posAt int
}

var (
	offsetIndex = &indexKind{
		suffix:    ".index",
		entrySize: 8,
		fields:    [2]string{"offset", "position"},
		decode: func(e []byte, base int64) (int64, int64) {
			return base + int64(int32(binary.BigEndian.Uint32(e))), int64(int32(binary.BigEndian.Uint32(e[4:])))
		},
		offsetAt: 0,
		follows:  func(prev, cur [2]int64) bool { return cur[0] > prev[0] && cur[1] > prev[1] },
		posAt:    1,
	}
	timeIndex = &indexKind{
		suffix:    ".timeindex",
		entrySize: 12,
		fields:    [2]string{"timestamp", "offset"},
		decode: func(e []byte, base int64) (int64, int64) {
			return int64(binary.BigEndian.Uint64(e)), base + int64(int32(binary.BigEndian.Uint32(e[8:])))
		},
		offsetAt: 1,
		follows:  func(prev, cur [2]int64) bool { return cur[0] > prev[0] && cur[1] >= prev[1] },
		posAt:    -1,
	}
)

// dumpIndexFile prints every entry of an index file, in the layout of
// Kafka's DumpLogSegments ("offset: O position: P", "timestamp: T offset:
// O") or as one JSON object per entry. An index that was not trimmed (its
// log was not closed cleanly) ends in preallocated zeros; like package
// index, the dump takes the entries to end where the zeros start, so the
// file is streamed with the zero entries held back until a non-zero one
// shows they were entries after all. The file is only read.
func dumpIndexFile(w io.Writer, path string, k *indexKind, opts Options) error {
	base, ok := parseBase(filepath.Base(path), k.suffix)
	if !ok {
		// Entries hold offsets relative to the base, and only the name
		// says what the base is.
		return fmt.Errorf("cannot dump %s: name is not <20-digit base offset>%s", path, k.suffix)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("cannot open index: %w", err)
	}
	defer f.Close()
	d := indexDumper{k: k, name: path, base: base, json: opts.JSON, warn: opts.Warn, out: bufio.NewWriterSize(w, 64<<10)}
	if d.warn == nil {
		d.warn = io.Discard
	}
	if !d.json {
		d.printf("Dumping %s\n", path)
	}
	stopErr := d.walk(bufio.NewReaderSize(f, 64<<10))
	if !d.json {
		d.printf("Summary: %s, %d bad", count(d.entries, "entry", "entries"), d.bad)
		if d.zeros > 0 {
			d.printf(", %d bytes of preallocated zeros after the last", d.zeros*int64(k.entrySize))
		}
		if stopErr != nil {
			d.printf(", stopped at position %d", (d.entries+d.zeros)*int64(k.entrySize))
		}
		d.printf("\n")
	}
	if err := d.out.Flush(); err != nil && d.writeErr == nil {
		d.writeErr = err
	}
	switch {
	case d.writeErr != nil:
		return fmt.Errorf("cannot write dump of %s: %w", path, d.writeErr)
	case stopErr != nil:
		return fmt.Errorf("cannot dump %s: %w", path, stopErr)
	case d.firstErr != nil:
		return fmt.Errorf("cannot dump %s: %s, the first: %w", path, count(d.bad, "bad entry", "bad entries"), d.firstErr)
	}
	return nil
}

type indexDumper struct {
	k        *indexKind
	name     string
	base     int64
	json     bool
	out      *bufio.Writer
	warn     io.Writer
	line     []byte
	entries  int64 // entries printed
	zeros    int64 // all-zero entries read and not yet printed
	prev     [2]int64
	bad      int64
	firstErr error
	writeErr error
}

func (d *indexDumper) walk(r io.Reader) error {
	e, zero := make([]byte, d.k.entrySize), make([]byte, d.k.entrySize)
	for d.writeErr == nil {
		n, err := io.ReadFull(r, e)
		if err == io.EOF {
			return nil
		}
		if err == io.ErrUnexpectedEOF {
			err = fmt.Errorf("%d bytes at position %d are not a whole %d-byte entry: %w",
				n, (d.entries+d.zeros)*int64(d.k.entrySize), d.k.entrySize, ErrIndex)
			if !d.json {
				d.printf("error: %v\n", err)
			}
			return err
		}
		if err != nil {
			return fmt.Errorf("cannot read index: %w", err)
		}
		if allZero(e) {
			d.zeros++
			continue
		}
		for ; d.zeros > 0; d.zeros-- {
			d.entry(d.k.decode(zero, d.base))
		}
		d.entry(d.k.decode(e, d.base))
	}
	return nil
}

// entry prints one entry and checks it against the previous one.
func (d *indexDumper) entry(a, b int64) {
	cur := [2]int64{a, b}
	var problem error
	switch {
	case cur[d.k.offsetAt] < d.base:
		problem = fmt.Errorf("entry %d {%s %d, %s %d}: offset below the base %d: %w",
			d.entries, d.k.fields[0], a, d.k.fields[1], b, d.base, ErrIndex)
	case d.k.posAt >= 0 && cur[d.k.posAt] < 0:
		// The first entry too: only later ones are checked against the
		// one before them.
		problem = fmt.Errorf("entry %d {%s %d, %s %d}: negative position: %w",
			d.entries, d.k.fields[0], a, d.k.fields[1], b, ErrIndex)
	case d.entries > 0 && !d.k.follows(d.prev, cur):
		problem = fmt.Errorf("entry %d {%s %d, %s %d} does not follow entry %d {%s %d, %s %d}: %w",
			d.entries, d.k.fields[0], a, d.k.fields[1], b, d.entries-1, d.k.fields[0], d.prev[0], d.k.fields[1], d.prev[1], ErrIndex)
	}
	l := d.line[:0]
	if d.json {
		l = append(append(append(l, `{"`...), d.k.fields[0]...), `":`...)
		l = strconv.AppendInt(l, a, 10)
		l = append(append(append(l, `,"`...), d.k.fields[1]...), `":`...)
		l = append(strconv.AppendInt(l, b, 10), "}\n"...)
	} else {
		l = appendField(append(l, d.k.fields[0]...), ": ", a)
		l = appendField(append(append(l, ' '), d.k.fields[1]...), ": ", b)
		l = append(l, '\n')
		if problem != nil {
			l = append(append(append(l, "error: "...), problem.Error()...), '\n')
		}
	}
	if d.writeErr == nil {
		_, d.writeErr = d.out.Write(l)
	}
	d.line = l
	if problem != nil {
		d.bad++
		if d.firstErr == nil {
			d.firstErr = problem
		}
		if d.json {
			_, _ = fmt.Fprintf(d.warn, "%s: %v\n", d.name, problem)
		}
	}
	d.prev = cur
	d.entries++
}

func (d *indexDumper) printf(format string, args ...any) {
	if d.writeErr == nil {
		_, d.writeErr = fmt.Fprintf(d.out, format, args...)
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
