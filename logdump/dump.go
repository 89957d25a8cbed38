package logdump

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/idemlog/idemlog/batch"
)

// DefaultMaxBatchSize bounds one batch when Options.MaxBatchSize is 0. Kafka
// lets max.message.bytes be raised well past its 1 MiB default, so the bound
// is generous; its job is to turn a garbage length into an error instead of
// an allocation.
const DefaultMaxBatchSize = 64 << 20

// framingSize is what must be read before a batch can be sized and its
// format trusted: baseOffset, batchLength, partitionLeaderEpoch and magic.
const framingSize = 17

// readChunk is the smallest step the batch buffer grows by.
const readChunk = 64 << 10

// Options control a dump. The zero value prints text with records.
type Options struct {
	// JSON prints one JSON object per batch per line instead of text.
	JSON bool
	// NoRecords leaves records out: text prints batch lines only, JSON
	// prints "records":[]. Records are decoded anyway, so corruption inside
	// them is still reported. (It is a negative so that the zero value
	// prints records.)
	NoRecords bool
	// MaxBatchSize is the largest batch accepted, in bytes; a larger length
	// field stops the dump as corrupt. 0 means DefaultMaxBatchSize.
	MaxBatchSize int
	// MaxInflate is the most bytes a compressed records section may inflate
	// to. 0 means batch.DefaultInflateLimit.
	MaxInflate int
	// Warn receives one line per corrupt batch in JSON mode, where the
	// output itself has no room for it (text mode prints it inline). nil
	// discards. The error that stops a dump is returned, not written.
	Warn io.Writer

	// zeroTailOK: the file may end in zeros after its batches (DumpFile
	// sets it for the active segment of a partition not closed cleanly).
	zeroTailOK bool
	// expectSet: expect is the offset the first batch should start at
	// (the segment's base from its name, or where the partition's
	// previous segment ended), from which gaps are measured.
	expectSet bool
	expect    int64
}

// Summary describes what a dump walked.
type Summary struct {
	// Batches counts the batches framed, corrupt ones included.
	Batches int64
	// Records counts the records decoded.
	Records int64
	// Bytes is the size of the batches framed, which is also the position
	// where the walk ended: the file size for a clean file, the start of the
	// torn or impossible batch otherwise.
	Bytes int64
	// Corrupt counts framed batches with a bad CRC, a bad structure or
	// records that do not decode.
	Corrupt int64
	// FirstCorrupt is the file position of the first corrupt batch or of the
	// point where the walk stopped, whichever comes first; -1 if neither.
	FirstCorrupt int64
	// ZeroTail is the size of the zeros that end the file after the last
	// batch: an active segment's preallocated space.
	ZeroTail int64
	// Gaps counts the offsets skipped before batches: between batches,
	// and before the first one from the segment's base (or, in a
	// partition directory, from where the previous segment ended). A
	// compacted log has them; nothing else does.
	Gaps int64
	// Emptied counts batches without records: headers that compaction
	// kept for their offsets and producer state (Kafka keeps a producer's
	// last batch, emptied if need be, so that its sequence survives).
	Emptied int64
	// NextOffset is the offset after the last batch framed, -1 if none.
	NextOffset int64
}

// DumpFile dumps the segment at path to w. See Dump.
func DumpFile(w io.Writer, path string, opts Options) (Summary, error) {
	opts.zeroTailOK = mayEndInZeros(path)
	if base, ok := parseBase(filepath.Base(path), ".log"); ok && !opts.expectSet {
		opts.expectSet, opts.expect = true, base
	}
	f, err := os.Open(path)
	if err != nil {
		return Summary{FirstCorrupt: -1, NextOffset: -1}, fmt.Errorf("cannot open segment: %w", err)
	}
	defer f.Close()
	return Dump(w, path, f, opts)
}

// Dump reads concatenated record batches from r, a segment named name in
// messages, and prints them to w. It returns an error if any batch is
// corrupt or the input ends in a torn or impossible batch; the error names
// the file and the byte position and wraps the batch package's sentinel
// (batch.ErrCRC, batch.ErrTruncated, batch.ErrTooSmall, batch.ErrTooLarge,
// batch.ErrMagic, ...). Everything readable is printed before it returns.
func Dump(w io.Writer, name string, r io.Reader, opts Options) (Summary, error) {
	d := newDumper(w, name, opts)
	stopErr := d.walk(r)
	if stopErr != nil && d.sum.FirstCorrupt < 0 {
		d.sum.FirstCorrupt = d.sum.Bytes
	}
	if !opts.JSON {
		d.writeSummary(stopErr)
	}
	if err := d.out.Flush(); err != nil && d.writeErr == nil {
		d.writeErr = err
	}
	if d.writeErr != nil {
		return d.sum, fmt.Errorf("cannot write dump of %s: %w", name, d.writeErr)
	}
	switch {
	case stopErr != nil && d.firstErr != nil:
		return d.sum, fmt.Errorf("cannot dump %s: %w (after %s, the first: %w)",
			name, stopErr, count(d.sum.Corrupt, "corrupt batch", "corrupt batches"), d.firstErr)
	case stopErr != nil:
		return d.sum, fmt.Errorf("cannot dump %s: %w", name, stopErr)
	case d.firstErr != nil:
		return d.sum, fmt.Errorf("cannot dump %s: %s, the first: %w",
			name, count(d.sum.Corrupt, "corrupt batch", "corrupt batches"), d.firstErr)
	}
	return d.sum, nil
}

// dumper holds the state of one dump; its buffers are reused batch to batch.
type dumper struct {
	opts     Options
	name     string
	out      *bufio.Writer
	warn     io.Writer
	dec      batch.Decoder
	maxBatch int

	enc  *json.Encoder
	jb   jsonBatch
	recs []jsonRecord
	hdrs []jsonHeader
	line []byte

	sum Summary
	// expect is where the next batch should start (-1: unknown, before
	// the first batch of a file not named as a segment).
	expect   int64
	firstErr error // first per-batch problem, returned at the end
	writeErr error // first error writing the output; ends the walk
}

func newDumper(w io.Writer, name string, opts Options) *dumper {
	d := &dumper{
		opts:     opts,
		name:     name,
		out:      bufio.NewWriterSize(w, 64<<10),
		warn:     opts.Warn,
		maxBatch: opts.MaxBatchSize,
		sum:      Summary{FirstCorrupt: -1, NextOffset: -1},
		expect:   -1,
	}
	if opts.expectSet {
		d.expect = opts.expect
	}
	if d.warn == nil {
		d.warn = io.Discard
	}
	if d.maxBatch <= 0 {
		d.maxBatch = DefaultMaxBatchSize
	}
	d.dec.Limit = opts.MaxInflate
	if opts.JSON {
		d.enc = json.NewEncoder(d.out)
		// Keys and values are base64 and header keys are usually plain
		// names; escaping <, > and & would only make them harder to read.
		d.enc.SetEscapeHTML(false)
	} else {
		d.printf("Dumping %s\n", name)
	}
	return d
}

// walk frames and prints batches until the input ends, and returns the
// error that stopped it early, if any. Per-batch problems are recorded in
// d.sum and d.firstErr instead.
func (d *dumper) walk(r io.Reader) error {
	br := bufio.NewReaderSize(r, readChunk)
	buf := make([]byte, framingSize, readChunk)
	for d.writeErr == nil {
		pos := d.sum.Bytes
		n, err := io.ReadFull(br, buf[:framingSize])
		if err == io.EOF {
			return nil
		}
		if err == nil && allZero(buf[:n]) {
			// The unwritten end of an active segment (a live partition,
			// or one not closed cleanly): preallocated zeros, space
			// rather than a batch, as verify and the index dump take
			// them, if zeros run to the end. (Without this: every crashed
			// or live partition dumped as corrupt.) A whole framing of
			// zeros at least: a batch's length field is never zero,
			// while a torn batch's first bytes (a small base offset)
			// may be.
			if z, ok := zeroRest(br); ok {
				d.sum.ZeroTail = int64(n) + z
				if d.opts.zeroTailOK {
					return nil
				}
				// Zeros where batches should be: a sealed segment, or
				// the log was closed cleanly, so something was lost.
				// (Without this: dump passed what verify refuses.)
				return d.stop(pos, fmt.Errorf("cannot frame batch at position %d: %d zero bytes to the end; only the active segment of a log not closed cleanly may end in zeros: %w",
					pos, d.sum.ZeroTail, batch.ErrTooSmall))
			}
		}
		if err == io.ErrUnexpectedEOF {
			return d.stop(pos, fmt.Errorf("cannot frame batch at position %d: %d bytes left, framing needs %d: %w",
				pos, n, framingSize, batch.ErrTruncated))
		}
		if err != nil {
			return fmt.Errorf("cannot read batch at position %d: %w", pos, err)
		}
		size := int64(int32(binary.BigEndian.Uint32(buf[8:]))) + batch.LogOverhead
		switch {
		case size < batch.HeaderSize:
			return d.stop(pos, fmt.Errorf("cannot frame batch at position %d: size %d: %w", pos, size, batch.ErrTooSmall))
		case size > int64(d.maxBatch):
			return d.stop(pos, fmt.Errorf("cannot frame batch at position %d: size %d, limit %d: %w",
				pos, size, d.maxBatch, batch.ErrTooLarge))
		case buf[16] != batch.Magic:
			// v0/v1 message sets share the framing, but idemlog never
			// writes them, so a different magic is far more likely a sign
			// of garbage than of an old-format segment.
			return d.stop(pos, fmt.Errorf("cannot frame batch at position %d: magic %d: %w", pos, int8(buf[16]), batch.ErrMagic))
		}
		buf, err = readRest(br, buf[:framingSize], int(size))
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return d.stop(pos, fmt.Errorf("cannot read batch at position %d: %d of %d bytes present: %w",
				pos, len(buf), size, batch.ErrTruncated))
		}
		if err != nil {
			return fmt.Errorf("cannot read batch at position %d: %w", pos, err)
		}
		d.batch(batch.Batch(buf), pos)
		d.sum.Batches++
		d.sum.Bytes += size
	}
	return nil
}

// readRest reads the batch of size bytes whose framing is in buf. The
// buffer grows with the bytes that actually arrive rather than to size up
// front, so a torn batch claiming megabytes costs only what is there.
func readRest(r io.Reader, buf []byte, size int) ([]byte, error) {
	for len(buf) < size {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(size, max(2*cap(buf), readChunk)))
			copy(nb, buf)
			buf = nb
		}
		n, err := io.ReadFull(r, buf[len(buf):min(size, cap(buf))])
		buf = buf[:len(buf)+n]
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// stop reports the error that ends the walk inline in text mode and returns
// it; in JSON mode the caller gets it through Dump's result.
func (d *dumper) stop(pos int64, err error) error {
	if !d.opts.JSON {
		d.printf("error: %v\n", err)
	}
	return err
}

// batch checks, decodes and prints one framed batch.
func (d *dumper) batch(b batch.Batch, pos int64) {
	crcValid := b.CRC() == b.ComputeCRC()
	var problems [2]error
	if _, err := batch.Validate(b, d.maxBatch); err != nil {
		problems[0] = oneLine{fmt.Errorf("cannot check batch at position %d: %w", pos, err)}
	}
	// Records are decoded even when the CRC is wrong: the damage is often
	// a flipped bit in a value, and the records around it are what one
	// wants to see. They are walked once before printing so that a batch
	// is shown either with all its records or with none.
	it, err := d.dec.Records(b)
	if err == nil {
		probe := it
		var r batch.Record
		for probe.Next(&r) {
		}
		err = probe.Err()
	}
	recordsOK := err == nil
	if err != nil {
		problems[1] = oneLine{fmt.Errorf("cannot decode records of batch at position %d: %w", pos, err)}
	}
	if problems[0] != nil || problems[1] != nil {
		d.sum.Corrupt++
		if d.sum.FirstCorrupt < 0 {
			d.sum.FirstCorrupt = pos
		}
		if d.firstErr == nil {
			d.firstErr = problems[0]
			if d.firstErr == nil {
				d.firstErr = problems[1]
			}
		}
	}
	if recordsOK {
		d.sum.Records += int64(it.Remaining())
	}
	if d.opts.NoRecords || !recordsOK {
		it = batch.Records{}
	}
	// The framing was checked, so the offsets at least are the batch's
	// (the CRC does not cover the base offset anyway). A negative gap is
	// an overlap: offsets a log never assigns twice.
	var gap int64
	if d.expect >= 0 {
		gap = b.BaseOffset() - d.expect
	}
	d.expect = b.NextOffset()
	d.sum.NextOffset = d.expect
	if gap > 0 {
		d.sum.Gaps += gap
	}
	if b.RecordsCount() == 0 {
		d.sum.Emptied++
	}
	if d.opts.JSON {
		for _, p := range problems {
			if p != nil {
				// A warning that cannot be written must not cost the
				// dump itself; the problem is still counted and returned.
				_, _ = fmt.Fprintf(d.warn, "%s: %v\n", d.name, p)
			}
		}
		d.writeJSON(b, crcValid, gap, it)
		return
	}
	d.writeText(b, pos, crcValid, gap, problems[:], it)
}

func (d *dumper) printf(format string, args ...any) {
	if d.writeErr != nil {
		return
	}
	if _, err := fmt.Fprintf(d.out, format, args...); err != nil {
		d.writeErr = err
	}
}

func (d *dumper) write(p []byte) {
	if d.writeErr != nil {
		return
	}
	if _, err := d.out.Write(p); err != nil {
		d.writeErr = err
	}
}

// writeSummary ends a text dump.
func (d *dumper) writeSummary(stopErr error) {
	s := d.sum
	d.printf("Summary: %s, %s, %d bytes, %d corrupt",
		count(s.Batches, "batch", "batches"), count(s.Records, "record", "records"), s.Bytes, s.Corrupt)
	if s.Corrupt > 0 {
		d.printf(" (first at position %d)", s.FirstCorrupt)
	}
	if stopErr != nil {
		d.printf(", stopped at position %d", s.Bytes)
	}
	if s.Gaps > 0 {
		d.printf(", %s in gaps", count(s.Gaps, "offset", "offsets"))
	}
	if s.Emptied > 0 {
		d.printf(", %s", count(s.Emptied, "emptied batch", "emptied batches"))
	}
	if s.ZeroTail > 0 {
		d.printf(", then %d bytes of preallocated zeros", s.ZeroTail)
	}
	d.printf("\n")
}

// zeroRest reads r to its end and reports whether every byte was zero,
// and how many there were.
func zeroRest(r io.Reader) (int64, bool) {
	var buf [32 << 10]byte
	var total int64
	for {
		n, err := r.Read(buf[:])
		if !allZero(buf[:n]) {
			return total, false
		}
		total += int64(n)
		if err == io.EOF {
			return total, true
		}
		if err != nil {
			return total, false
		}
	}
}

func count(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// oneLine keeps an error on one line: the decompressors' errors arrive
// through errors.Join, whose newlines would split a diagnostic line in two.
type oneLine struct{ err error }

func (e oneLine) Error() string { return strings.ReplaceAll(e.err.Error(), "\n", ": ") }
func (e oneLine) Unwrap() error { return e.err }
