package producer

import (
	"fmt"
	"math"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/pidtable"
)

// Sentinel errors, with Kafka's codes.
var (
	// ErrOutOfOrderSequence: a gap, a partial overlap, a retry older than the
	// cache, or a new epoch not starting at 0.
	ErrOutOfOrderSequence = errcode.New(errcode.OutOfOrderSequenceNumber, "out-of-order sequence number")
	// ErrInvalidProducerEpoch: an epoch below the stored one (a fenced,
	// zombie producer).
	ErrInvalidProducerEpoch = errcode.New(errcode.InvalidProducerEpoch, "invalid producer epoch")
	// ErrInvalidTxnState: a non-transactional write while the producer has a
	// transaction open in the partition.
	ErrInvalidTxnState = errcode.New(errcode.InvalidTxnState, "invalid transaction state")
)

// Duplicate is the original placement of a batch that a retry repeats.
type Duplicate struct {
	BaseOffset int64
	LastOffset int64
	Timestamp  int64
}

// known reports whether s holds any state: a fresh table entry is all zero.
func known(s *pidtable.State) bool { return s.EpochPlus1 != 0 || s.Count != 0 }

// Check applies the rules to a data batch b with a producer id against the
// producer's state s, which it does not change. isDup is set, with the
// original's offsets and timestamp in dup, for an exact retry of a cached
// batch. (A value, not a pointer: the retry path allocates nothing.)
func Check(s *pidtable.State, b batch.Batch) (dup Duplicate, isDup bool, err error) {
	e, first := b.ProducerEpoch(), b.BaseSequence()
	last := b.LastSequence()
	if !known(s) {
		// An unknown producer may start at any sequence (KIP-360), but
		// not below epoch -1: a new entry's stored epoch is -1
		// (NoProducerEpoch), which Kafka's checkProducerEpoch compares
		// with. (Without this: epoch -5 was written and stored.)
		if e < batch.NoProducerEpoch {
			return Duplicate{}, false, fmt.Errorf("cannot append producer %d: epoch %d: %w", b.ProducerID(), e, ErrInvalidProducerEpoch)
		}
		return Duplicate{}, false, checkTxn(s, b)
	}
	stored := s.Epoch()
	if e == stored {
		// The common case first: the batch that follows the newest one.
		// The cache holds batches of this epoch appended in order, so
		// their sequences run contiguously (mod 2^31) from the oldest
		// one's first to the newest one's last, and the next sequence
		// can be a cached batch's first only if that run covers all 2^31
		// sequences: then it is the oldest batch's. A compressed batch
		// can claim that many records in its header (its records are not
		// counted here), so that one comparison stays. (Without this: a
		// retry of a batch of 1e9 claimed records after one reaching
		// MaxInt32 was written again.)
		if s.Count > 0 && inSequence(s.Newest().LastSeq, first) {
			if o := s.At(0); batch.FirstSequence(o.LastSeq, o.OffsetDelta) != first {
				return Duplicate{}, false, checkTxn(s, b)
			}
		}
		for i := s.Len() - 1; i >= 0; i-- {
			m := s.At(i)
			if m.LastSeq == last && batch.FirstSequence(m.LastSeq, m.OffsetDelta) == first {
				return Duplicate{BaseOffset: m.LastOffset - int64(m.OffsetDelta), LastOffset: m.LastOffset, Timestamp: m.Timestamp}, true, nil
			}
		}
	}
	switch {
	case e < stored:
		return Duplicate{}, false, fmt.Errorf("cannot append producer %d epoch %d: stored epoch %d: %w", b.ProducerID(), e, stored, ErrInvalidProducerEpoch)
	case e > stored:
		if first != 0 && stored != batch.NoProducerEpoch {
			return Duplicate{}, false, fmt.Errorf("cannot append producer %d: new epoch %d starts at sequence %d, not 0: %w", b.ProducerID(), e, first, ErrOutOfOrderSequence)
		}
	default:
		newest := s.Newest()
		if newest == nil {
			if first != 0 {
				return Duplicate{}, false, fmt.Errorf("cannot append producer %d epoch %d: sequence %d with no batch cached: %w", b.ProducerID(), e, first, ErrOutOfOrderSequence)
			}
		} else if !inSequence(newest.LastSeq, first) {
			return Duplicate{}, false, fmt.Errorf("cannot append producer %d epoch %d: sequence %d after %d: %w", b.ProducerID(), e, first, newest.LastSeq, ErrOutOfOrderSequence)
		}
	}
	return Duplicate{}, false, checkTxn(s, b)
}

// inSequence reports whether first follows last: last+1, or 0 after the
// largest sequence.
func inSequence(last, first int32) bool {
	if last == math.MaxInt32 {
		return first == 0
	}
	return first == last+1
}

func checkTxn(s *pidtable.State, b batch.Batch) error {
	if !b.IsTransactional() && s.TxnFirstOffset() >= 0 {
		return fmt.Errorf("cannot append producer %d: non-transactional batch during an open transaction: %w", b.ProducerID(), ErrInvalidTxnState)
	}
	return nil
}

// Apply records b, now written at baseOffset, in s. It is also the replay
// path: it never rejects, and a batch whose epoch differs from the stored
// one restarts the cache.
func Apply(s *pidtable.State, b batch.Batch, baseOffset int64) {
	e := b.ProducerEpoch()
	if !known(s) || e != s.Epoch() {
		s.ClearBatches()
		s.SetEpoch(e)
	}
	delta := b.LastOffsetDelta()
	s.Push(pidtable.BatchMeta{
		LastOffset:  baseOffset + int64(delta),
		Timestamp:   b.MaxTimestamp(),
		LastSeq:     b.LastSequence(),
		OffsetDelta: delta,
	})
	s.LastTimestamp = b.MaxTimestamp()
	if b.IsTransactional() && s.TxnFirstOffset() < 0 {
		s.SetTxnFirstOffset(baseOffset)
	}
}
