package producer

import (
	"errors"
	"testing"

	"github.com/idemlog/idemlog/errcode"
)

func TestMarkerClosesTransaction(t *testing.T) {
	t.Parallel()
	var l producerLog
	first := mustAppend(t, &l, mk(t, 1, 0, 0, 2, true))
	mustAppend(t, &l, mk(t, 1, 0, 2, 1, true))
	m := Marker{ProducerID: 1, Epoch: 0, CoordinatorEpoch: 3, Commit: false}
	if err := CheckMarker(&l.s, m); err != nil {
		t.Fatal(err)
	}
	done, ok := ApplyMarker(&l.s, m, 3, 5000)
	if !ok || done != (Completed{ProducerID: 1, FirstOffset: first, LastOffset: 3, Aborted: true}) {
		t.Fatalf("completed %+v %v", done, ok)
	}
	if l.s.TxnFirstOffset() != -1 || l.s.CoordinatorEpoch() != 3 || l.s.LastTimestamp != 5000 {
		t.Fatalf("state after marker: txn %d coord %d ts %d", l.s.TxnFirstOffset(), l.s.CoordinatorEpoch(), l.s.LastTimestamp)
	}
	// Same epoch: the cache survives and sequences continue.
	if l.s.Len() != 2 {
		t.Fatalf("cache %d after a same-epoch marker", l.s.Len())
	}
	l.leo = 4
	mustAppend(t, &l, mk(t, 1, 0, 3, 1, false))
	// An empty transaction completes nothing.
	if _, ok := ApplyMarker(&l.s, Marker{ProducerID: 1, Commit: true, CoordinatorEpoch: 3}, 9, 1); ok {
		t.Fatal("a marker without an open transaction completed one")
	}
}

func TestMarkerFences(t *testing.T) {
	t.Parallel()
	var l producerLog
	mustAppend(t, &l, mk(t, 1, 4, 0, 2, true))
	// A marker below the producer's epoch is refused.
	if err := CheckMarker(&l.s, Marker{ProducerID: 1, Epoch: 3}); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("stale marker: %v", err)
	}
	// A bumped marker (timeout abort, TV2 end) fences the old epoch: data
	// at epoch 4 gets 47, data at 5 must start at 0.
	ApplyMarker(&l.s, Marker{ProducerID: 1, Epoch: 5, CoordinatorEpoch: 1}, 2, 1)
	expect(t, &l, mk(t, 1, 4, 2, 1, true), ErrInvalidProducerEpoch, errcode.InvalidProducerEpoch)
	expect(t, &l, mk(t, 1, 5, 2, 1, true), ErrOutOfOrderSequence, errcode.OutOfOrderSequenceNumber)
	mustAppend(t, &l, mk(t, 1, 5, 0, 1, true))
	// A coordinator older than the last one that wrote is fenced (52).
	err := CheckMarker(&l.s, Marker{ProducerID: 1, Epoch: 5, CoordinatorEpoch: 0})
	if !errors.Is(err, ErrCoordinatorFenced) || errcode.Code(err) != errcode.TransactionCoordinatorFenced {
		t.Fatalf("stale coordinator: %v", err)
	}
	if err := CheckMarker(&l.s, Marker{ProducerID: 1, Epoch: 5, CoordinatorEpoch: 1}); err != nil {
		t.Fatalf("same coordinator epoch: %v", err)
	}
}

func TestStrictMarkerEpochs(t *testing.T) {
	t.Parallel()
	var l producerLog
	mustAppend(t, &l, mk(t, 1, 2, 0, 1, true))
	// TV2: ending an open transaction needs the bumped epoch.
	if err := CheckMarker(&l.s, Marker{ProducerID: 1, Epoch: 2, Strict: true}); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("unbumped strict marker: %v", err)
	}
	m := Marker{ProducerID: 1, Epoch: 3, Commit: true, Strict: true}
	if err := CheckMarker(&l.s, m); err != nil {
		t.Fatal(err)
	}
	ApplyMarker(&l.s, m, 1, 1)
	// A retry of the same marker (equal epoch, no open transaction) passes.
	if err := CheckMarker(&l.s, m); err != nil {
		t.Fatalf("strict marker retry: %v", err)
	}
}
