package pidtable

import (
	"math"
	"testing"
	"unsafe"
)

func TestStateZeroValue(t *testing.T) {
	t.Parallel()
	var s State
	if s.Epoch() != -1 || s.TxnFirstOffset() != -1 || s.CoordinatorEpoch() != -1 || s.Len() != 0 || s.Newest() != nil {
		t.Fatalf("zero State: epoch %d txn %d coord %d len %d", s.Epoch(), s.TxnFirstOffset(), s.CoordinatorEpoch(), s.Len())
	}
}

func TestStateSetters(t *testing.T) {
	t.Parallel()
	var s State
	for _, e := range []int16{-1, 0, 1, math.MaxInt16} {
		s.SetEpoch(e)
		if s.Epoch() != e {
			t.Fatalf("epoch %d read back %d", e, s.Epoch())
		}
	}
	s.SetEpoch(-1)
	if s.EpochPlus1 != 0 {
		t.Fatalf("epoch -1 stored as %d", s.EpochPlus1)
	}
	for _, o := range []int64{-1, 0, 42, math.MaxInt64 - 1} {
		s.SetTxnFirstOffset(o)
		if s.TxnFirstOffset() != o {
			t.Fatalf("txn first offset %d read back %d", o, s.TxnFirstOffset())
		}
	}
	s.SetTxnFirstOffset(-1)
	if s.TxnFirstPlus1 != 0 {
		t.Fatal("no transaction is not the zero value")
	}
	for _, c := range []int32{-1, 0, 7, math.MaxInt32 - 1} {
		s.SetCoordinatorEpoch(c)
		if s.CoordinatorEpoch() != c {
			t.Fatalf("coordinator epoch %d read back %d", c, s.CoordinatorEpoch())
		}
	}
}

func TestStateRing(t *testing.T) {
	t.Parallel()
	var s State
	for n := 1; n <= 12; n++ {
		s.Push(BatchMeta{LastOffset: int64(n), LastSeq: int32(n)})
		want := min(n, MaxBatches)
		if s.Len() != want {
			t.Fatalf("after %d pushes: len %d", n, s.Len())
		}
		// Oldest first: the last `want` pushes in order.
		for i := 0; i < want; i++ {
			if got := s.At(i).LastOffset; got != int64(n-want+1+i) {
				t.Fatalf("after %d pushes: At(%d) = %d, want %d", n, i, got, n-want+1+i)
			}
		}
		if s.Newest().LastOffset != int64(n) {
			t.Fatalf("after %d pushes: newest %d", n, s.Newest().LastOffset)
		}
	}
	s.At(0).Timestamp = 99 // At returns a pointer into the ring
	if s.Batches[s.Head].Timestamp != 99 {
		t.Fatal("At(0) is not the slot at Head")
	}
	s.ClearBatches()
	if s.Len() != 0 || s.Newest() != nil || s.Head != 0 || s.Batches != [MaxBatches]BatchMeta{} {
		t.Fatal("ClearBatches left batches")
	}
	s.Push(BatchMeta{LastOffset: 100})
	if s.Len() != 1 || s.At(0).LastOffset != 100 {
		t.Fatal("push after clear")
	}
}

func TestStateAtOutOfRange(t *testing.T) {
	t.Parallel()
	var s State
	s.Push(BatchMeta{})
	for _, i := range []int{-1, 1, 5} {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("At(%d) with one batch did not panic", i)
				}
			}()
			s.At(i)
		}()
	}
}

func TestBatchMetaDerived(t *testing.T) {
	t.Parallel()
	b := BatchMeta{LastOffset: 109, LastSeq: 9, OffsetDelta: 9}
	if b.FirstOffset() != 100 || b.FirstSeq() != 0 {
		t.Fatalf("first offset %d seq %d", b.FirstOffset(), b.FirstSeq())
	}
	w := BatchMeta{LastSeq: 1, OffsetDelta: 3} // sequence wrapped past MaxInt32
	if w.FirstSeq() != math.MaxInt32-1 {
		t.Fatalf("wrapped first seq %d", w.FirstSeq())
	}
}

func TestSizes(t *testing.T) {
	t.Parallel()
	if s := unsafe.Sizeof(BatchMeta{}); s != 24 {
		t.Fatalf("BatchMeta is %d bytes, want 24", s)
	}
	if s := unsafe.Sizeof(State{}); s != 152 {
		t.Fatalf("State is %d bytes, want 152 (146 of fields)", s)
	}
	// key (8) + lock (4) + State (152) = 164, aligned to 8: 168. The 160
	// target would need the lock word inside State's 6 bytes of tail
	// padding, which Go cannot lay out.
	if EntrySize > 168 {
		t.Fatalf("Entry is %d bytes, want <= 168", EntrySize)
	}
	t.Logf("State %d bytes, Entry %d bytes", unsafe.Sizeof(State{}), EntrySize)
}
