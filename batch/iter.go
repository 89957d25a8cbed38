package batch

// Iter walks a buffer of batches laid end to end (a segment's bytes, a
// read's chunk, a fetch response's records), framing each by its length
// field as Size does. It checks framing only, so that every walk over
// concatenated batches treats a short or garbled length the same way;
// Parse and Validate check the rest. It does not allocate: an Iter is a
// value, and each batch is a subslice of the buffer.
//
//	it := batch.NewIter(data)
//	for it.Next() {
//		b := it.Batch()
//		...
//	}
//	if err := it.Err(); err != nil { ... } // ErrTruncated or ErrTooSmall
type Iter struct {
	data []byte
	next int // where the next batch starts in data
	pos  int // where the current batch starts
	cur  Batch
	err  error
}

// NewIter returns an iterator over the batches of data.
func NewIter(data []byte) Iter { return Iter{data: data} }

// Next frames the next batch and reports whether there is one. It returns
// false at the end of the buffer, and on a batch it cannot frame: then
// Err says why and Rest returns the bytes from that batch on.
func (it *Iter) Next() bool {
	it.cur = nil
	if it.err != nil || it.next >= len(it.data) {
		return false
	}
	n, err := Size(it.data[it.next:])
	if err != nil {
		it.err = err
		return false
	}
	it.pos = it.next
	it.next += n
	it.cur = Batch(it.data[it.pos:it.next:it.next])
	return true
}

// Batch is the batch Next framed, exactly as long as its length field
// says (capacity included, so that an append to it cannot overwrite the
// next batch); nil once Next returned false.
func (it *Iter) Batch() Batch { return it.cur }

// Pos is where the current batch starts, in bytes from the start of the
// buffer.
func (it *Iter) Pos() int { return it.pos }

// End is where the bytes framed so far end: the current batch's end, or
// the start of the batch Next could not frame.
func (it *Iter) End() int { return it.next }

// Rest returns the bytes not yet framed: from the end of the current
// batch, or, after a framing error, from the batch that caused it.
func (it *Iter) Rest() []byte { return it.data[it.next:] }

// Err is nil when Next stopped at the end of the buffer, and otherwise the
// framing error (wrapping ErrTruncated or ErrTooSmall) of the batch at
// End.
func (it *Iter) Err() error { return it.err }
