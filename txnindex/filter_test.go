package txnindex

import (
	"slices"
	"testing"
)

type logBatch struct {
	base, last int64
	pid        int64 // -1: none
	txn        bool
	marker     int // 0: data, 1: COMMIT, 2: ABORT
	visible    bool
}

const (
	data = iota
	commit
	abort
)

// A log of interleaved producers, labelled with what a read_committed
// consumer must see: committed and non-transactional data only.
var txnLog = []logBatch{
	{0, 0, 1, true, data, false},   // P1 txn A (aborted)
	{1, 1, 2, true, data, true},    // P2 txn (committed)
	{2, 2, 9, false, data, true},   // P9 idempotent, not transactional
	{3, 3, 1, true, data, false},   // P1 txn A
	{4, 4, -1, false, data, true},  // plain producer
	{5, 5, 2, true, commit, false}, // P2 COMMIT
	{6, 6, 1, true, abort, false},  // P1 ABORT (A)
	{7, 7, 1, true, data, true},    // P1 txn B (committed)
	{8, 9, 3, true, data, false},   // P3 txn C (aborted), two records
	{10, 10, 1, true, commit, false},
	{11, 11, 2, true, data, false}, // P2 txn D (aborted)
	{12, 12, 3, true, data, false}, // P3 txn C
	{13, 13, 3, true, abort, false},
	{14, 14, 2, true, abort, false},
	{15, 15, 3, true, data, true}, // P3 txn E (committed)
	{16, 16, 3, true, commit, false},
	{17, 17, -1, false, data, true},
}

// buildIndexes plays the broker: it writes an entry per aborted non-empty
// transaction into the segment holding the marker, with the LSO rule of
// §3.9.
func buildIndexes(t *testing.T, bases []int64) []*Index {
	segs := make([]*Index, len(bases))
	for i, b := range bases {
		segs[i] = mustOpen(t, tmpPath(t, b), b)
	}
	open := map[int64]int64{} // pid -> first offset
	for _, b := range txnLog {
		if !b.txn {
			continue
		}
		if b.marker == data {
			if _, ok := open[b.pid]; !ok {
				open[b.pid] = b.base
			}
			continue
		}
		first, ok := open[b.pid]
		delete(open, b.pid)
		if !ok || b.marker != abort {
			continue
		}
		lso := b.base + 1
		for _, f := range open {
			lso = min(lso, f)
		}
		seg := 0
		for i, base := range bases {
			if base <= b.base {
				seg = i
			}
		}
		mustAppend(t, segs[seg], Entry{ProducerID: b.pid, FirstOffset: first, LastOffset: b.base, LastStableOffset: lso})
	}
	return segs
}

func TestBrokerEntries(t *testing.T) {
	t.Parallel()
	segs := buildIndexes(t, []int64{0, 6, 12})
	want := [][]Entry{
		nil,
		{{ProducerID: 1, FirstOffset: 0, LastOffset: 6, LastStableOffset: 7}},
		{{ProducerID: 3, FirstOffset: 8, LastOffset: 13, LastStableOffset: 11}, {ProducerID: 2, FirstOffset: 11, LastOffset: 14, LastStableOffset: 15}},
	}
	for i, x := range segs {
		if !slices.Equal(x.Entries(), want[i]) {
			t.Errorf("segment %d: %v, want %v", i, x.Entries(), want[i])
		}
	}
}

func TestFilter(t *testing.T) {
	t.Parallel()
	bases := []int64{0, 6, 12}
	segs := buildIndexes(t, bases)
	f := &Filter{} // reused across fetches, as a consumer would
	for _, c := range []struct{ f, u int64 }{
		{0, 18}, {3, 6}, {7, 18}, {9, 14}, {12, 18}, {0, 7}, {14, 18},
	} {
		from := 0
		for i, b := range bases {
			if b <= c.f {
				from = i
			}
		}
		aborted := AbortedFor(segs[from:], c.f, c.u, nil)
		// The consumer only sees producerId and firstOffset, in any order.
		for i := range aborted {
			aborted[i].LastOffset, aborted[i].LastStableOffset = 0, 0
		}
		slices.Reverse(aborted)
		f.Reset(aborted)
		var got, want []int64
		for _, b := range txnLog {
			if b.last < c.f || b.base >= c.u {
				continue
			}
			if b.visible {
				want = append(want, b.base)
			}
			if !f.Skip(Batch{ProducerID: b.pid, LastOffset: b.last, Transactional: b.txn, Control: b.marker != data, AbortMarker: b.marker == abort}) {
				got = append(got, b.base)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("fetch [%d, %d) with aborted %v: delivered %v, want %v", c.f, c.u, aborted, got, want)
		}
	}
}

func TestFilterZero(t *testing.T) {
	t.Parallel()
	f := NewFilter(nil)
	if f.Skip(Batch{ProducerID: 1, LastOffset: 0, Transactional: true}) {
		t.Error("zero Filter hid a data batch")
	}
	if !f.Skip(Batch{ProducerID: 1, LastOffset: 1, Transactional: true, Control: true}) {
		t.Error("zero Filter delivered a control batch")
	}
}
