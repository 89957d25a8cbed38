package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// iterTestBatches returns three batches (codecs none, lz4, zstd; one, two
// and three records) laid end to end, and each batch's start.
func iterTestBatches(t testing.TB) (data []byte, starts []int) {
	for i, codec := range []Codec{CodecNone, CodecLZ4, CodecZstd} {
		recs := make([]testRecord, i+1)
		for j := range recs {
			recs[j] = testRecord{ts: int64(j), value: []byte{byte(i), byte(j)}}
		}
		b := buildBatch(t, codec, recs)
		b.SetBaseOffset(int64(10 * i))
		starts = append(starts, len(data))
		data = append(data, b...)
	}
	return data, starts
}

func TestIterWalksConcatenatedBatches(t *testing.T) {
	t.Parallel()
	data, starts := iterTestBatches(t)
	it := NewIter(data)
	var seen int
	for it.Next() {
		b := it.Batch()
		if it.Pos() != starts[seen] {
			t.Fatalf("batch %d at byte %d, want %d", seen, it.Pos(), starts[seen])
		}
		if b.BaseOffset() != int64(10*seen) || b.RecordsCount() != int32(seen+1) {
			t.Fatalf("batch %d: base offset %d, %d records", seen, b.BaseOffset(), b.RecordsCount())
		}
		if len(b) != cap(b) || it.End() != it.Pos()+len(b) {
			t.Fatalf("batch %d: len %d cap %d, ends at %d", seen, len(b), cap(b), it.End())
		}
		if _, err := Validate(b, 0); err != nil {
			t.Fatalf("batch %d as framed: %v", seen, err)
		}
		seen++
	}
	if it.Err() != nil || seen != 3 || len(it.Rest()) != 0 || it.End() != len(data) {
		t.Fatalf("walk ended after %d batches at byte %d of %d: %v", seen, it.End(), len(data), it.Err())
	}
	if it.Next() || it.Batch() != nil {
		t.Fatal("Next after the end found a batch")
	}
	empty := NewIter(nil)
	if empty.Next() || empty.Err() != nil {
		t.Fatalf("empty buffer: a batch or an error (%v)", empty.Err())
	}
}

// A walk stops at the first batch it cannot frame, with a typed error,
// the batches before it served and the rest left for the caller.
func TestIterStopsAtBadFraming(t *testing.T) {
	t.Parallel()
	data, starts := iterTestBatches(t)
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
		want error
	}{
		{"last batch cut short", func(b []byte) []byte { return b[:len(b)-1] }, ErrTruncated},
		{"header cut short", func(b []byte) []byte { return b[:starts[2]+offMagic] }, ErrTruncated},
		{"length below the header", func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[starts[2]+offBatchLength:], HeaderSize-LogOverhead-1)
			return b
		}, ErrTooSmall},
		{"negative length", func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[starts[2]+offBatchLength:], 0x80000000)
			return b
		}, ErrTooSmall},
		{"length past the buffer", func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[starts[2]+offBatchLength:], 1<<30)
			return b
		}, ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := tc.edit(bytes.Clone(data))
			it := NewIter(buf)
			n := 0
			for it.Next() {
				n++
			}
			if !errors.Is(it.Err(), tc.want) || n != 2 {
				t.Fatalf("%d batches, then %v; want 2 batches, then %v", n, it.Err(), tc.want)
			}
			if it.End() != starts[2] || !bytes.Equal(it.Rest(), buf[starts[2]:]) {
				t.Fatalf("stopped at byte %d, want %d (the bad batch)", it.End(), starts[2])
			}
			if it.Next() || it.Batch() != nil {
				t.Fatal("Next after a framing error found a batch")
			}
		})
	}
}

func TestIterAllocatesNothing(t *testing.T) {
	data, _ := iterTestBatches(t)
	var records int32
	if n := testing.AllocsPerRun(100, func() {
		for it := NewIter(data); it.Next(); {
			records += it.Batch().RecordsCount()
		}
	}); n != 0 {
		t.Fatalf("a walk over 3 batches: %v allocations, want 0", n)
	}
	if records == 0 {
		t.Fatal("no records counted")
	}
}

// FuzzIter: on any input the batches a walk frames tile the buffer from
// its start, each as long as Size says, and the walk ends at the buffer's
// end or at a typed framing error that Size reports for the rest.
func FuzzIter(f *testing.F) {
	data, starts := iterTestBatches(f)
	f.Add(data)
	f.Add(data[:len(data)-7])
	f.Add(data[:starts[1]+3])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		it := NewIter(data)
		end := 0
		for it.Next() {
			b := it.Batch()
			if it.Pos() != end {
				t.Fatalf("batch at byte %d, the previous ended at %d", it.Pos(), end)
			}
			if n, err := Size(data[end:]); err != nil || n != len(b) || len(b) < HeaderSize {
				t.Fatalf("batch of %d bytes at %d; Size says %d, %v", len(b), end, n, err)
			}
			end += len(b)
		}
		if it.End() != end {
			t.Fatalf("End %d, batches end at %d", it.End(), end)
		}
		if it.Err() == nil {
			if end != len(data) {
				t.Fatalf("no error, but the walk stopped at byte %d of %d", end, len(data))
			}
			return
		}
		if !errors.Is(it.Err(), ErrTruncated) && !errors.Is(it.Err(), ErrTooSmall) {
			t.Fatalf("framing error %v wraps neither ErrTruncated nor ErrTooSmall", it.Err())
		}
		if _, err := Size(it.Rest()); err == nil || err.Error() != it.Err().Error() {
			t.Fatalf("walk stopped with %v; Size of the rest: %v", it.Err(), err)
		}
	})
}
