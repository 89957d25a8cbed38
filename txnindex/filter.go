package txnindex

import (
	"cmp"
	"slices"
)

// Batch is what Filter needs from a batch header.
type Batch struct {
	ProducerID    int64 // < 0 when the batch has none
	LastOffset    int64
	Transactional bool
	Control       bool
	AbortMarker   bool // a control batch holding an ABORT marker
}

// Filter is the consumer side of read_committed: given the aborted
// transactions a fetch returned, it says which batches to hide. Batches must
// be visited in offset order. The zero Filter hides only control batches.
//
// Kafka keeps the aborted list in a min-heap by firstOffset; a sorted slice
// with a cursor does the same job, since entries only ever leave from the
// front.
type Filter struct {
	pending []Entry // sorted by FirstOffset; pending[next:] not yet active
	next    int
	active  map[int64]struct{} // producers inside an aborted transaction
}

// NewFilter returns a Filter for the aborted transactions of one fetch.
// Only ProducerID and FirstOffset are used.
func NewFilter(aborted []Entry) *Filter {
	f := &Filter{}
	f.Reset(aborted)
	return f
}

// Reset reuses f for another fetch's aborted list without reallocating.
func (f *Filter) Reset(aborted []Entry) {
	f.pending = append(f.pending[:0], aborted...)
	slices.SortFunc(f.pending, func(a, b Entry) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	f.next = 0
	clear(f.active)
}

// Skip reports whether the consumer must hide b, and advances the filter
// past it. As in Kafka's consumer (CompletedFetch.nextFetchedBatch), an
// aborted transaction becomes active for its producer once a batch reaching
// its firstOffset is visited (by the batch's last offset, which is
// equivalent for the producer's own batches because a transaction starts at
// a batch's base offset), a transactional data batch of an active producer
// is hidden, and that producer's ABORT marker ends the range. Control
// batches are always hidden.
func (f *Filter) Skip(b Batch) bool {
	if b.ProducerID >= 0 {
		for f.next < len(f.pending) && f.pending[f.next].FirstOffset <= b.LastOffset {
			if f.active == nil {
				f.active = make(map[int64]struct{})
			}
			f.active[f.pending[f.next].ProducerID] = struct{}{}
			f.next++
		}
		if b.AbortMarker {
			delete(f.active, b.ProducerID)
		} else if b.Transactional && !b.Control {
			if _, ok := f.active[b.ProducerID]; ok {
				return true
			}
		}
	}
	return b.Control
}
