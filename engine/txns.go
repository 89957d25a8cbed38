package engine

import (
	"slices"
	"sync/atomic"
)

// openTxns tracks a partition's open transactions in first-offset order,
// for the first unstable offset (Kafka's LSO). It changes only under the
// log's writer mutex (in append callbacks); readers load firstUnstable.
type openTxns struct {
	// byStart holds open transactions in first-offset order; closed ones
	// are dropped from the front lazily (and skipped elsewhere). Appends
	// open them in that order, but a load from a snapshot does not: its
	// entries come in the producer table's order, so begin inserts in
	// place. (Without this: the LSO after a restart was the first offset
	// of whichever open transaction the snapshot listed first.)
	byStart []openTxn
	open    map[int64]int64 // pid -> first offset
	// firstUnstable is the first offset of the oldest open transaction,
	// or -1 when none is open.
	firstUnstable atomic.Int64
}

type openTxn struct {
	pid   int64
	first int64
}

func newOpenTxns() *openTxns {
	t := &openTxns{open: map[int64]int64{}}
	t.firstUnstable.Store(-1)
	return t
}

// begin records that pid opened a transaction at first.
func (t *openTxns) begin(pid, first int64) {
	if _, ok := t.open[pid]; ok {
		return
	}
	t.open[pid] = first
	i := len(t.byStart)
	for i > 0 && t.byStart[i-1].first > first {
		i--
	}
	t.byStart = slices.Insert(t.byStart, i, openTxn{pid, first})
	t.publish()
}

// end records that pid's transaction completed.
func (t *openTxns) end(pid int64) {
	if _, ok := t.open[pid]; !ok {
		return
	}
	delete(t.open, pid)
	t.publish()
}

// oldestOther returns the first offset of the oldest open transaction of a
// producer other than pid, or -1: the lastStableOffset of an aborted
// transaction's index entry.
func (t *openTxns) oldestOther(pid int64) int64 {
	for _, o := range t.byStart {
		if first, ok := t.open[o.pid]; ok && first == o.first && o.pid != pid {
			return o.first
		}
	}
	return -1
}

func (t *openTxns) publish() {
	for len(t.byStart) > 0 {
		o := t.byStart[0]
		if first, ok := t.open[o.pid]; ok && first == o.first {
			break
		}
		t.byStart = t.byStart[1:]
	}
	if len(t.byStart) == 0 {
		t.firstUnstable.Store(-1)
		return
	}
	t.firstUnstable.Store(t.byStart[0].first)
}
