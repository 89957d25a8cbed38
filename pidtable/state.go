package pidtable

import "github.com/idemlog/idemlog/batch"

// MaxBatches is the number of batches cached per producer and partition
// (Kafka's deque of the last 5 batches, docs/SEMANTICS.md §2.1, §2.4).
const MaxBatches = 5

// BatchMeta is one cached batch. FirstSeq = batch.FirstSequence(LastSeq,
// OffsetDelta); FirstOffset = LastOffset - OffsetDelta.
type BatchMeta struct {
	LastOffset  int64
	Timestamp   int64 // the batch's maxTimestamp
	LastSeq     int32
	OffsetDelta int32
} // 24 bytes

// FirstSeq is the batch's first sequence number (wrapping past MaxInt32 as
// Kafka's sequences do).
func (b BatchMeta) FirstSeq() int32 { return batch.FirstSequence(b.LastSeq, b.OffsetDelta) }

// FirstOffset is the batch's base offset.
func (b BatchMeta) FirstOffset() int64 { return b.LastOffset - int64(b.OffsetDelta) }

// State is one producer's state in one partition. Its ZERO VALUE means "no
// state yet" so that claiming an entry writes nothing but the key:
// EpochPlus1 0 = no epoch (-1), TxnFirstPlus1 0 = no open transaction,
// CoordEpochPlus1 0 = -1, Count 0 = empty cache.
//
// State is a plain value (no locks, no pointers): copy it freely for a
// scratch check. 152 bytes.
type State struct {
	LastTimestamp   int64
	TxnFirstPlus1   int64                 // currentTxnFirstOffset + 1
	Batches         [MaxBatches]BatchMeta // ring buffer, oldest at Head
	CoordEpochPlus1 int32
	EpochPlus1      int32 // producer epoch + 1 (epochs are int16 >= -1)
	Head, Count     uint8
}

// Epoch is the producer epoch, -1 when none is known.
func (s *State) Epoch() int16 { return int16(s.EpochPlus1 - 1) }

// SetEpoch stores the producer epoch (-1 for none).
func (s *State) SetEpoch(e int16) { s.EpochPlus1 = int32(e) + 1 }

// TxnFirstOffset is the first offset of the open transaction, -1 when none
// is open.
func (s *State) TxnFirstOffset() int64 { return s.TxnFirstPlus1 - 1 }

// SetTxnFirstOffset stores the first offset of the open transaction; -1
// closes it.
func (s *State) SetTxnFirstOffset(o int64) { s.TxnFirstPlus1 = o + 1 }

// CoordinatorEpoch is the epoch of the last coordinator that wrote a marker,
// -1 initially.
func (s *State) CoordinatorEpoch() int32 { return s.CoordEpochPlus1 - 1 }

// SetCoordinatorEpoch stores the coordinator epoch.
func (s *State) SetCoordinatorEpoch(e int32) { s.CoordEpochPlus1 = e + 1 }

// Len is the number of cached batches (0 to MaxBatches).
func (s *State) Len() int { return int(s.Count) }

// At returns the i-th cached batch, 0 being the oldest. It panics unless
// 0 <= i < Len().
func (s *State) At(i int) *BatchMeta {
	if uint(i) >= uint(s.Count) {
		panic("pidtable: State.At index out of range")
	}
	j := int(s.Head) + i
	if j >= MaxBatches {
		j -= MaxBatches
	}
	return &s.Batches[j]
}

// Newest returns the most recently pushed batch, nil if the cache is empty.
func (s *State) Newest() *BatchMeta {
	if s.Count == 0 {
		return nil
	}
	return s.At(int(s.Count) - 1)
}

// Push appends b as the newest batch, evicting the oldest when MaxBatches
// are cached.
func (s *State) Push(b BatchMeta) {
	if s.Count < MaxBatches {
		j := int(s.Head) + int(s.Count)
		if j >= MaxBatches {
			j -= MaxBatches
		}
		s.Batches[j] = b
		s.Count++
		return
	}
	s.Batches[s.Head] = b
	s.Head++
	if s.Head == MaxBatches {
		s.Head = 0
	}
}

// ClearBatches empties the batch cache (Kafka clears it when the epoch
// changes).
func (s *State) ClearBatches() {
	s.Batches = [MaxBatches]BatchMeta{}
	s.Head, s.Count = 0, 0
}
