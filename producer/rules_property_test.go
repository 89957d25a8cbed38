package producer

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/idemlog/idemlog/batch"
	"github.com/idemlog/idemlog/pidtable"
)

// checkInKafkaOrder is Check as Kafka orders it: the duplicate scan of the
// cache first, then the epoch and sequence rules. Check answers the
// in-order case before scanning; the property test holds them equal.
func checkInKafkaOrder(s *pidtable.State, b batch.Batch) (Duplicate, bool, error) {
	e, first := b.ProducerEpoch(), b.BaseSequence()
	last := b.LastSequence()
	if !known(s) {
		return Duplicate{}, false, checkTxn(s, b)
	}
	stored := s.Epoch()
	if e == stored {
		for i := s.Len() - 1; i >= 0; i-- {
			m := s.At(i)
			if m.LastSeq == last && batch.FirstSequence(m.LastSeq, m.OffsetDelta) == first {
				return Duplicate{BaseOffset: m.LastOffset - int64(m.OffsetDelta), LastOffset: m.LastOffset, Timestamp: m.Timestamp}, true, nil
			}
		}
	}
	switch {
	case e < stored:
		return Duplicate{}, false, ErrInvalidProducerEpoch
	case e > stored:
		if first != 0 && stored != batch.NoProducerEpoch {
			return Duplicate{}, false, ErrOutOfOrderSequence
		}
	default:
		newest := s.Newest()
		if newest == nil {
			if first != 0 {
				return Duplicate{}, false, ErrOutOfOrderSequence
			}
		} else if !inSequence(newest.LastSeq, first) {
			return Duplicate{}, false, ErrOutOfOrderSequence
		}
	}
	return Duplicate{}, false, checkTxn(s, b)
}

// TestCheckMatchesKafkaOrder: on random states (in-order histories of
// random batch sizes, epoch bumps, sequences near the wrap) and random
// candidates (retries of cached batches, the next batch, gaps, overlaps,
// other epochs), Check gives the same verdict as the Kafka-ordered check.
func TestCheckMatchesKafkaOrder(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	starts := []int32{0, 1000, math.MaxInt32 - 40, math.MaxInt32 - 3}
	for round := range 3000 {
		var s pidtable.State
		epoch := int16(rng.IntN(3))
		seq := starts[rng.IntN(len(starts))]
		if rng.IntN(2) == 0 {
			seq = 0
		}
		var off int64
		var sent []batch.Batch
		for range rng.IntN(9) {
			n := 1 + rng.IntN(6)
			b := mk(t, 5, epoch, seq, n, false)
			Apply(&s, b, off)
			sent = append(sent, b)
			off += int64(n)
			seq = int32((int64(seq) + int64(n)) % (math.MaxInt32 + 1))
		}
		for range 20 {
			var cand batch.Batch
			switch k := rng.IntN(5); {
			case k == 0 && len(sent) > 0:
				cand = sent[rng.IntN(len(sent))] // a retry, cached or too old
			case k == 1:
				cand = mk(t, 5, epoch, seq, 1+rng.IntN(6), false) // the next
			case k == 2:
				cand = mk(t, 5, epoch+int16(rng.IntN(3))-1, int32(rng.IntN(3)), 1+rng.IntN(3), false)
			default:
				d := int32(rng.IntN(15)) - 10
				cand = mk(t, 5, epoch, int32((int64(seq)+int64(d)+math.MaxInt32+1)%(math.MaxInt32+1)), 1+rng.IntN(6), false)
			}
			gotDup, gotIs, gotErr := Check(&s, cand)
			wantDup, wantIs, wantErr := checkInKafkaOrder(&s, cand)
			if gotIs != wantIs || gotDup != wantDup || (gotErr == nil) != (wantErr == nil) ||
				(wantErr != nil && !errors.Is(gotErr, wantErr)) {
				t.Fatalf("round %d: state %+v, batch epoch %d seq %d..%d: Check (%+v, %v, %v), Kafka order (%+v, %v, %v)",
					round, s, cand.ProducerEpoch(), cand.BaseSequence(), cand.LastSequence(), gotDup, gotIs, gotErr, wantDup, wantIs, wantErr)
			}
		}
	}
}
