package batch

import "fmt"

// minRecordSize is the smallest encoded record: a 1-byte length and a 6-byte
// body (attributes, timestampDelta, offsetDelta, keyLen, valueLen,
// headerCount). It bounds how many records a section of n bytes can hold.
const minRecordSize = 7

// Record is one decoded record. Key and Value are nil when null and non-nil
// (possibly empty) otherwise; both alias the batch or the Decoder's buffer.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	// Offset and Timestamp are absolute: base + delta, or the batch's
	// maxTimestamp for LogAppendTime batches.
	Offset      int64
	Timestamp   int64
	Key         []byte
	Value       []byte
	HeaderCount int
	headers     []byte
}

// Header is a record header. A header key is never null; a value may be.
type Header struct {
	Key   []byte
	Value []byte
}

// Headers returns an iterator over the record's headers, which were
// validated when the record was read.
func (r *Record) Headers() HeaderIter { return HeaderIter{b: r.headers, n: r.HeaderCount} }

// HeaderIter walks validated headers.
type HeaderIter struct {
	b []byte
	n int
}

// Next decodes the next header into h and reports whether there was one.
func (it *HeaderIter) Next(h *Header) bool {
	if it.n == 0 {
		return false
	}
	it.n--
	var n int
	h.Key, n, _ = readBytes(it.b)
	it.b = it.b[n:]
	h.Value, n, _ = readBytes(it.b)
	it.b = it.b[n:]
	return true
}

// readBytes reads a varint length and that many bytes; length -1 is null.
func readBytes(b []byte) (v []byte, n int, ok bool) {
	l, n, ok := readVarint(b)
	if !ok || l < -1 {
		return nil, 0, false
	}
	if l == -1 {
		return nil, n, true
	}
	end := n + int(l)
	if end > len(b) {
		return nil, 0, false
	}
	return b[n:end:end], end, true
}

// readRecord decodes the record at the start of b into r and returns its
// encoded size. The record's length prefix must match its body exactly.
func readRecord(b []byte, r *Record) (int, error) {
	l, n, ok := readVarint(b)
	if !ok || l < minRecordSize-1 || int(l) > len(b)-n {
		return 0, fmt.Errorf("cannot read record length: %w", ErrRecord)
	}
	end := n + int(l)
	body := b[n:end]
	r.Attributes = int8(body[0])
	p := 1
	var m int
	if r.TimestampDelta, m, ok = readVarlong(body[p:]); !ok {
		return 0, fmt.Errorf("cannot read record timestamp delta: %w", ErrRecord)
	}
	p += m
	if r.OffsetDelta, m, ok = readVarint(body[p:]); !ok {
		return 0, fmt.Errorf("cannot read record offset delta: %w", ErrRecord)
	}
	p += m
	if r.Key, m, ok = readBytes(body[p:]); !ok {
		return 0, fmt.Errorf("cannot read record key: %w", ErrRecord)
	}
	p += m
	if r.Value, m, ok = readBytes(body[p:]); !ok {
		return 0, fmt.Errorf("cannot read record value: %w", ErrRecord)
	}
	p += m
	hc, m, ok := readVarint(body[p:])
	// Each header takes at least two bytes, which bounds the count by what
	// is left before anything is trusted.
	if !ok || hc < 0 || int(hc) > (len(body)-p-m)/2 {
		return 0, fmt.Errorf("cannot read record header count: %w", ErrRecord)
	}
	p += m
	hstart := p
	for i := int32(0); i < hc; i++ {
		k, m, ok := readBytes(body[p:])
		if !ok || k == nil {
			return 0, fmt.Errorf("cannot read header %d key: %w", i, ErrRecord)
		}
		p += m
		if _, m, ok = readBytes(body[p:]); !ok {
			return 0, fmt.Errorf("cannot read header %d value: %w", i, ErrRecord)
		}
		p += m
	}
	if p != len(body) {
		return 0, fmt.Errorf("cannot read record: %d bytes past its fields: %w", len(body)-p, ErrRecord)
	}
	r.HeaderCount = int(hc)
	r.headers = body[hstart:p]
	return end, nil
}

// Records iterates the records of one batch. The zero value yields nothing.
type Records struct {
	data          []byte
	left          int32
	baseOffset    int64
	baseTimestamp int64
	appendTime    int64
	logAppendTime bool
	err           error
}

// Next decodes the next record into r. It returns false at the end or on
// error; Err tells which.
func (it *Records) Next(r *Record) bool {
	if it.err != nil {
		return false
	}
	if it.left <= 0 {
		if len(it.data) != 0 {
			it.err = fmt.Errorf("cannot finish records: %d bytes after the last record: %w", len(it.data), ErrRecord)
			it.data = nil
		}
		return false
	}
	n, err := readRecord(it.data, r)
	if err != nil {
		it.err = err
		return false
	}
	it.data = it.data[n:]
	it.left--
	r.Offset = it.baseOffset + int64(r.OffsetDelta)
	if it.logAppendTime {
		r.Timestamp = it.appendTime
	} else {
		r.Timestamp = it.baseTimestamp + r.TimestampDelta
	}
	return true
}

// Err returns the first error met by Next, if any.
func (it *Records) Err() error { return it.err }

// Remaining returns how many records the header says are left.
func (it *Records) Remaining() int { return int(it.left) }
