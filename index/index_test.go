//go:build linux

package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

const testBase = 1_000_000

func offsetPath(t testing.TB) string {
	return filepath.Join(t.TempDir(), fmt.Sprintf("%020d.index", testBase))
}

func timePath(t testing.TB) string {
	return filepath.Join(t.TempDir(), fmt.Sprintf("%020d.timeindex", testBase))
}

func mustOpenOffset(t testing.TB, path string, maxBytes int) *OffsetIndex {
	t.Helper()
	x, err := OpenOffset(path, testBase, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

func mustOpenTime(t testing.TB, path string, maxBytes int) *TimeIndex {
	t.Helper()
	x, err := OpenTime(path, testBase, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// crashCopy snapshots the file as a crash would leave it: untrimmed, with
// whatever went through the mapping (the page cache is shared).
func crashCopy(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

type offEntry struct{ off, pos int64 }

// modelLookup is the specification of OffsetIndex.Lookup over a sorted slice.
func modelLookup(es []offEntry, target int64) offEntry {
	i := sort.Search(len(es), func(i int) bool { return es[i].off > target })
	if i == 0 {
		return offEntry{testBase, 0}
	}
	return es[i-1]
}

func randomOffsets(r *rand.Rand, n int) []offEntry {
	es := make([]offEntry, n)
	off, pos := int64(testBase), int64(0)
	for i := range es {
		off += 1 + r.Int64N(50)
		pos += 1 + r.Int64N(20000)
		es[i] = offEntry{off, pos}
	}
	return es
}

func checkOffsetAgainstModel(t *testing.T, x *OffsetIndex, es []offEntry, r *rand.Rand) {
	t.Helper()
	if got := x.Entries(); got != len(es) {
		t.Fatalf("Entries() = %d, want %d", got, len(es))
	}
	for i, e := range es {
		if o, p := x.Entry(i); o != e.off || p != e.pos {
			t.Fatalf("Entry(%d) = {%d, %d}, want %v", i, o, p, e)
		}
	}
	last := int64(testBase)
	if len(es) > 0 {
		last = es[len(es)-1].off
	}
	if got := x.LastOffset(); got != last {
		t.Fatalf("LastOffset() = %d, want %d", got, last)
	}
	targets := []int64{math.MinInt64, 0, testBase - 1, testBase, testBase + 1, last, last + 1, last + 1<<40, math.MaxInt64}
	for _, e := range es {
		targets = append(targets, e.off-1, e.off, e.off+1)
	}
	for range 200 {
		targets = append(targets, testBase-10+r.Int64N(last-testBase+20))
	}
	for _, target := range targets {
		want := modelLookup(es, target)
		if o, p := x.Lookup(target); o != want.off || p != want.pos {
			t.Fatalf("Lookup(%d) = {%d, %d}, want %v", target, o, p, want)
		}
	}
}

func TestOffsetAgainstModel(t *testing.T) {
	t.Parallel()
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		// Sizes straddle the warm section (1024 entries).
		n := []int{0, 1, 2, 3, 100, 1023, 1024, 1025, 3000}[seed%9] + int(seed/9)
		es := randomOffsets(r, n)
		path := offsetPath(t)
		x := mustOpenOffset(t, path, (n+5)*OffsetEntrySize)
		for _, e := range es {
			if err := x.Append(e.off, e.pos); err != nil {
				t.Fatal(err)
			}
		}
		checkOffsetAgainstModel(t, x, es, r)
		if err := x.SanityCheck(); err != nil {
			t.Fatal(err)
		}

		// Untrimmed (crash): the zero terminator recovers the count.
		crashed := mustOpenOffset(t, crashCopy(t, path), 0)
		checkOffsetAgainstModel(t, crashed, es, r)
		ro, err := OpenOffsetReadOnly(crashCopy(t, path), testBase)
		if err != nil {
			t.Fatal(err)
		}
		checkOffsetAgainstModel(t, ro, es, r)
		ro.Close()

		// Trimmed (clean close).
		if err := x.Trim(); err != nil {
			t.Fatal(err)
		}
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Stat(path); st.Size() != int64(n*OffsetEntrySize) {
			t.Fatalf("trimmed size %d, want %d", st.Size(), n*OffsetEntrySize)
		}
		reopened := mustOpenOffset(t, path, 0)
		checkOffsetAgainstModel(t, reopened, es, r)
		// Writable again, at its used size: it grows as entries come.
		if st, _ := os.Stat(path); st.Size() != int64(n*OffsetEntrySize) {
			t.Fatalf("reopened size %d, want %d", st.Size(), n*OffsetEntrySize)
		}
		more := randomOffsets(r, 10)
		for i := range more {
			more[i].off += reopened.LastOffset() - testBase
			more[i].pos += 1 << 30
			if err := reopened.Append(more[i].off, more[i].pos); err != nil {
				t.Fatal(err)
			}
		}
		checkOffsetAgainstModel(t, reopened, append(es, more...), r)
	}
}

func TestOffsetTruncateTo(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 7))
	es := randomOffsets(r, 2000)
	path := offsetPath(t)
	x := mustOpenOffset(t, path, 0)
	for _, e := range es {
		if err := x.Append(e.off, e.pos); err != nil {
			t.Fatal(err)
		}
	}
	for _, cut := range []int64{es[1500].off + 1, es[1500].off, es[1000].off - 1, es[3].off, testBase + 1, testBase} {
		if err := x.TruncateTo(cut); err != nil {
			t.Fatal(err)
		}
		for len(es) > 0 && es[len(es)-1].off >= cut {
			es = es[:len(es)-1]
		}
		checkOffsetAgainstModel(t, x, es, r)
		checkOffsetAgainstModel(t, mustOpenOffset(t, crashCopy(t, path), 0), es, r)
	}
	es = randomOffsets(r, 5)
	for _, e := range es {
		if err := x.Append(e.off, e.pos); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.TruncateTo(math.MaxInt64); err != nil {
		t.Fatal(err)
	}
	checkOffsetAgainstModel(t, x, es, r)
	if err := x.Reset(); err != nil {
		t.Fatal(err)
	}
	checkOffsetAgainstModel(t, x, nil, r)
	checkOffsetAgainstModel(t, mustOpenOffset(t, crashCopy(t, path), 0), nil, r)

	// Truncating a trimmed index zeroes inside the file and frees slots.
	for _, e := range es {
		x.Append(e.off, e.pos)
	}
	if err := x.Trim(); err != nil {
		t.Fatal(err)
	}
	if err := x.TruncateTo(es[2].off); err != nil {
		t.Fatal(err)
	}
	checkOffsetAgainstModel(t, mustOpenOffset(t, crashCopy(t, path), 0), es[:2], r)
	if err := x.Append(es[2].off, es[2].pos); err != nil {
		t.Fatal(err)
	}
}

func TestOffsetAppendErrors(t *testing.T) {
	t.Parallel()
	x := mustOpenOffset(t, offsetPath(t), 4*OffsetEntrySize+5) // rounds down to 4 entries
	for _, c := range []struct {
		off, pos int64
		want     error
	}{
		{testBase + 1, 0, ErrOutOfOrder}, // the first entry can never be at position 0
		{testBase - 1, 100, ErrRelativeOverflow},
		{testBase + math.MaxInt32 + 1, 100, ErrRelativeOverflow},
		{testBase + 1, math.MaxInt32 + 1, ErrRelativeOverflow},
		{testBase, 100, nil},
		{testBase, 200, ErrOutOfOrder},
		{testBase + 1, 100, ErrOutOfOrder},
		{testBase + 1, 99, ErrOutOfOrder},
		{testBase + 1, 101, nil},
		{testBase + 5, 200, nil},
		{testBase + math.MaxInt32, math.MaxInt32, nil},
	} {
		if err := x.Append(c.off, c.pos); !errors.Is(err, c.want) {
			t.Fatalf("Append(%d, %d) = %v, want %v", c.off, c.pos, err, c.want)
		}
	}
	if !x.Full() {
		t.Fatal("not full after 4 entries")
	}
	if err := x.Append(testBase+math.MaxInt32, math.MaxInt32); !errors.Is(err, ErrFull) {
		t.Fatalf("Append on full index = %v, want ErrFull", err)
	}
	if err := x.TruncateTo(testBase + 5); err != nil {
		t.Fatal(err)
	}
	if x.Full() || x.Entries() != 2 {
		t.Fatalf("after TruncateTo: full %v, %d entries", x.Full(), x.Entries())
	}
}

func TestTimeIndex(t *testing.T) {
	t.Parallel()
	path := timePath(t)
	x := mustOpenTime(t, path, 5*TimeEntrySize+11) // 5 slots, 4 usable by MaybeAppend
	if ts, off := x.LastEntry(); ts != NoTimestamp || off != testBase {
		t.Fatalf("empty LastEntry = {%d, %d}", ts, off)
	}
	steps := []struct {
		ts, off int64
		want    error
	}{
		{-5, testBase + 1, nil},   // ignored: not above NoTimestamp
		{100, testBase + 10, nil}, // appended
		{100, testBase + 11, nil}, // ignored: equal timestamp
		{90, testBase + 12, nil},  // ignored: lower timestamp
		{200, testBase + 9, ErrOutOfOrder},
		{50, testBase + 9, ErrOutOfOrder}, // offsets are checked even when ignored, as in Kafka
		{200, testBase + 10, nil},         // same offset, later timestamp: appended
		{300, testBase - 1, ErrRelativeOverflow},
		{300, testBase + math.MaxInt32 + 1, ErrRelativeOverflow},
		{300, testBase + 20, nil},
		{400, testBase + 30, nil},
		{500, testBase + 40, ErrFull}, // reserved slot
		{400, testBase + 40, nil},     // no-op on a full index is not an error
	}
	for _, s := range steps {
		if err := x.MaybeAppend(s.ts, s.off); !errors.Is(err, s.want) {
			t.Fatalf("MaybeAppend(%d, %d) = %v, want %v", s.ts, s.off, err, s.want)
		}
	}
	want := [][2]int64{{100, testBase + 10}, {200, testBase + 10}, {300, testBase + 20}, {400, testBase + 30}}
	check := func(x *TimeIndex, want [][2]int64) {
		t.Helper()
		if x.Entries() != len(want) {
			t.Fatalf("Entries() = %d, want %d", x.Entries(), len(want))
		}
		for i, w := range want {
			if ts, off := x.Entry(i); ts != w[0] || off != w[1] {
				t.Fatalf("Entry(%d) = {%d, %d}, want %v", i, ts, off, w)
			}
		}
		for ts := int64(-10); ts < 700; ts++ {
			wantOff := int64(testBase)
			for _, w := range want {
				if w[0] <= ts {
					wantOff = w[1]
				}
			}
			if got := x.Lookup(ts); got != wantOff {
				t.Fatalf("Lookup(%d) = %d, want %d", ts, got, wantOff)
			}
		}
		if err := x.SanityCheck(); err != nil {
			t.Fatal(err)
		}
	}
	check(x, want)
	if !x.Full() {
		t.Fatal("not full with the reserved slot left")
	}
	if err := x.AppendFinal(600, testBase+50); err != nil {
		t.Fatal(err)
	}
	if err := x.AppendFinal(700, testBase+60); !errors.Is(err, ErrFull) {
		t.Fatalf("second AppendFinal = %v, want ErrFull", err)
	}
	want = append(want, [2]int64{600, testBase + 50})
	check(x, want)
	check(mustOpenTime(t, crashCopy(t, path), 5*TimeEntrySize), want)

	if err := x.TruncateTo(testBase + 20); err != nil {
		t.Fatal(err)
	}
	check(x, want[:2])
	if err := x.TruncateTo(testBase + 10); err != nil { // both entries share offset 10
		t.Fatal(err)
	}
	check(x, nil)
	check(mustOpenTime(t, crashCopy(t, path), 0), nil)

	for _, w := range want {
		x.MaybeAppend(w[0], w[1])
	}
	if err := x.Trim(); err != nil {
		t.Fatal(err)
	}
	if err := x.AppendFinal(1000, testBase+100); !errors.Is(err, ErrFull) {
		t.Fatalf("AppendFinal after Trim = %v, want ErrFull", err)
	}
	x.Close()
	check(mustOpenTime(t, path, 0), want[:4])
}

// TestTimeZeroFirstEntry covers the one genuine entry that looks like an
// empty slot.
func TestTimeZeroFirstEntry(t *testing.T) {
	t.Parallel()
	path := timePath(t)
	x := mustOpenTime(t, path, 0)
	if err := x.MaybeAppend(0, testBase); err != nil {
		t.Fatal(err)
	}
	if x.Entries() != 1 {
		t.Fatal("{0, 0} not appended")
	}
	if got := mustOpenTime(t, crashCopy(t, path), 0).Entries(); got != 0 {
		t.Fatalf("lone {0, 0} entry reopened as %d entries, want it dropped", got)
	}
	for i := int64(1); i <= 1000; i++ {
		if err := x.MaybeAppend(i*10, testBase+i); err != nil {
			t.Fatal(err)
		}
	}
	crashed := crashCopy(t, path)
	if err := x.Trim(); err != nil {
		t.Fatal(err)
	}
	x.Close()
	for _, p := range []string{crashed, path} {
		y := mustOpenTime(t, p, 0)
		if y.Entries() != 1001 {
			t.Fatalf("reopened %d entries, want 1001", y.Entries())
		}
		if ts, off := y.Entry(0); ts != 0 || off != testBase || y.Lookup(5) != testBase || y.Lookup(10) != testBase+1 {
			t.Fatalf("reopened entry 0 = {%d, %d}", ts, off)
		}
	}
}

func TestByteLayout(t *testing.T) {
	t.Parallel()
	op, tp := offsetPath(t), timePath(t)
	o := mustOpenOffset(t, op, 3*OffsetEntrySize)
	ti := mustOpenTime(t, tp, 3*TimeEntrySize)
	if err := o.Append(testBase+5, 4097); err != nil {
		t.Fatal(err)
	}
	if err := o.Append(testBase+0x01020304, 0x05060708); err != nil {
		t.Fatal(err)
	}
	if err := ti.MaybeAppend(0x0102030405060708, testBase+0x0a0b0c0d); err != nil {
		t.Fatal(err)
	}
	for _, x := range []interface{ Trim() error }{o, ti} {
		if err := x.Trim(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		path string
		want []byte
	}{
		{op, []byte{0, 0, 0, 5, 0, 0, 0x10, 0x01, 1, 2, 3, 4, 5, 6, 7, 8}},
		{tp, []byte{1, 2, 3, 4, 5, 6, 7, 8, 0x0a, 0x0b, 0x0c, 0x0d}},
	} {
		got, err := os.ReadFile(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(c.want) {
			t.Fatalf("%s holds % x, want % x", filepath.Base(c.path), got, c.want)
		}
	}
}

// TestGrownAsFilled checks that a writable index's file grows with its
// entries (doubling, from a block), not to its maximum at open, and that
// every byte of it has real blocks, never a sparse extension: a full disk
// is then an error of the append that grows it, not a SIGBUS on a store.
func TestGrownAsFilled(t *testing.T) {
	t.Parallel()
	path := offsetPath(t)
	x := mustOpenOffset(t, path, 0)
	defer x.Close()
	check := func(entries int) {
		t.Helper()
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		used := int64(entries * OffsetEntrySize)
		if st.Size() < used || st.Size() > max(2*used, growMinBytes) {
			t.Fatalf("%d entries: file of %d bytes, want %d to %d", entries, st.Size(), used, max(2*used, growMinBytes))
		}
		if blocks := st.Sys().(*syscall.Stat_t).Blocks * 512; blocks < st.Size() {
			t.Fatalf("%d entries: %d bytes allocated for a file of %d", entries, blocks, st.Size())
		}
	}
	check(0)
	for i := 1; i <= 5000; i++ {
		if err := x.Append(testBase+int64(i), int64(i)*100); err != nil {
			t.Fatal(err)
		}
		if i == 1 || i%997 == 0 || i == 5000 {
			check(i)
		}
	}
	tx, err := OpenTime(filepath.Join(t.TempDir(), "t.timeindex"), testBase, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	// The final slot has its blocks from the open on.
	if tx.c.size < TimeEntrySize || tx.c.size > growMinBytes {
		t.Fatalf("new time index file of %d bytes, want its first block", tx.c.size)
	}
}

func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func offsetBytes(entries ...[2]int32) []byte {
	var b []byte
	for _, e := range entries {
		b = binary.BigEndian.AppendUint32(b, uint32(e[0]))
		b = binary.BigEndian.AppendUint32(b, uint32(e[1]))
	}
	return b
}

func timeBytes(entries ...[2]int64) []byte {
	var b []byte
	for _, e := range entries {
		b = binary.BigEndian.AppendUint64(b, uint64(e[0]))
		b = binary.BigEndian.AppendUint32(b, uint32(e[1]))
	}
	return b
}

func TestCorrupt(t *testing.T) {
	t.Parallel()
	offsetCases := map[string][]byte{
		"size not a multiple":    append(offsetBytes([2]int32{1, 100}), 0),
		"decreasing offsets":     offsetBytes([2]int32{5, 100}, [2]int32{4, 200}),
		"decreasing positions":   offsetBytes([2]int32{1, 300}, [2]int32{2, 200}),
		"last offset below base": offsetBytes([2]int32{-3, 100}),
		"first at position 0":    offsetBytes([2]int32{1, 0}, [2]int32{2, 100}),
	}
	for name, b := range offsetCases {
		path := writeFile(t, "0.index", b)
		if _, err := OpenOffset(path, testBase, 0); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: OpenOffset = %v, want ErrCorrupt", name, err)
		}
		if _, err := OpenOffsetReadOnly(path, testBase); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: OpenOffsetReadOnly = %v, want ErrCorrupt", name, err)
		}
	}
	timeCases := map[string][]byte{
		"size not a multiple":      append(timeBytes([2]int64{1, 1}), 0, 0, 0, 0),
		"decreasing timestamps":    timeBytes([2]int64{5, 1}, [2]int64{4, 2}),
		"decreasing offsets":       timeBytes([2]int64{1, 2}, [2]int64{2, 1}),
		"offset below base":        timeBytes([2]int64{1, -1}),
		"negative first timestamp": timeBytes([2]int64{-2, 0}, [2]int64{1, 1}),
	}
	for name, b := range timeCases {
		path := writeFile(t, "0.timeindex", b)
		if _, err := OpenTime(path, testBase, 0); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: OpenTime = %v, want ErrCorrupt", name, err)
		}
		if _, err := OpenTimeReadOnly(path, testBase); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: OpenTimeReadOnly = %v, want ErrCorrupt", name, err)
		}
	}

	// Opening samples only the search path (here 0, 8, 12, 14, 15 of 16
	// entries); SanityCheck catches the rest.
	var es [][2]int32
	var ts [][2]int64
	for i := range int32(16) {
		es = append(es, [2]int32{i + 1, (i + 1) * 100})
		ts = append(ts, [2]int64{int64(i + 1), int64(i)})
	}
	es[3] = es[5]
	ts[3] = ts[5]
	o, err := OpenOffset(writeFile(t, "1.index", offsetBytes(es...)), testBase, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if err := o.SanityCheck(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("offset SanityCheck = %v, want ErrCorrupt", err)
	}
	ti, err := OpenTimeReadOnly(writeFile(t, "1.timeindex", timeBytes(ts...)), testBase)
	if err != nil {
		t.Fatal(err)
	}
	defer ti.Close()
	if err := ti.SanityCheck(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("time SanityCheck = %v, want ErrCorrupt", err)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	if _, err := OpenOffsetReadOnly(offsetPath(t), testBase); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing read-only = %v, want fs.ErrNotExist", err)
	}
	if _, err := OpenOffset(offsetPath(t), testBase, OffsetEntrySize-1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("tiny maxBytes = %v, want ErrInvalidArgument", err)
	}
	if _, err := OpenTime(timePath(t), -1, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("negative base = %v, want ErrInvalidArgument", err)
	}
	// An existing file larger than maxBytes keeps its entries (and is full).
	path := offsetPath(t)
	x := mustOpenOffset(t, path, 0)
	for i := int64(1); i <= 10; i++ {
		x.Append(testBase+i, i*100)
	}
	x.Trim()
	x.Close()
	y := mustOpenOffset(t, path, 4*OffsetEntrySize)
	if y.Entries() != 10 || !y.Full() {
		t.Fatalf("shrunk maxBytes: %d entries, full %v", y.Entries(), y.Full())
	}
}

func TestReadOnlyAndClosed(t *testing.T) {
	t.Parallel()
	path := offsetPath(t)
	x := mustOpenOffset(t, path, 0)
	x.Append(testBase+1, 100)
	ro, err := OpenOffsetReadOnly(path, testBase)
	if err != nil {
		t.Fatal(err)
	}
	if o, p := ro.Lookup(testBase + 5); o != testBase+1 || p != 100 || !ro.Full() {
		t.Fatalf("read-only Lookup = {%d, %d}, full %v", o, p, ro.Full())
	}
	for name, err := range map[string]error{
		"Append": ro.Append(testBase+2, 200), "TruncateTo": ro.TruncateTo(0), "Reset": ro.Reset(),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("read-only %s = %v, want ErrReadOnly", name, err)
		}
	}
	if err := ro.Trim(); err != nil {
		t.Fatal(err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	moved := path + ".deleted"
	if err := x.Rename(moved); err != nil || x.Path() != moved {
		t.Fatalf("Rename = %v, path %q", err, x.Path())
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if o, _ := x.Lookup(testBase + 5); o != testBase || x.Entries() != 0 {
		t.Fatal("closed index still answers")
	}
	for name, err := range map[string]error{"Append": x.Append(testBase+2, 200), "Sync": x.Sync(), "Trim": x.Trim()} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("closed %s = %v, want ErrClosed", name, err)
		}
	}
	if err := x.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(moved); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("file still there after Delete: %v", err)
	}
	if err := x.Delete(); err != nil {
		t.Fatalf("second Delete = %v", err)
	}
}

// TestConcurrentReaders runs one appender against several readers (run
// with -race). Entry k is {base+3k+1, 100(k+1)} and {10(k+1), base+3k+1}, so
// a reader can tell a genuine entry from a torn or stale one, and it checks
// that each answer is the right one for some prefix between the counts it
// saw before and after. Trim runs mid-stream, as on roll.
func TestConcurrentReaders(t *testing.T) {
	t.Parallel()
	const total = 60000
	o := mustOpenOffset(t, offsetPath(t), (total+100)*OffsetEntrySize)
	ti := mustOpenTime(t, timePath(t), (total+100)*TimeEntrySize)
	offsetOf := func(k int64) int64 { return testBase + 3*k + 1 }

	var done atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 99))
			for n := 0; !done.Load() || n < 1000; n++ {
				reads.Add(1)
				n1 := int64(o.Entries())
				target := testBase - 5 + r.Int64N(3*total+10)
				off, pos := o.Lookup(target)
				n2 := int64(o.Entries())
				if err := checkAnswer(n1, n2, target, off, pos, offsetOf); err != nil {
					errc <- fmt.Errorf("offset: %w", err)
					return
				}
				m1 := int64(ti.Entries())
				ts := r.Int64N(10*total + 20)
				toff := ti.Lookup(ts)
				m2 := int64(ti.Entries())
				// Timestamp 10(k+1) maps to offsetOf(k): rewrite as an offset lookup.
				tpos := int64(0)
				if toff != testBase {
					tpos = 100 * ((toff-testBase-1)/3 + 1)
				}
				if err := checkAnswer(m1, m2, offsetOf(ts/10-1), toff, tpos, offsetOf); err != nil {
					errc <- fmt.Errorf("time: ts %d: %w", ts, err)
					return
				}
				if n1 > 0 {
					if got, _ := o.Entry(int(n1 - 1)); got != offsetOf(n1-1) {
						errc <- fmt.Errorf("Entry(%d) = %d", n1-1, got)
						return
					}
				}
			}
		})
	}
	for k := range int64(total) {
		if err := o.Append(offsetOf(k), 100*(k+1)); err != nil {
			t.Fatal(err)
		}
		if err := ti.MaybeAppend(10*(k+1), offsetOf(k)); err != nil {
			t.Fatal(err)
		}
		if k%1000 == 0 {
			// Make sure readers observe many intermediate counts.
			for r := reads.Load(); reads.Load() < r+8; {
				runtime.Gosched()
			}
		}
	}
	if err := o.Trim(); err != nil {
		t.Fatal(err)
	}
	if err := ti.Trim(); err != nil {
		t.Fatal(err)
	}
	done.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

// checkAnswer verifies that {off, pos} is the greatest entry <= target of
// some prefix of length in [n1, n2].
func checkAnswer(n1, n2, target, off, pos int64, offsetOf func(int64) int64) error {
	if off == testBase && pos == 0 {
		if n1 > 0 && offsetOf(0) <= target {
			return fmt.Errorf("Lookup(%d) = none with %d entries", target, n1)
		}
		return nil
	}
	k := (off - testBase - 1) / 3
	if off != offsetOf(k) || pos != 100*(k+1) || k >= n2 || off > target {
		return fmt.Errorf("Lookup(%d) = {%d, %d}: not an entry of the first %d at or below the target", target, off, pos, n2)
	}
	if k+1 < n1 && offsetOf(k+1) <= target {
		return fmt.Errorf("Lookup(%d) = {%d, %d}: entry %d is closer", target, off, pos, k+1)
	}
	return nil
}

// Lookup against a linear model, with enough entries to use the warm tail,
// and TruncateTo followed by a reopen.
func TestIndexModel(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 20; round++ {
		path := offsetPath(t)
		tpath := timePath(t)
		x := mustOpenOffset(t, path, 1<<16)
		ti := mustOpenTime(t, tpath, 1<<16)
		n := r.IntN(3000)
		var offs, poss, tss, toffs []int64
		off, pos, ts := int64(testBase), int64(0), int64(r.IntN(3))
		for i := 0; i < n && !x.Full() && !ti.Full(); i++ {
			off += 1 + int64(r.IntN(5))
			pos += 1 + int64(r.IntN(100))
			if err := x.Append(off, pos); err != nil {
				t.Fatal(err)
			}
			offs, poss = append(offs, off), append(poss, pos)
			if r.IntN(3) > 0 {
				ts += int64(r.IntN(3))
			}
			before := ti.Entries()
			if err := ti.MaybeAppend(ts, off); err != nil {
				t.Fatal(err)
			}
			if ti.Entries() > before {
				tss, toffs = append(tss, ts), append(toffs, off)
			}
		}
		check := func(what string) {
			for q := int64(testBase - 2); q <= off+2; q++ {
				wo, wp := int64(testBase), int64(0)
				for i := range offs {
					if offs[i] <= q {
						wo, wp = offs[i], poss[i]
					}
				}
				if go_, gp := x.Lookup(q); go_ != wo || gp != wp {
					t.Fatalf("%s: Lookup(%d) = %d,%d want %d,%d", what, q, go_, gp, wo, wp)
				}
			}
			for q := int64(-2); q <= ts+2; q++ {
				wo := int64(testBase)
				for i := range tss {
					if tss[i] <= q {
						wo = toffs[i]
					}
				}
				if g := ti.Lookup(q); g != wo {
					t.Fatalf("%s: time Lookup(%d) = %d want %d", what, q, g, wo)
				}
			}
		}
		check("fresh")
		cut := int64(testBase) + int64(r.IntN(int(off-testBase+3)))
		if err := x.TruncateTo(cut); err != nil {
			t.Fatal(err)
		}
		if err := ti.TruncateTo(cut); err != nil {
			t.Fatal(err)
		}
		k := 0
		for k < len(offs) && offs[k] < cut {
			k++
		}
		offs, poss = offs[:k], poss[:k]
		k = 0
		for k < len(toffs) && toffs[k] < cut {
			k++
		}
		tss, toffs = tss[:k], toffs[:k]
		check("truncated")
		x.Close()
		ti.Close()
		x = mustOpenOffset(t, path, 1<<16)
		ti = mustOpenTime(t, tpath, 1<<16)
		if len(tss) == 1 && tss[0] == 0 && toffs[0] == testBase {
			tss, toffs = nil, nil // documented: a lone {0,0} is dropped
		}
		check("reopened")
	}
}
