package producer

import (
	"fmt"

	"github.com/idemlog/idemlog/errcode"
	"github.com/idemlog/idemlog/pidtable"
)

// ErrCoordinatorFenced: a marker from a coordinator older than the last one
// that wrote for the producer (TRANSACTION_COORDINATOR_FENCED).
var ErrCoordinatorFenced = errcode.New(errcode.TransactionCoordinatorFenced, "transaction coordinator fenced")

// Marker is a COMMIT or ABORT decision as a partition receives it.
type Marker struct {
	ProducerID       int64
	Epoch            int16
	CoordinatorEpoch int32
	Commit           bool
	// Strict applies transaction-version-2 fencing (KIP-890, KIP-1228):
	// the marker must carry an epoch above the producer's (the coordinator
	// bumped it to end the transaction), except that an equal epoch with no
	// open transaction is an idempotent retry.
	Strict bool
}

// Completed is a transaction a marker closed in a partition.
type Completed struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64 // the marker's offset
	Aborted     bool
}

// CheckMarker applies Kafka's checks for a marker append (coordinator
// origin: epoch and coordinator epoch, never sequences).
func CheckMarker(s *pidtable.State, m Marker) error {
	if !known(s) {
		return nil
	}
	stored := s.Epoch()
	switch {
	case m.Epoch < stored:
		return fmt.Errorf("cannot write marker for producer %d: epoch %d below %d: %w", m.ProducerID, m.Epoch, stored, ErrInvalidProducerEpoch)
	case m.Strict && m.Epoch == stored && s.TxnFirstOffset() >= 0:
		return fmt.Errorf("cannot write marker for producer %d: epoch %d not bumped for an open transaction: %w", m.ProducerID, m.Epoch, ErrInvalidProducerEpoch)
	}
	if ce := s.CoordinatorEpoch(); m.CoordinatorEpoch < ce {
		return fmt.Errorf("cannot write marker for producer %d: coordinator epoch %d below %d: %w", m.ProducerID, m.CoordinatorEpoch, ce, ErrCoordinatorFenced)
	}
	return nil
}

// ApplyMarker records a marker written at offset with timestamp ts (also the
// replay path). It returns the transaction it completed, if the producer
// had one open: a marker for an empty transaction completes nothing but
// still moves the producer to the marker's epoch, which fences: data at an
// older epoch is refused afterwards, and the next batch must start at
// sequence 0.
func ApplyMarker(s *pidtable.State, m Marker, offset, ts int64) (Completed, bool) {
	var done Completed
	first := s.TxnFirstOffset()
	if first >= 0 {
		done = Completed{ProducerID: m.ProducerID, FirstOffset: first, LastOffset: offset, Aborted: !m.Commit}
	}
	if !known(s) || m.Epoch != s.Epoch() {
		s.ClearBatches()
		s.SetEpoch(m.Epoch)
	}
	s.SetCoordinatorEpoch(m.CoordinatorEpoch)
	s.LastTimestamp = ts
	s.SetTxnFirstOffset(-1)
	return done, first >= 0
}
