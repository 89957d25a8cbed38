package txnindex

import (
	"slices"
	"testing"
)

// Three segments of a log with producers 1, 2 and 3:
//
//	P1 aborts [10, 50] while P2's transaction (from 30) is open: LSO 30.
//	P2 aborts [30, 120] while P3's (from 110) is open: LSO 110.
//	P3 aborts [110, 150] with nothing else open: LSO 151.
//	P1 aborts [160, 210]: LSO 211.
var (
	e1 = Entry{ProducerID: 1, FirstOffset: 10, LastOffset: 50, LastStableOffset: 30}
	e2 = Entry{ProducerID: 2, FirstOffset: 30, LastOffset: 120, LastStableOffset: 110}
	e3 = Entry{ProducerID: 3, FirstOffset: 110, LastOffset: 150, LastStableOffset: 151}
	e4 = Entry{ProducerID: 1, FirstOffset: 160, LastOffset: 210, LastStableOffset: 211}
)

func segments(t *testing.T) []*Index {
	bases := []int64{0, 100, 200}
	content := [][]Entry{{e1}, {e2, e3}, {e4}}
	var segs []*Index
	for i, b := range bases {
		x := mustOpen(t, tmpPath(t, b), b)
		mustAppend(t, x, content[i]...)
		segs = append(segs, x)
	}
	return segs
}

func TestCollect(t *testing.T) {
	t.Parallel()
	segs := segments(t)
	cases := []struct {
		seg       int
		f, u      int64
		want      []Entry
		completed bool
	}{
		{0, 40, 60, []Entry{e1}, false},
		{0, 51, 60, nil, false},        // e1 ends before the fetch
		{0, 0, 10, nil, true},          // e1 starts at U; its LSO 30 >= 10
		{1, 40, 60, []Entry{e2}, true}, // Kafka returns at e2 (LSO 110 >= 60)
		{1, 40, 115, []Entry{e2, e3}, true},
		{1, 130, 250, []Entry{e3}, false},
		{2, 130, 250, []Entry{e4}, false},
	}
	for _, c := range cases {
		got, done := segs[c.seg].Collect(nil, c.f, c.u)
		if !slices.Equal(got, c.want) || done != c.completed {
			t.Errorf("seg %d Collect(%d, %d) = %v, %v; want %v, %v", c.seg, c.f, c.u, got, done, c.want, c.completed)
		}
	}
	var nilIndex *Index
	if got, done := nilIndex.Collect([]Entry{e1}, 0, 100); !slices.Equal(got, []Entry{e1}) || done {
		t.Errorf("nil Collect = %v, %v", got, done)
	}
}

func TestAbortedFor(t *testing.T) {
	t.Parallel()
	segs := segments(t)
	// A segment that must never be scanned: its entry overlaps every fetch
	// below (it is not a consistent index, which is the point).
	poison := mustOpen(t, tmpPath(t, 300), 300)
	mustAppend(t, poison, Entry{ProducerID: 99, FirstOffset: 0, LastOffset: 300, LastStableOffset: 0})
	all := append(segs, poison)

	cases := []struct {
		from int // segment holding the fetch offset
		f, u int64
		want []Entry
	}{
		{0, 40, 60, []Entry{e1, e2}}, // stops in segment 1 on e2's LSO
		{0, 40, 115, []Entry{e1, e2, e3}},
		{0, 0, 10, nil}, // stops in segment 0
		{1, 130, 140, []Entry{e3}},
		{1, 130, 250, []Entry{e3, e4, {ProducerID: 99, FirstOffset: 0, LastOffset: 300}}}, // no stop: poison is reached
	}
	for _, c := range cases {
		dst := make([]Entry, 0, 4)
		got := AbortedFor(all[c.from:], c.f, c.u, dst)
		if !slices.Equal(got, c.want) {
			t.Errorf("AbortedFor(from seg %d, %d, %d) = %v, want %v", c.from, c.f, c.u, got, c.want)
		}
	}
	// Segments without a txn index are nil and skipped over.
	got := AbortedFor([]*Index{segs[0], nil, segs[1]}, 40, 60, nil)
	if !slices.Equal(got, []Entry{e1, e2}) {
		t.Errorf("with a nil segment: %v", got)
	}
}
