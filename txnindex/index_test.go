package txnindex

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

func tmpPath(t *testing.T, base int64) string {
	return filepath.Join(t.TempDir(), fmt.Sprintf("%020d.txnindex", base))
}

func mustOpen(t *testing.T, path string, base int64) *Index {
	t.Helper()
	x, err := Open(path, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

func mustAppend(t *testing.T, x *Index, es ...Entry) {
	t.Helper()
	for _, e := range es {
		if err := x.Append(e); err != nil {
			t.Fatal(err)
		}
	}
}

func TestByteLayout(t *testing.T) {
	t.Parallel()
	want := []byte{
		0x00, 0x00, // version
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // producerId
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, // firstOffset 256
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x2c, // lastOffset 300
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x2d, // lastStableOffset 301
		0x00, 0x00,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, // producerId -2
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x2e, // 302
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x90, // 400
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x50, // 336
	}
	es := []Entry{
		{ProducerID: 0x0102030405060708, FirstOffset: 256, LastOffset: 300, LastStableOffset: 301},
		{ProducerID: -2, FirstOffset: 302, LastOffset: 400, LastStableOffset: 336},
	}
	path := tmpPath(t, 200)
	x := mustOpen(t, path, 200)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file exists before the first append: %v", err)
	}
	mustAppend(t, x, es...)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("file bytes\n got %x\nwant %x", got, want)
	}
	// And the reverse: hand-written bytes load as the entries.
	path2 := tmpPath(t, 200)
	if err := os.WriteFile(path2, want, 0o644); err != nil {
		t.Fatal(err)
	}
	if y := mustOpen(t, path2, 200); !slices.Equal(y.Entries(), es) {
		t.Fatalf("loaded %v, want %v", y.Entries(), es)
	}
}

func TestRoundTripAndOrder(t *testing.T) {
	t.Parallel()
	path := tmpPath(t, 100)
	x := mustOpen(t, path, 100)
	es := []Entry{
		{ProducerID: 1, FirstOffset: 90, LastOffset: 100, LastStableOffset: 90},
		{ProducerID: 2, FirstOffset: 101, LastOffset: 110, LastStableOffset: 111},
		{ProducerID: 1, FirstOffset: 105, LastOffset: 120, LastStableOffset: 121},
	}
	mustAppend(t, x, es...)
	for _, bad := range []Entry{
		{ProducerID: 3, FirstOffset: 100, LastOffset: 120},
		{ProducerID: 3, FirstOffset: 100, LastOffset: 119},
	} {
		if err := x.Append(bad); !errors.Is(err, ErrOutOfOrder) {
			t.Fatalf("append %v: %v, want ErrOutOfOrder", bad, err)
		}
	}
	if err := mustOpen(t, tmpPath(t, 100), 100).Append(Entry{LastOffset: 99}); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("append below base: %v, want ErrOutOfOrder", err)
	}
	if err := x.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := x.Append(Entry{LastOffset: 200}); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	y := mustOpen(t, path, 100)
	if !slices.Equal(y.Entries(), es) {
		t.Fatalf("reopened %v, want %v", y.Entries(), es)
	}
	// Appending after a reopen continues the file.
	e4 := Entry{ProducerID: 4, FirstOffset: 121, LastOffset: 130, LastStableOffset: 131}
	mustAppend(t, y, e4)
	y.Close()
	if z := mustOpen(t, path, 100); !slices.Equal(z.Entries(), append(es, e4)) {
		t.Fatalf("reopened %v", z.Entries())
	}
}

func encode(es ...Entry) []byte {
	b := make([]byte, len(es)*EntrySize)
	for i, e := range es {
		e.Put(b[i*EntrySize:])
	}
	return b
}

func TestOpenCorrupt(t *testing.T) {
	t.Parallel()
	a := Entry{ProducerID: 1, FirstOffset: 10, LastOffset: 20, LastStableOffset: 21}
	b := Entry{ProducerID: 2, FirstOffset: 15, LastOffset: 30, LastStableOffset: 31}
	badVersion := encode(a, b)
	badVersion[EntrySize+1] = 1
	cases := map[string]struct {
		data []byte
		base int64
	}{
		"torn":        {encode(a, b)[:EntrySize+7], 0},
		"version":     {badVersion, 0},
		"order":       {encode(b, a), 0},
		"duplicate":   {encode(a, a), 0},
		"below base":  {encode(a, b), 21},
		"below base2": {encode(a, b), 31},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			path := tmpPath(t, c.base)
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(path, c.base); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
			// Recovery starts again from an empty index.
			x, err := Create(path, c.base)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("Create left the file: %v", err)
			}
			e := Entry{ProducerID: 9, FirstOffset: 40, LastOffset: 50, LastStableOffset: 51}
			mustAppend(t, x, e)
			x.Close()
			if y := mustOpen(t, path, c.base); !slices.Equal(y.Entries(), []Entry{e}) {
				t.Fatalf("after recovery: %v", y.Entries())
			}
		})
	}
	// The boundary: lastOffset == base is fine.
	path := tmpPath(t, 20)
	os.WriteFile(path, encode(a, b), 0o644)
	mustOpen(t, path, 20)
}

func TestTruncateResetDelete(t *testing.T) {
	t.Parallel()
	path := tmpPath(t, 0)
	x := mustOpen(t, path, 0)
	es := []Entry{
		{ProducerID: 1, FirstOffset: 0, LastOffset: 10, LastStableOffset: 11},
		{ProducerID: 2, FirstOffset: 11, LastOffset: 20, LastStableOffset: 21},
		{ProducerID: 3, FirstOffset: 21, LastOffset: 30, LastStableOffset: 31},
	}
	mustAppend(t, x, es...)
	view := x.Entries()
	if err := x.TruncateTo(31); err != nil { // nothing to drop
		t.Fatal(err)
	}
	if err := x.TruncateTo(20); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(x.Entries(), es[:1]) {
		t.Fatalf("after TruncateTo(20): %v", x.Entries())
	}
	// An earlier view is untouched by truncation and later appends.
	mustAppend(t, x, Entry{ProducerID: 7, FirstOffset: 12, LastOffset: 15, LastStableOffset: 16})
	if !slices.Equal(view, es) {
		t.Fatalf("old view changed: %v", view)
	}
	want := []Entry{es[0], {ProducerID: 7, FirstOffset: 12, LastOffset: 15, LastStableOffset: 16}}
	x.Close()
	if fi, _ := os.Stat(path); fi.Size() != 2*EntrySize {
		t.Fatalf("file size %d", fi.Size())
	}
	y := mustOpen(t, path, 0)
	if !slices.Equal(y.Entries(), want) {
		t.Fatalf("reopened %v, want %v", y.Entries(), want)
	}
	if err := y.Reset(); err != nil {
		t.Fatal(err)
	}
	if len(y.Entries()) != 0 {
		t.Fatal("Reset left entries")
	}
	if fi, _ := os.Stat(path); fi.Size() != 0 {
		t.Fatalf("file size after Reset %d", fi.Size())
	}
	mustAppend(t, y, es[0]) // ordering restarts after Reset
	if err := y.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Delete left the file: %v", err)
	}
	if err := y.Delete(); err != nil { // idempotent
		t.Fatal(err)
	}
}

func TestEntriesClipped(t *testing.T) {
	x := mustOpen(t, tmpPath(t, 0), 0)
	mustAppend(t, x, Entry{LastOffset: 1}, Entry{LastOffset: 2})
	v := x.Entries()
	_ = append(v, Entry{LastOffset: 99})
	mustAppend(t, x, Entry{LastOffset: 3})
	if got := x.Entries(); got[2].LastOffset != 3 {
		t.Fatalf("caller append leaked into the index: %v", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = x.Entries() }); n != 0 {
		t.Fatalf("Entries allocates %v", n)
	}
	dst := make([]Entry, 0, 8)
	if n := testing.AllocsPerRun(100, func() { dst, _ = x.Collect(dst[:0], 0, 10) }); n != 0 {
		t.Fatalf("Collect allocates %v", n)
	}
}

func TestConcurrent(t *testing.T) {
	t.Parallel()
	x := mustOpen(t, tmpPath(t, 0), 0)
	const n = 500
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var dst []Entry
			for {
				select {
				case <-stop:
					return
				default:
				}
				es := x.Entries()
				for i, e := range es {
					if e.LastOffset != int64(2*i+1) || e.FirstOffset != int64(2*i) {
						t.Errorf("entry %d = %v", i, e)
						return
					}
				}
				dst, _ = x.Collect(dst[:0], 0, 1<<40)
				for i, e := range dst {
					if e.LastOffset != int64(2*i+1) {
						t.Errorf("Collect entry %d = %v", i, e)
						return
					}
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		if i == n/2 {
			// Truncating and re-appending must not disturb readers either.
			if err := x.TruncateTo(int64(2*(n/4) + 1)); err != nil {
				t.Error(err)
			}
			for j := n / 4; j < n/2; j++ {
				mustAppendT(t, x, j)
			}
		}
		mustAppendT(t, x, i)
	}
	close(stop)
	wg.Wait()
	if got := len(x.Entries()); got != n {
		t.Fatalf("%d entries, want %d", got, n)
	}
}

func mustAppendT(t *testing.T, x *Index, i int) {
	if err := x.Append(Entry{ProducerID: int64(i % 7), FirstOffset: int64(2 * i), LastOffset: int64(2*i + 1), LastStableOffset: int64(2*i + 2)}); err != nil {
		t.Error(err)
	}
}
